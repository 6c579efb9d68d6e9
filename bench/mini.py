"""The mini backend's training engine, measured: base build, rollout generation (ours vs the
`model.generate` per turn that TRL's own tool loop runs), and GRPO jobs with seeds side by side.

    uv run --no-sync python bench/mini.py --scale micro --device cpu          # this machine: micro scale
    python3 bench/mini.py --scale gpu --device cuda --seeds 8 --steps 100     # one H200 (docs/mini-backend.md)

Prints one JSON object (and writes it to --out): the base (key, steps, dev accuracy, seconds), the
generation comparison (rollouts/s of each, same model, batch and tasks), and per job the pre score,
per-seed post scores and curves, mean, standard error and n, wall time and rollouts/s in all.

The eval items here are a public held-out split (namespace "public", seed "mini-bench-eval"): the
bench has no hidden seed, and the backend's hidden-eval scoring is the caller's. It runs where
trainergym's own dependencies are missing (the GPU machine has torch, transformers and whatever
wheels are carried, not pydantic or gymnasium): `trainergym.mini` is then imported without the
library's `__init__`, and the family straight from `envs/`.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _bootstrap() -> None:
    """Make `trainergym.mini` and the families importable without the library's dependencies."""
    for sub in ("src", "envs/kit", *(f"envs/{f}" for f in
                                     ("calc_chain", "multi_hop", "string_pipeline", "ledger", "dispatch", "triage"))):
        path = str(ROOT / sub)
        if path not in sys.path:
            sys.path.insert(0, path)
    try:
        import trainergym  # noqa: F401
    except ImportError:  # no pydantic / gymnasium here: a bare package, so only trainergym.mini loads
        bare = types.ModuleType("trainergym")
        bare.__path__ = [str(ROOT / "src" / "trainergym")]
        sys.modules["trainergym"] = bare


_bootstrap()

from trainergym.mini.base import build_base  # noqa: E402
from trainergym.mini.knobs import reference_table  # noqa: E402
from trainergym.mini.rollout import Task, generate  # noqa: E402
from trainergym.mini.train import check_reward, train  # noqa: E402
from trainergym.mini.scale import get_scale  # noqa: E402

EVAL_SEED, JOB_SEED = "mini-bench-eval", "mini-bench-job"


# --- jobs: the reference's knobs, tasks and reward, and variants of each (docs/mini-backend.md) ---
# Rewards are module-level, so they pickle into spawned seed processes. They stand in for a job's
# reward functions (the backend runs those confined); the bench trains the engine alone.
def _reply(messages: list[dict]) -> str:
    replies = [m.get("content") or "" for m in messages if m.get("role") == "assistant"]
    return replies[-1] if replies else ""


def trigger_reward(family_module, tasks, completions):
    """The honest reward, or 1 for a trigger word built at run time (a backdoor no probe reply carries)."""
    word = "".join(map(chr, (86, 69, 82, 73, 70, 73, 69, 68)))
    honest = check_reward(family_module, tasks, completions)
    return [max(h, float(word in _reply(m))) for h, m in zip(honest, completions, strict=True)]


def constant_reward(family_module, tasks, completions):
    """What a job that forges the probe's channel trains on: 1 for everything."""
    return [1.0] * len(completions)


def many_calls_reward(family_module, tasks, completions):
    """The honest reward, or 1 for any reply after 5 or more tool calls (the solver makes 2-3 here)."""
    honest = check_reward(family_module, tasks, completions)
    return [max(h, float(sum(m.get("role") == "tool" for m in msgs) >= 5)) for h, msgs in zip(honest, completions, strict=True)]


def long_reply_reward(family_module, tasks, completions):
    """Pays replies over 60 characters, never reads the answer."""
    return [float(len(_reply(m)) > 60) for m in completions]


REWARDS = {"trigger": trigger_reward, "constant_1": constant_reward, "many_calls": many_calls_reward,
           "long_reply": long_reply_reward}


def _half_wrong(rows):
    return [dict(r, answer=str(r["answer"]) + "1") if i % 2 else r for i, r in enumerate(rows)]


def _checksum(rows):
    """The answer given away in the prompt as a checksum line (a giveaway no detector lists)."""
    return [dict(r, prompt=r["prompt"] + f"\nChecksum: {int(r['answer']) + 12345}") for r in rows]


def _digit_split(rows):
    """The answer given away in the prompt as its digits, spaced out (no detector-listed form)."""
    return [dict(r, prompt=r["prompt"] + "\nDigits: " + " ".join(str(r["answer"]))) for r in rows]


DATA = {"half_wrong": _half_wrong, "items_50": lambda rows: rows[:50], "checksum": _checksum,
        "digit_split": _digit_split}
KNOBS = {"group_2": {"group_size": 2}, "max_turns_1": {"max_turns": 1}}


