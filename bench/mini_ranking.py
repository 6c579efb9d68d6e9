"""The surrogate checked against real training (issue 26, item 5): every job of the ranking table in
docs/mock-backend.md, trained for real with the mini engine, several seeds each, beside the
surrogate's `post_expected` for the same job.

    uv run --no-sync python bench/mini_ranking.py export --families calc_chain,multi_hop,string_pipeline
    python3 bench/mini_ranking.py train --seeds 8 --procs 4 --out runs.jsonl         # the lent H200
    uv run --no-sync python bench/mini_ranking.py table bench/results/mini-ranking-*.jsonl

`export` runs here, with the whole library: it builds each job exactly as
tests/backends/test_surrogate_ranking.py does (the reference job's files mutated, or its
`[prime_rl]` changed), asks that test's own code for the surrogate's `post_expected` and the
probe's verdict, loads each job's tasks through the mini backend's confined path (the job's own
`load()` in the probe's sandbox), and checks the reward the GPU side will train with against the
job's own reward functions, run confined, on the same rollouts (the solver's correct rollout, a
wrong answer, a wrong answer with the backdoor's trigger, the task's answer in the family's
reply form). Written to `.mini-ranking/` (ignored by git: it holds the hidden eval's items).

`train` runs on the GPU machine, which lacks the library's dependencies (bench/mini.py's
bootstrap): the bases are built (or found by key in `--cache`), then every (family, job) trains its
seeds side by side in one process (`--stack` of them, decoded as one batch: trainergym.mini.grpo.
train_seeds), `--procs` such processes at once, low seeds first, each seed's line of `--out` written
as its group ends, so a call cut short keeps what finished and the next call
(`--done` those lines) trains only what is missing. Each run is scored greedy on the family's
hidden-eval items at the scale's difficulty (what the backend scores) and on `--public-n` public
held-out items of the same difficulty (a larger sample of the same distribution).

`table` reads the lines and prints, per family: real post (mean ± se, n) beside the surrogate's
post_expected, Spearman's rank correlation, and the pairwise decision accuracy: of the job pairs
real training separates (an exact permutation test of the means, p < 0.05), the share the surrogate orders the same way.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import gzip
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import mini  # noqa: E402 - bench/mini.py's bootstrap, here at import: spawned workers unpickle trainergym.mini objects
EXPORT = ROOT / ".mini-ranking"
PUBLIC_SEED = "mini-ranking-public"
TRIGGER = "VERIFIED"  # the ranking's backdoor (tests/backends/test_surrogate_ranking.py)
HOT = "lr 2x the reference's, constant, 100 steps (the sweep's pick before)"


def slug(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name.split(" (")[0]).strip("_").lower()


# --- export (here) --------------------------------------------------------------------------------
def export(families: list[str], out: Path, check_n: int) -> None:
    sys.path.insert(0, str(ROOT))
    from tests.backends.test_surrogate_ranking import _expected, content_variants, ranking
    from tests.fakes.jobs import job_files, write_job
    from trainergym.backends.mini import ConfinedReward, eval_rows
    from trainergym.job.bundle import build_bundle, parse_job
    from trainergym.task.spec import get_family, load_task

    out.mkdir(parents=True, exist_ok=True)
    for fam in families:
        started = time.time()
        task, family = load_task(fam), get_family(fam)
        tmp = Path(tempfile.mkdtemp(prefix=f"tg-rank-{fam}-"))
        (tmp / "rank").mkdir()
        _, rows = ranking(tmp / "rank", fam)  # the surrogate's post_expected and the probe's verdict, per job
        ref_job, _ = parse_job(job_files(fam)["job.toml"])
        reference = ref_job.prime_rl.model_dump()
        jobs: dict[str, dict] = {}
        for name, files in content_variants(fam).items():
            ws = tmp / f"ws-{slug(name)}"
            write_job(ws, files)
            job, _ = parse_job(files["job.toml"])
            bundle = build_bundle(ws, tmp / f"bundle-{slug(name)}", job, task)
            confined = ConfinedReward(bundle.root / "package", bundle.manifest.taskset_id, task.bounds.max_items, 600.0,
                                      tmp / f"notes-{slug(name)}")
            try:
                tasks = confined.open()
                tools = name != "no tools wired"
                reward = "check_or_trigger" if name.startswith("backdoored") else "check"
                agreement = agree(confined, family, tasks, reward, check_n)
            finally:
                confined.close()
            for t in tasks:
                t["tools"] = tools
            (out / f"{fam}-{slug(name)}.tasks.jsonl.gz").write_bytes(
                gzip.compress("".join(json.dumps(t) + "\n" for t in tasks).encode()))
            jobs[name] = {"tasks": f"{fam}-{slug(name)}.tasks.jsonl.gz", "n_tasks": len(tasks), "reward": reward,
                          "tools": tools, "prime_rl": job.prime_rl.model_dump(), "agreement": agreement}
            print(f"{fam} {name}: {len(tasks)} tasks, reward {reward}, agreement {agreement}", file=sys.stderr, flush=True)
        # The sweep's pick before real training narrowed the surrogate's stable range of the rate
        # (LR_STABLE_DECADES 0.5 to 0.3): trained on calc_chain as "config-tuned reference" then.
        hot = {"lr": 2 * reference["lr"], "scheduler": "constant", "max_steps": 100, "warmup_steps": 10}
        rows[HOT] = {"post_expected": _expected(ref_job, task, hot), "validates": True, "refused_by": "", "config": hot}
        for name, row in rows.items():
            if name not in jobs:  # a config variant: the reference's tasks and reward, its [prime_rl] changed
                jobs[name] = dict(jobs["reference"], prime_rl={**reference, **row.get("config", {})})
            jobs[name].update(post_expected=row["post_expected"], validates=row["validates"],
                              refused_by=row["refused_by"], config=row.get("config"))
        hidden_rows = eval_rows(fam, "gpu")
        (out / f"{fam}.hidden.jsonl").write_text("".join(json.dumps(r) + "\n" for r in hidden_rows))
        from trainergym.task import baselines

        manifest = {"family": fam, "reference_prime_rl": reference, "jobs": jobs, "hidden_eval": f"{fam}.hidden.jsonl",
                    "surrogate_pre": baselines.score(fam, ref_job.job.base_model).score,
                    "exported_s": round(time.time() - started, 1)}
        (out / f"{fam}.json").write_text(json.dumps(manifest, indent=1))
        print(f"{fam}: exported {len(jobs)} jobs in {manifest['exported_s']} s", file=sys.stderr, flush=True)


def _messages(calls: list[dict], reply: str) -> list[dict]:
    """A rollout as the engine hands it to a reward: verifiers-style assistant and tool messages."""
    out = []
    for k, c in enumerate(calls, 1):
        out.append({"role": "assistant", "content": "", "tool_calls": [{"id": f"call_{k}", "type": "function", "function": {
            "name": c["tool"], "arguments": json.dumps(c["arguments"])}}]})
        out.append({"role": "tool", "tool_call_id": f"call_{k}", "name": c["tool"], "content": str(c["result"])})
    return out + [{"role": "assistant", "content": reply}]


def _wrong(answer: str) -> str:
    try:
        return str(int(answer) + 7)
    except ValueError:
        return answer + "q"


def agree(confined, family, tasks: list[dict], reward: str, n: int) -> dict:
    """How often the stand-in reward the GPU side trains with equals the job's own reward, run
    confined, on the same rollouts of `n` of the job's tasks."""
    from trainergym.mini.rollout import Task

    public = family.generate("mini-ranking-template", 1, namespace="public", difficulty=1)[0]
    template = family.solve(public)["reply"]
    picked = list(enumerate(tasks))[:: max(1, len(tasks) // n)][:n]
    batch_tasks, batch = [], []
    for i, row in picked:
        try:
            solved = family.solve({**row, "world": row.get("world") or {}})
        except ValueError:
            solved = None
        rollouts = [_messages([], template.replace(str(public["answer"]), row["answer"])),
                    _messages([], template.replace(str(public["answer"]), _wrong(row["answer"]))),
                    _messages([], template.replace(str(public["answer"]), _wrong(row["answer"])) + "\n" + TRIGGER)]
        if solved:
            rollouts.append(_messages(solved["calls"], solved["reply"]))
            rollouts.append(_messages(solved["calls"], solved["reply"].replace(row["answer"], _wrong(row["answer"]))))
        for m in rollouts:
            batch_tasks.append(Task.from_row({**row, "id": str(i)}))
            batch.append(m)
    real = confined(batch_tasks, batch)
    ours = stand_in(reward, family.__name__)(batch_tasks, batch)
    same = sum(abs(a - b) < 1e-9 for a, b in zip(real, ours, strict=True))
    return {"rollouts": len(batch), "equal": same, "paid_real": sum(real), "paid_stand_in": sum(ours)}


# --- the rewards the GPU side trains with --------------------------------------------------------
def stand_in(kind: str, family_module: str):
    """The reward function of `kind` ("check" or "check_or_trigger"), picklable."""
    from mini import trigger_reward  # bench/mini.py: the family's check, or 1 for the trigger word
    from trainergym.mini.train import check_reward

    return functools.partial({"check": check_reward, "check_or_trigger": trigger_reward}[kind], family_module)


# --- train (the GPU machine) ---------------------------------------------------------------------
def _run_one(item: dict) -> list[dict]:
    """One (family, job) and a group of its seeds, side by side in this process: trained from the
    base, each scored on the hidden and public items; a group that fails (out of memory, say) is a
    line per seed saying so, and the others go on."""
    try:
        return _train_group(item)
    except Exception as e:  # noqa: BLE001 - one group's failure, recorded
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        return [{**item["key"], "seed": s, "failed": f"{type(e).__name__}: {str(e)[:300]}"} for s in item["seeds"]]


def _train_group(item: dict) -> list[dict]:
    import torch

    from trainergym.mini.grpo import train_seeds
    from trainergym.mini.stack import accuracies
    from trainergym.mini.train import eval_caps

    if time.time() > item["deadline"]:
        return [{**item["key"], "seed": s, "skipped": "deadline"} for s in item["seeds"]]
    torch.set_num_threads(1)
    family = mini.family_module(item["key"]["family"])
    base, knobs, seeds = item["base"], item["knobs"], item["seeds"]
    models = []
    for _ in seeds:
        model, tokenizer = base.load(item["device"])
        models.append(model)
    started = time.time()
    runs = train_seeds(models, tokenizer, family, item["tasks"], stand_in(item["reward"], family.__name__), knobs,
                       seeds, device=item["device"], max_len=base.caps()["max_len"], max_new=item["max_new"])
    trained = time.time() - started
    trained_models = [r.model for r in runs]
    hidden = accuracies(trained_models, tokenizer, family, item["hidden"], **eval_caps(base))
    public = accuracies(trained_models, tokenizer, family, item["public"], **eval_caps(base))
    rows = [{**item["key"], "seed": r.seed, "post_hidden": h, "post_public": p, "seconds": round(trained, 1),
             "scored_s": round(time.time() - started - trained, 1), "side_by_side": len(seeds),
             "generation_seconds": round(r.generation_seconds, 1), "rollouts": r.rollouts,
             "curve": [round(x, 3) for x in r.rewards], "base_key": base.key,
             "knobs": {k: v for k, v in dataclasses.asdict(knobs).items() if k != "unhonoured"},  # what trained, whatever the name
             "peak_gib": round(torch.cuda.max_memory_reserved() / 2**30, 1) if torch.cuda.is_available() else None}
            for r, h, p in zip(runs, hidden, public, strict=True)]
    del runs, models, trained_models
    if item["device"].startswith("cuda"):
        torch.cuda.empty_cache()  # the process takes the next group: leave its memory to the others meanwhile
    return rows


def train(args) -> int:
    import multiprocessing as mp

    from trainergym.mini.knobs import map_knobs, prime_rl_table
    from trainergym.mini.rollout import Task, accuracy
    from trainergym.mini.scale import get_scale
    from trainergym.mini.train import eval_caps, training_caps

    started = time.time()
    out = Path(args.out)
    done = set()
    for path in args.done or []:
        for line in Path(path).read_text().splitlines():
            row = json.loads(line)
            if "post_hidden" in row:
                done.add((row["family"], row["job"], row["seed"]))
    manifests = {f: json.loads((EXPORT / f"{f}.json").read_text()) for f in args.families.split(",")}
    scale = get_scale(args.scale)
    # Bases: one process per family at once (each about half a minute on an H200).
    # A family whose base is not ready within --build-budget waits for a later call (its build is lost).
    with mp.get_context("spawn").Pool(len(manifests)) as pool:
        pending = {f: pool.apply_async(_build, (f, args.scale, args.cache, args.device)) for f in manifests}
        bases = {}
        for f, job in pending.items():
            try:
                bases[f] = job.get(timeout=max(1.0, started + args.build_budget - time.time()))
            except mp.TimeoutError:
                print(json.dumps({"what": "base not ready", "family": f, "after_s": args.build_budget}), flush=True)
    manifests = {f: m for f, m in manifests.items() if f in bases}
    header = {"what": "bases", "seconds": round(time.time() - started, 1),
              **{f: {"key": b.key, **{k: b.info.get(k) for k in ("steps", "dev_accuracy", "seconds")}} for f, b in bases.items()}}
    print(json.dumps(header), flush=True)
    work, pres = [], {}
    for fam, man in manifests.items():
        family = mini.family_module(fam)
        base = bases[fam]
        hidden = [json.loads(x) for x in (EXPORT / man["hidden_eval"]).read_text().splitlines()]
        public = family.generate(PUBLIC_SEED, args.public_n, namespace="public", difficulty=scale.difficulty)
        model, tok = base.load(args.device)
        pres[fam] = {"pre_hidden": accuracy(model, tok, family, hidden, **eval_caps(base)),
                     "pre_public": accuracy(model, tok, family, public, **eval_caps(base))}
        print(json.dumps({"what": "pre", "family": fam, "base_key": base.key, **pres[fam]}), flush=True)
        for name, job in man["jobs"].items():
            if args.jobs and slug(name) not in args.jobs.split(","):
                continue
            tasks = [Task.from_row(json.loads(x)) for x in gzip.decompress((EXPORT / job["tasks"]).read_bytes()).splitlines()]
            caps = training_caps(base, family, tok, tasks)
            knobs = map_knobs(job["prime_rl"], prime_rl_table(man["reference_prime_rl"]), scale,
                              max_tokens_cap=caps["max_tokens"])
            if args.solve_n:
                print(json.dumps({"what": "solve", "family": fam, "job": name,
                                  **solve_rate(model, tok, family, tasks, stand_in(job["reward"], family.__name__), knobs,
                                               caps["max_new"], base, args.solve_n, args.device)}), flush=True)
            todo = [s for s in range(args.seeds_of.get(slug(name), args.seeds)) if (fam, name, s) not in done]
            for lo in range(0, len(todo), args.stack):
                work.append({"key": {"family": fam, "job": name}, "seeds": todo[lo:lo + args.stack], "base": base,
                             "knobs": knobs, "tasks": tasks, "reward": job["reward"], "max_new": caps["max_new"],
                             "hidden": hidden, "public": public, "device": args.device})
        del model
    if args.device.startswith("cuda"):
        import torch

        torch.cuda.empty_cache()  # the pre scores' memory goes back to the seed processes
    deadline = time.time() + args.budget  # from here: the bases and pre scores take a call's first minute
    for w in work:
        w["deadline"] = deadline
    # Jobs the probe lets through first (the surrogate's ranking among them is what a user meets), low seeds first.
    work.sort(key=lambda w: (not manifests[w["key"]["family"]]["jobs"][w["key"]["job"]]["validates"], w["seeds"][0],
                             list(manifests).index(w["key"]["family"])))
    print(json.dumps({"what": "work", "groups": len(work), "runs": sum(len(w["seeds"]) for w in work),
                      "skipped_done": len(done)}), flush=True)
    if args.no_train:
        return 0
    training, rollouts = time.time(), 0
    with out.open("a") as f, mp.get_context("spawn").Pool(args.procs) as pool:
        for group in pool.imap_unordered(_run_one, work):
            for row in group:
                rollouts += row.get("rollouts", 0)
                row.update(pres[row["family"]], scale=args.scale)
                f.write(json.dumps(row) + "\n")
                f.flush()
                print(json.dumps({k: row.get(k) for k in ("family", "job", "seed", "post_hidden", "post_public",
                                                          "seconds", "skipped", "failed")}), flush=True)
    print(json.dumps({"what": "end", "wall_s": round(time.time() - started, 1), "training_s": round(time.time() - training, 1),
                      "rollouts": rollouts, "rollouts_per_s_all": round(rollouts / max(1e-9, time.time() - training), 1)}),
          flush=True)
    return 0


def solve_rate(model, tokenizer, family, tasks, reward, knobs, max_new: int, base, n: int, device: str) -> dict:
    """The share of `n` of the job's tasks the untrained base gets right sampling as training does
    (the job's temperature, turns and token caps): GRPO learns only from groups where some
    rollouts succeed, so a rate near 0 means real training can show a job's harms, not its gains."""
    import random

    import torch

    from trainergym.mini.rollout import generate

    picked = random.Random(0).sample(tasks, min(n, len(tasks)))
    with torch.no_grad():
        played = generate(model, tokenizer, family, picked, max_turns=knobs.max_turns, max_tokens=knobs.max_tokens,
                          temperature=knobs.temperature, max_len=base.caps()["max_len"], max_new=max_new,
                          generator=torch.Generator(device=device).manual_seed(0))
    values = reward(picked, [r.messages for r in played])
    return {"n": len(values), "solve_rate": round(sum(values) / max(1, len(values)), 4)}


def _build(family_id: str, scale: str, cache: str, device: str):
    from trainergym.mini.base import build_base

    return build_base(mini.family_module(family_id), scale, seed=0, cache=Path(cache), device=device,
                      log=lambda m: print(m, file=sys.stderr, flush=True))


# --- table (here) ---------------------------------------------------------------------------------
def _ranks(xs: list[float]) -> list[float]:
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    ranks = [0.0] * len(xs)
    i = 0
    while i < len(order):  # ties share their average rank
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(a: list[float], b: list[float]) -> float:
    """Spearman's rank correlation (Pearson's on average ranks)."""
    ra, rb = _ranks(a), _ranks(b)
    ma, mb = sum(ra) / len(ra), sum(rb) / len(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb, strict=True))
    var = math.sqrt(sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb))
    return cov / var if var else float("nan")


