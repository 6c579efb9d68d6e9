"""Decode throughput of a job's stacked seeds on one GPU: the stack's size, processes side by side,
one decode step's attention kernels, and where a generation's time goes.

A GRPO step of the mini backend is mostly its generation (docs/mini-backend.md: 200 of 250 s for
string_pipeline's reference job). This plays what a training step plays, the reference job's own
tasks sampled at its temperature and caps from the family's cached base, `--stacks` copies of it
decoded as one batch (`stack.generate_stacked`), and reports rollouts and generated tokens per
second per stack size (with `--tf32`, also with TF32 matmuls), alternating across repeats so drift
hits all alike. `--procs P` then runs
P processes at once, each doing the same with the largest stack (what the ranking does), and
reports their total. `--attention ROWS,POSITIONS` times one decode step's attention at those
shapes through every SDPA backend and as two matmuls, fp32 and bf16, in the same run (the
comparison behind `SeedStack`'s attention); `--profile S` splits one generation of S stacked seeds
into host and device time and lists the operators that take the device's.

    python3 bench/mini_decode.py --family string_pipeline --cache .mini-cache --stacks 8,16 --procs 4 \
        --attention 1024,700 --profile 8                                                          # GPU machine
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import mini_ranking  # noqa: E402 - bench/mini.py's bootstrap, the export's files and the base builder

def _setup(family_id: str, scale: str, cache: str, device: str):
    from trainergym.mini.knobs import map_knobs, prime_rl_table
    from trainergym.mini.rollout import Task
    from trainergym.mini.scale import get_scale
    from trainergym.mini.train import training_caps

    manifest = json.loads((mini_ranking.EXPORT / f"{family_id}.json").read_text())
    job = manifest["jobs"]["reference"]
    family = mini_ranking.mini.family_module(family_id)
    base = mini_ranking._build(family_id, scale, cache, device)
    model, tok = base.load(device)
    tasks = [Task.from_row(json.loads(x))
             for x in gzip.decompress((mini_ranking.EXPORT / job["tasks"]).read_bytes()).splitlines()]
    caps = training_caps(base, family, tok, tasks)
    knobs = map_knobs(job["prime_rl"], prime_rl_table(manifest["reference_prime_rl"]), get_scale(scale),
                      max_tokens_cap=caps["max_tokens"])
    play = dict(max_turns=knobs.max_turns, max_tokens=knobs.max_tokens, temperature=knobs.temperature,
                max_len=base.caps()["max_len"], max_new=caps["max_new"])
    return family, base, model, tok, tasks, knobs, play, manifest


def _measure(family_id: str, scale: str, cache: str, device: str, stacks: list[int], repeats: int, rows: int | None,
             tf32: bool = False) -> list[dict]:
    """Every stack size `repeats` times, alternating (with `tf32`, each also with TF32 matmuls:
    tensor cores for the fp32 weights and cache, as an inference server's lower precision);
    one line per generation."""
    import torch

    from trainergym.mini.stack import generate_stacked

    torch.set_num_threads(1)
    family, base, model, tok, tasks, knobs, play, _ = _setup(family_id, scale, cache, device)
    per_seed = rows or knobs.batch_size
    out = []
    for r in range(repeats + 1):  # the first round warms up (kernels, allocator) and is not reported
        for stack, fast in [(st, f) for st in stacks for f in ((False, True) if tf32 else (False,))]:
            torch.backends.cuda.matmul.allow_tf32 = fast
            batch = [tasks[(r * 997 + s * per_seed + i) % len(tasks)] for s in range(stack) for i in range(per_seed)]
            gens = [torch.Generator(device=device).manual_seed(1000 * r + s) for s in range(stack)]
            torch.cuda.synchronize() if device.startswith("cuda") else None
            started = time.perf_counter()
            played = generate_stacked([model] * stack, tok, family,
                                      [batch[s * per_seed:(s + 1) * per_seed] for s in range(stack)],
                                      generators=gens, **play)
            torch.cuda.synchronize() if device.startswith("cuda") else None
            seconds = time.perf_counter() - started
            rollouts = [x for seed in played for x in seed]
            tokens = sum(len(x.completion_ids) for x in rollouts)
            if r:
                out.append({"stack": stack, "tf32": fast, "rows": len(rollouts), "seconds": round(seconds, 3),
                            "rollouts_per_s": round(len(rollouts) / seconds, 1), "tokens_per_s": round(tokens / seconds, 1),
                            "decode_steps": max(len(x.completion_ids) for x in rollouts)})
    return out


def _attention(device: str, rows: int, positions: int, heads: int, dim: int, repeats: int = 20) -> list[dict]:
    """One decode step's attention at the stack's shapes (a query per row against `positions` cached
    keys, a boolean mask as `SeedStack` passes), per SDPA backend and precision, and the same as two
    batched matmuls: which kernel the cache's reads go through decides a long rollout's step."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    out = []
    for dtype in (torch.float32, torch.bfloat16):
        q = torch.randn(rows, heads, 1, dim, device=device, dtype=dtype)
        k, v = (torch.randn(rows, heads, positions, dim, device=device, dtype=dtype) for _ in range(2))
        mask = torch.rand(rows, 1, 1, positions, device=device) > 0.1

        def matmuls():
            scores = (q @ k.transpose(-1, -2)) * dim ** -0.5
            return scores.masked_fill(~mask, float("-inf")).softmax(-1) @ v

        variants = {"matmuls": matmuls}
        for backend in (SDPBackend.MATH, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.FLASH_ATTENTION,
                        SDPBackend.CUDNN_ATTENTION):
            def sdpa(backend=backend):
                with sdpa_kernel(backend):
                    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=dim ** -0.5)
            variants[f"sdpa {backend.name.lower()}"] = sdpa

        def default():
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=dim ** -0.5)

        variants["sdpa default"] = default
        for name, fn in variants.items():
            try:
                fn()
                torch.cuda.synchronize() if device.startswith("cuda") else None
                started = time.perf_counter()
                for _ in range(repeats):
                    fn()
                torch.cuda.synchronize() if device.startswith("cuda") else None
                ms = 1000 * (time.perf_counter() - started) / repeats
                out.append({"dtype": str(dtype).split(".")[-1], "kernel": name, "ms": round(ms, 3),
                            "cache_gb_per_s": round(2 * k.numel() * k.element_size() / ms / 1e6, 1)})
            except RuntimeError as e:  # a backend that refuses these shapes, dtype or mask
                out.append({"dtype": str(dtype).split(".")[-1], "kernel": name, "refused": str(e).splitlines()[0][:120]})
    return out