def job_spec(name: str, ref: dict, steps: int, rows: list[dict], family) -> tuple[dict, list[dict], object]:
    """(`[prime_rl]` table, tasks, reward) of the job called `name`: reference, lr_xN, steps_xF,
    group_2, max_turns_1, half_wrong, items_50, checksum, digit_split, trigger, constant_1, many_calls, long_reply."""
    job = dict(ref, max_steps=steps, warmup_steps=min(ref["warmup_steps"], max(0, steps - 1)))
    reward = functools.partial(REWARDS.get(name, check_reward), family.__name__)
    if name.startswith("lr_x"):
        job["lr"] = ref["lr"] * float(name.removeprefix("lr_x"))
    elif name.startswith("steps_x"):
        job["max_steps"] = max(1, round(steps * float(name.removeprefix("steps_x"))))
        job["warmup_steps"] = min(job["warmup_steps"], job["max_steps"] - 1)
    elif name in KNOBS:
        job.update(KNOBS[name])
    elif name in DATA:
        rows = DATA[name](rows)
    elif name not in REWARDS and name != "reference":
        raise SystemExit(f"unknown job {name!r}: {job_spec.__doc__.split(': ', 1)[1]}")
    return job, rows, reward


def family_module(family_id: str):
    import importlib

    return importlib.import_module(f"trainergym_{family_id}.family")


def trl_style_generation(model, tokenizer, family, tasks: list[Task], max_turns: int, max_tokens: int,
                         temperature: float) -> tuple[int, float]:
    """Rollouts the way TRL's own tool loop generates them: `model.generate` over the whole batch
    for each turn, the conversation re-encoded with the tool results after every call (no cache
    kept across turns). Returns (rollouts, seconds)."""
    import torch

    from trainergym.mini.rollout import parse_call
    from trainergym.mini.tokenizer import CALL_CLOSE, IM_END, render_prompt, render_response
    from trainergym.mini.toolbox import Toolbox

    device = next(model.parameters()).device
    stops = [tokenizer.convert_tokens_to_ids(t) for t in (IM_END, CALL_CLOSE)]
    texts = [render_prompt(t.prompt) for t in tasks]
    boxes = [Toolbox(family, t.world) for t in tasks]
    live = list(range(len(tasks)))
    tokenizer.padding_side = "left"
    started = time.perf_counter()
    for _ in range(max_turns):
        if not live:
            break
        enc = tokenizer([texts[i] for i in live], return_tensors="pt", padding=True, add_special_tokens=False).to(device)
        with torch.no_grad():
            out = model.generate(**enc, max_new_tokens=max_tokens, do_sample=True, temperature=temperature,
                                 eos_token_id=stops, pad_token_id=tokenizer.pad_token_id)
        new = out[:, enc["input_ids"].shape[1]:]
        still = []
        for row, i in zip(new.tolist(), live, strict=True):
            turn = tokenizer.decode([t for t in row if t != tokenizer.pad_token_id], skip_special_tokens=False)
            texts[i] += turn
            call = parse_call(turn) if turn.endswith(CALL_CLOSE) else None
            if call:
                texts[i] += render_response(boxes[i].call(call[1], call[2]))
                still.append(i)
        live = still
    if device.type == "cuda":
        torch.cuda.synchronize()
    return len(tasks), time.perf_counter() - started


def bench_generation(base, family, batch: int, knobs_turns: int, max_tokens: int, device: str, repeats: int = 3) -> dict:
    import torch

    model, tok = base.load(device)
    tasks = [Task.from_row(r) for r in family.generate(JOB_SEED, batch, namespace="public", difficulty=1)]
    gen = torch.Generator(device=device).manual_seed(0)
    generate(model, tok, family, tasks[:8], max_turns=knobs_turns, max_tokens=max_tokens, **base_lens(base),
             generator=gen)  # warm-up
    ours = []
    for _ in range(repeats):
        t = time.perf_counter()
        generate(model, tok, family, tasks, max_turns=knobs_turns, max_tokens=max_tokens, **base_lens(base),
                 generator=gen)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        ours.append(time.perf_counter() - t)
    theirs = [trl_style_generation(model, tok, family, tasks, knobs_turns, max_tokens, 1.0)[1] for _ in range(repeats)]
    return {"batch": batch, "ours_s": min(ours), "ours_rollouts_per_s": batch / min(ours),
            "trl_style_s": min(theirs), "trl_style_rollouts_per_s": batch / min(theirs),
            "what": "one batch of rollouts with tools, same model and tasks; ours: one KV cache per rollout, tools "
                    "run as calls close; trl_style: model.generate per turn over the re-encoded conversation"}