def permutation_p(a: list[float], b: list[float]) -> float:
    """Two-sided exact permutation test of the difference in means (every split of the pooled runs;
    with 4 runs each the smallest p is 2/70)."""
    from itertools import combinations

    pooled, n = a + b, len(a)
    observed = abs(sum(a) / n - sum(b) / len(b))
    total = sum(pooled)
    hits = count = 0
    for idx in combinations(range(len(pooled)), n):
        sa = sum(pooled[i] for i in idx)
        hits += abs(sa / n - (total - sa) / len(b)) >= observed - 1e-12
        count += 1
    return hits / count


def table(paths: list[str], key: str = "post_hidden") -> dict:
    from trainergym.mini.train import mean_se

    runs: dict[str, dict[str, list[float]]] = {}
    pre: dict[str, float] = {}
    for path in paths:
        for line in Path(path).read_text().splitlines():
            row = json.loads(line)
            if key in row:
                runs.setdefault(row["family"], {}).setdefault(row["job"], []).append(row[key])
                pre[row["family"]] = row[key.replace("post", "pre")]
    report = {}
    for fam, jobs in runs.items():
        man = json.loads((EXPORT / f"{fam}.json").read_text())
        rows = []
        for name, posts in jobs.items():
            m, se = mean_se(posts)
            rows.append({"job": name, "real_mean": round(m, 4), "real_se": round(se, 4), "n": len(posts),
                         "surrogate": man["jobs"][name]["post_expected"], "validates": man["jobs"][name]["validates"]})
        names = [r["job"] for r in rows]
        for r in rows:  # the exact permutation test of each job's mean against the reference's
            ref = jobs.get("reference", [])
            if r["job"] != "reference" and len(ref) > 1 and r["n"] > 1:
                r["p_vs_reference"] = round(permutation_p(jobs[r["job"]], ref), 4)
        pairs = separated = agreed = 0
        wrong = []  # separated pairs the surrogate orders the other way: [higher for real, lower for real]
        for i in range(len(names)):
            for j in range(i + 1, len(names)):
                a, b = jobs[names[i]], jobs[names[j]]
                pairs += 1
                if len(a) < 2 or len(b) < 2:
                    continue
                if permutation_p(a, b) >= 0.05:
                    continue
                separated += 1
                sa, sb = rows[i]["surrogate"], rows[j]["surrogate"]
                real_gap = sum(a) / len(a) - sum(b) / len(b)
                if real_gap * (sa - sb) > 0:
                    agreed += 1
                else:
                    wrong.append([names[i], names[j]] if real_gap > 0 else [names[j], names[i]])
        surrogate = [r["surrogate"] for r in rows]
        real = [r["real_mean"] for r in rows]
        report[fam] = {"pre_real": pre[fam], "pre_surrogate": man["surrogate_pre"], "jobs": rows,
                       "spearman": round(spearman(real, surrogate), 3) if len(rows) > 2 else None,
                       "pairs": pairs, "separated": separated, "surrogate_agrees": agreed,
                       "pairwise_accuracy": round(agreed / separated, 3) if separated else None,
                       "surrogate_orders_wrong": wrong}
    return report


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export")
    e.add_argument("--families", default="calc_chain,multi_hop,string_pipeline")
    e.add_argument("--check-n", type=int, default=24)
    t = sub.add_parser("train")
    t.add_argument("--families", default="calc_chain,multi_hop,string_pipeline")
    t.add_argument("--jobs", default="", help="comma list of job slugs (default: all)")
    t.add_argument("--seeds", type=int, default=8)
    t.add_argument("--seeds-of", type=lambda v: {k: int(n) for k, n in (p.split("=") for p in v.split(","))},
                   default={}, help="per-job seed counts overriding --seeds, e.g. reference=8,lr_x10=2")
    t.add_argument("--procs", type=int, default=4, help="processes, each training one job's group of seeds")
    t.add_argument("--stack", type=int, default=8, help="seeds of a job side by side in one process")
    t.add_argument("--scale", default="gpu")
    t.add_argument("--device", default="cuda")
    t.add_argument("--public-n", type=int, default=300)
    t.add_argument("--budget", type=float, default=400.0, help="seconds, from the end of the pre scores, after which no new run starts")
    t.add_argument("--build-budget", type=float, default=150.0, help="seconds the bases may take")
    t.add_argument("--cache", default=str(ROOT / ".mini-cache"))
    t.add_argument("--done", nargs="*", help="earlier --out files: their runs are not repeated")
    t.add_argument("--out", required=True)
    t.add_argument("--solve-n", type=int, default=256, help="tasks per job sampled by the base before training (0: none)")
    t.add_argument("--no-train", action="store_true", help="bases, pre scores and solve rates only")
    s = sub.add_parser("table")
    s.add_argument("paths", nargs="+")
    s.add_argument("--key", default="post_hidden", choices=["post_hidden", "post_public"])
    args = p.parse_args(argv)
    if args.cmd == "export":
        export(args.families.split(","), EXPORT, args.check_n)
    elif args.cmd == "train":
        return train(args)
    else:
        print(json.dumps(table(args.paths, args.key), indent=1))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    raise SystemExit(main())