def _profile(family_id: str, scale: str, cache: str, device: str, stack: int, rows: int | None) -> dict:
    """One generation of `stack` seeds under torch's profiler: the host's time against the device's,
    and the operators that take the device's."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from trainergym.mini.stack import generate_stacked

    torch.set_num_threads(1)
    family, base, model, tok, tasks, knobs, play, _ = _setup(family_id, scale, cache, device)
    per_seed = rows or knobs.batch_size
    batches = [tasks[s * per_seed:(s + 1) * per_seed] for s in range(stack)]
    gens = [torch.Generator(device=device).manual_seed(s) for s in range(stack)]
    generate_stacked([model] * stack, tok, family, batches, generators=gens, **play)  # warm-up
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.startswith("cuda") else [])
    started = time.perf_counter()
    with profile(activities=activities) as prof:
        generate_stacked([model] * stack, tok, family, batches, generators=gens, **play)
        torch.cuda.synchronize() if device.startswith("cuda") else None
    wall = time.perf_counter() - started
    events = prof.key_averages()
    key = "self_device_time_total" if device.startswith("cuda") else "self_cpu_time_total"
    top = sorted(events, key=lambda e: getattr(e, key, 0), reverse=True)[:12]
    return {"stack": stack, "rows": stack * per_seed, "wall_s": round(wall, 2),
            "device_busy_s": round(sum(getattr(e, "self_device_time_total", 0) for e in events) / 1e6, 2),
            "host_ops_s": round(sum(e.self_cpu_time_total for e in events) / 1e6, 2),
            "top": [{"op": e.key[:60], "calls": e.count, "self_s": round(getattr(e, key, 0) / 1e6, 3)} for e in top]}


def _summary(lines: list[dict]) -> list[dict]:
    by = {}
    for x in lines:
        by.setdefault((x["stack"], x["tf32"]), []).append(x)
    return [{"stack": s, "tf32": f, "rollouts_per_s": round(sum(x["rows"] for x in xs) / sum(x["seconds"] for x in xs), 1),
             "tokens_per_s": round(sum(x["tokens_per_s"] * x["seconds"] for x in xs) / sum(x["seconds"] for x in xs), 1),
             "repeats": len(xs)} for (s, f), xs in sorted(by.items())]


def main(argv=None) -> int:
    import multiprocessing as mp

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--family", default="string_pipeline")
    p.add_argument("--scale", default="gpu")
    p.add_argument("--cache", default=".mini-cache")
    p.add_argument("--device", default="cuda")
    p.add_argument("--stacks", default="4,8,16", help="seeds decoded together, comma list")
    p.add_argument("--rows", type=int, default=None, help="rollouts per seed (default: the reference job's batch)")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--tf32", action="store_true", help="each stack size also with TF32 matmuls")
    p.add_argument("--procs", type=int, default=0, help="then P processes at once, each the largest stack")
    p.add_argument("--profile", type=int, default=0, help="also profile one generation of this many stacked seeds")
    p.add_argument("--attention", default="", help="rows,positions: also time one decode step's attention kernels")
    args = p.parse_args(argv)
    stacks = [int(s) for s in args.stacks.split(",") if s]
    started = time.time()
    report = {"family": args.family, "device": args.device}
    if args.attention:
        from trainergym.mini.scale import get_scale

        sc = get_scale(args.scale)
        rows, positions = (int(x) for x in args.attention.split(","))
        report["attention"] = {"rows": rows, "positions": positions,
                               "kernels": _attention(args.device, rows, positions, sc.heads, sc.hidden // sc.heads)}
        print(json.dumps(report["attention"]), flush=True)
    if args.profile:
        report["profile"] = _profile(args.family, args.scale, args.cache, args.device, args.profile, args.rows)
        print(json.dumps(report["profile"]), flush=True)
    alone = _measure(args.family, args.scale, args.cache, args.device, stacks, args.repeats, args.rows, args.tf32) \
        if stacks else []
    for line in alone:
        print(json.dumps({"what": "alone", **line}), flush=True)
    report["alone"] = _summary(alone)
    if args.procs:
        if args.device.startswith("cuda"):
            import torch

            torch.cuda.empty_cache()  # the big stacks' cache held 58-87 GiB here: the processes ran out beside it
        with mp.get_context("spawn").Pool(args.procs) as pool:
            t0 = time.perf_counter()
            parts = pool.starmap(_measure, [(args.family, args.scale, args.cache, args.device, [stacks[-1]], args.repeats, args.rows)]
                                 * args.procs)
            wall = time.perf_counter() - t0
        together = _summary([x for part in parts for x in part])
        # Each process's rate is its rows over its own seconds; they overlap, so the total is their sum.
        report["side_by_side"] = {"procs": args.procs, "stack": stacks[-1], "wall_s": round(wall, 1),
                                  "total_rollouts_per_s": round(together[0]["rollouts_per_s"] * args.procs, 1),
                                  "note": "TF32 off"}
    report["seconds"] = round(time.time() - started, 1)
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