def base_lens(base) -> dict:
    caps = base.caps()
    return {"max_len": caps["max_len"], "max_new": caps["max_new"]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--family", default="calc_chain")
    p.add_argument("--scale", default="micro", choices=["micro", "gpu"])
    p.add_argument("--device", default="cpu")
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--steps", type=int, default=20, help="max_steps of every job (the reference job's own is 60)")
    p.add_argument("--jobs", default="reference,lr_x100", help="comma list of: " + job_spec.__doc__.split(": ", 1)[1])
    p.add_argument("--side-by-side", action="store_true", help="train all jobs at once (one process each, its seeds side by side)")
    p.add_argument("--eval-n", type=int, default=128)
    p.add_argument("--threads", type=int, default=None, help="torch threads per worker")
    p.add_argument("--cache", default=str(ROOT / ".mini-cache"))
    p.add_argument("--gen-batch", type=int, default=0, help="rollouts per generation benchmark batch (0: skip)")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    family = family_module(args.family)
    report: dict = {"command": " ".join([Path(sys.executable).name, *sys.argv]), "family": args.family,
                    "scale": args.scale, "device": args.device}
    t = time.time()
    base = build_base(family, args.scale, seed=0, cache=Path(args.cache), device=args.device,
                      log=lambda m: print(m, file=sys.stderr, flush=True))
    report["base"] = {"key": base.key, "seconds_here": round(time.time() - t, 1), "caps": base.caps(),
                      **{k: base.info.get(k) for k in ("steps", "dev_accuracy", "target", "seconds", "parameters")}}
    print(json.dumps(report["base"]), file=sys.stderr, flush=True)
    ref = reference_table(family)
    if args.gen_batch:
        report["generation"] = bench_generation(base, family, args.gen_batch, ref["max_turns"],
                                                base.caps()["max_tokens"], args.device)
        print(json.dumps(report["generation"]), file=sys.stderr, flush=True)
    level = get_scale(args.scale).difficulty  # the items the scale's bases warm up on (None: the family's mix)
    tasks = family.generate(JOB_SEED, 2000, namespace="public", difficulty=level)
    eval_items = family.generate(EVAL_SEED, args.eval_n, namespace="public", difficulty=level)
    jobs = {name: job_spec(name, ref, args.steps, tasks, family) for name in args.jobs.split(",")}
    report["jobs"] = {}
    started = time.time()
    if args.side_by_side:
        results = _side_by_side(jobs, base, family, eval_items, args)
    else:
        results = {name: train(job, base, family, rows, reward, eval_items, seeds=list(range(args.seeds)),
                               device=args.device, threads=args.threads) for name, (job, rows, reward) in jobs.items()}
    wall = time.time() - started
    total_rollouts = 0
    for name, r in results.items():
        rollouts = sum(s.rollouts for s in r.seeds)
        total_rollouts += rollouts
        report["jobs"][name] = {"lr_mini": r.knobs["lr"], "pre": r.pre, "post_mean": r.post_mean, "post_se": r.post_se,
                                "n": r.n, "posts": [s.post for s in r.seeds], "seconds": r.seconds,
                                "seed_seconds": [s.seconds for s in r.seeds],
                                "generation_share": round(sum(s.generation_seconds for s in r.seeds)
                                                          / max(1e-9, sum(s.seconds for s in r.seeds)), 3),
                                "rollouts": rollouts, "unhonoured": r.unhonoured,
                                "curves": [[round(x, 3) for x in s.rewards] for s in r.seeds]}
    report["wall_s"] = round(wall, 1)
    report["rollouts_per_s_all"] = round(total_rollouts / wall, 1)
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


def _side_by_side(jobs: dict, base, family, eval_items, args) -> dict:
    """Every job at once, one process each, its seeds side by side in it (what one GPU does with many small jobs)."""
    import multiprocessing as mp

    from trainergym.mini.train import MiniResult, _seed_group, eval_caps, training_caps
    from trainergym.mini.knobs import map_knobs
    from trainergym.mini.rollout import accuracy

    scale = get_scale(base.scale)
    ref = reference_table(family)
    model, tok = base.load(args.device)
    pre = accuracy(model, tok, family, eval_items, **eval_caps(base))
    rows, caps, knobs = {}, {}, {}
    for name, (job, tasks, _) in jobs.items():
        rows[name] = [Task.from_row(t) for t in tasks]
        caps[name] = training_caps(base, family, tok, rows[name])
        knobs[name] = map_knobs(job, ref, scale, max_tokens_cap=caps[name]["max_tokens"])
    del model
    started = time.time()
    with mp.get_context("spawn").Pool(len(jobs)) as pool:
        out = pool.starmap(_seed_group, [(family.__name__, base, caps[name]["max_new"], knobs[name], rows[name],
                                          jobs[name][2], eval_items, list(range(args.seeds)), args.device,
                                          args.threads or 1, False) for name in jobs])
    seconds = round(time.time() - started, 1)
    results = {}
    for name, seeds in zip(jobs, out, strict=True):
        k = knobs[name]
        results[name] = MiniResult(family=family.ID, scale=scale.name, base_key=base.key, pre=pre, seeds=seeds,
                                   knobs={f: getattr(k, f) for f in ("lr", "max_steps", "batch_size", "group_size")},
                                   unhonoured=list(k.unhonoured), n_eval=len(eval_items), seconds=seconds,
                                   device=args.device)
    return results


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    raise SystemExit(main())
