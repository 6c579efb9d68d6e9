"""The validation probe run by `submit_job` (and by `trainergym probe DIR`).

It catches on a CPU every defect of a job that can be caught there, and explains each as a
named `ProbeItem` (pass / fail / warn / skip, message, hint) the agent can act on:

- shape: the package imports in the sandbox, exports exactly one Taskset, on the pinned verifiers;
- data: enough tasks, prompts and `answer`s present, sane sizes, prompt plus max_turns x max_tokens
  fits seq_len; coverage of the family's skills and diversity (warnings);
- tools: the job's tools match the eval interface (missing, extra, different parameters named);
- rewards (model-free): gold check, an untouched task earns nothing, the reference solver's answer
  outranks every distractor on fresh items, a simulated GRPO group has reward variance, rewards
  never raise and stay in [0, 1];
- leakage: no task matches a hidden-eval item (exact, normalised, n-gram overlap), reported
  without saying which;
- config: bounds, batch/group divisibility, memory fit on the task's GPU class, the rendered
  rl.toml complete, and (when available) prime-rl's own config schema.

Agent code runs only inside `trainergym.sandbox`. The probe scores nothing against the hidden
eval, and no figure in its report is computed from hidden items except the leakage verdict.
What it measures travels with the job in the manifest (`JobManifest.probe`).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import queue
import re
import secrets
import subprocess
import threading
import time
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from trainergym import gpu, hidden, stack
from trainergym.job import (JOB_FILE, TASKSET_DIR, JobBundle, JobConfig, build_bundle, check_bounds, parse_job,
                            render_rl_toml, write_manifest)
from trainergym.sandbox import Limits, Sandbox, WarmWorker, WorkerError, run_once
from trainergym.tasks import TaskSpec, get_family

MIN_TASKS = 32
SEPARATION_PASS = 0.75  # share of fresh items whose correct answer must outrank every wrong one
GROUP_VARIANCE_PASS = 0.75  # share of simulated GRPO groups that must have reward variance
REWARD_RANGE = (0.0, 1.0)
CHARS_PER_TOKEN = 4  # rough for Qwen tokenizers on English; tool results come on top
MAX_ANSWER_CHARS = 1000
DEV_SHARE_WARN = 0.2
DISTINCT_WARN = 0.5
# Leakage: word 5-grams; an n-gram shared by two or more public items of the family is template
# text and ignored. A job task leaks a hidden item when its prompt matches exactly or after
# normalisation (case, punctuation, spacing); or when it holds >= 60% of the item's distinctive
# n-grams (at least 3) and gives the same answer (n-grams alone would flag honest items that merely
# share a few steps with a hidden one in families with small item spaces).
NGRAM, NGRAM_SHARE, NGRAM_MIN = 5, 0.6, 3


class ProbeItem(BaseModel):
    check: str
    status: Literal["pass", "fail", "warn", "skip"]
    message: str
    hint: str = ""


class ProbeReport(BaseModel):
    items: list[ProbeItem] = []
    confinement: str = ""
    seconds: float = 0.0
    measurements: dict = {}

    @property
    def ok(self) -> bool:
        return bool(self.items) and all(i.status != "fail" for i in self.items)

    def add(self, check: str, status: str, message: str, hint: str = "") -> None:
        self.items.append(ProbeItem(check=check, status=status, message=message, hint=hint))

    def render(self) -> str:
        head = "VALID: the job passed validation." if self.ok else "INVALID: fix the failed checks and submit again."
        rows = [head]
        for i in self.items:
            rows.append(f"[{i.status.upper()}] {i.check}: {i.message}" + (f"\n       hint: {i.hint}" if i.hint and i.status != "pass" else ""))
        return "\n".join(rows)


# --- the confined workers --------------------------------------------------------------------
# Concurrent episodes probe in parallel, one warm worker each, up to one per core (or
# TRAINERGYM_PROBE_WORKERS); each is started on first need and stopped at exit.
POOL_SIZE = int(os.environ.get("TRAINERGYM_PROBE_WORKERS") or min(4, os.cpu_count() or 1))
_idle: queue.LifoQueue[WarmWorker] = queue.LifoQueue()
_started = 0
_pool_lock = threading.Lock()


@contextlib.contextmanager
def warm_worker() -> Iterator[WarmWorker]:
    """Borrow a warm worker for one probe (a new one while the pool is not full)."""
    global _started
    try:
        worker = _idle.get_nowait()
    except queue.Empty:
        with _pool_lock:
            grow = _started < POOL_SIZE
            _started += grow
        if grow:
            worker = WarmWorker(Sandbox())
            atexit.register(worker.close)
        else:
            worker = _idle.get()
    try:
        yield worker
    finally:
        _idle.put(worker)


def _measure(package_dir: Path, module: str, task: TaskSpec, timeout: float, warm: bool) -> tuple[dict, str]:
    fam = get_family(task.family)
    items = []
    for ex in hidden.probe_items(task.family):
        row = ex.model_dump()
        items.append({"prompt": ex.prompt, "answer": ex.answer, "world": ex.world, "reference": fam.solve(row),
                      "distractors": fam.distractors(row)})
    request = {"nonce": secrets.token_hex(8), "module": module, "probe_items": items, "max_tasks": 5000,
               "gold_tasks": 5, "reward_timeout": 10.0, "timeout": timeout}
    try:
        if warm:
            with warm_worker() as worker:
                sandbox = worker.sandbox
                result = worker.run(package_dir, request)
        else:
            sandbox = Sandbox(Limits(wall_seconds=timeout))
            result = run_once(sandbox, package_dir, request)
    except (WorkerError, RuntimeError) as e:
        result, sandbox = {"stage": "crash", "error": str(e)}, Sandbox()
    return result, sandbox.describe()


# --- the checks ------------------------------------------------------------------------------
def _shape(report: ProbeReport, res: dict) -> bool:
    if res.get("stage") in ("import", "crash", "timeout"):
        report.add("shape", "fail", "the taskset package could not be imported or built:\n" + res.get("error", "") +
                   ("\noutput: " + res["stderr"][-800:] if res.get("stderr") else ""),
                   "taskset/__init__.py must import cleanly and set __all__ to exactly one vf.Taskset subclass")
        return False
    version = res.get("verifiers_version")
    if version != stack.VERIFIERS_VERSION:
        report.add("shape", "fail", f"the sandbox ran verifiers {version}; jobs target verifiers {stack.VERIFIERS_VERSION}",
                   "this is an installation problem: reinstall trainergym")
        return False
    report.add("shape", "pass", f"imports with verifiers {version} and exports one Taskset")
    if res.get("stage") == "load":
        report.add("data", "fail", "building the tasks failed:\n" + res.get("error", ""), "load() must return tasks without raising")
        return False
    return True


def _data(report: ProbeReport, res: dict, task: TaskSpec, job: JobConfig) -> None:
    m, p = report.measurements, job.prime_rl
    n, rows = res["n_tasks"], res.get("rows", [])
    prompts = [r[0] for r in rows]
    distinct = len(set(prompts))
    dev = {ex.prompt for ex in task.dev_examples}
    dev_share = sum(1 for q in prompts if q in dev) / max(1, len(prompts))
    m.update(n_tasks=n, infinite=res["infinite"], distinct_prompts=distinct, dev_share=round(dev_share, 4))
    need = max(MIN_TASKS, p.batch_size // p.group_size)
    prompt_tokens = -(-res["prompt_chars_max"] // CHARS_PER_TOKEN)
    context = prompt_tokens + p.max_turns * p.max_tokens
    if n < need:
        report.add("data", "fail", f"load() yields {n} tasks; at least {need} are needed", "generate more tasks")
    elif res["empty_prompts"]:
        report.add("data", "fail", f"{res['empty_prompts']} tasks have an empty prompt", "every task needs a prompt")
    elif not res["answer_field"] or res["missing_answers"]:
        report.add("data", "fail", "tasks must carry the expected final answer in an `answer: str` field of their TaskData "
                   f"({res['missing_answers']} of {n} are missing one)", "add `answer: str` to your vf.TaskData subclass")
    elif res["answer_chars_max"] > MAX_ANSWER_CHARS:
        report.add("data", "fail", f"an answer is {res['answer_chars_max']} characters long; the limit is {MAX_ANSWER_CHARS}",
                   "answers are checked exactly: keep them short")
    elif context > p.seq_len:
        report.add("data", "fail", f"the longest prompt (~{prompt_tokens} tokens) plus max_turns x max_tokens "
                   f"({p.max_turns} x {p.max_tokens}) is ~{context} tokens, more than seq_len {p.seq_len}",
                   "raise seq_len, or lower max_turns or max_tokens, or shorten the prompts")
    else:
        report.add("data", "pass", f"{n}{'+' if res['truncated'] else ''} tasks with prompts and answers; the longest "
                   f"rollout fits seq_len (~{context} of {p.seq_len} tokens before tool results)")

    share, covered, missing = skill_coverage(task, prompts)
    m.update(skill_coverage=round(share, 4), skills_covered=covered)
    notes = ([f"missing skills: {', '.join(missing)}"] if missing else []) + \
            ([f"only {distinct} distinct prompts in {len(prompts)} tasks"] if distinct < DISTINCT_WARN * len(prompts) else []) + \
            ([f"{dev_share:.0%} of the tasks are the task's dev examples"] if dev_share > DEV_SHARE_WARN else [])
    report.add("coverage", "warn" if notes else "pass",
               f"skills covered: {', '.join(covered) or 'none'}" + (f"; {'; '.join(notes)}" if notes else ""),
               "varied tasks that exercise every skill of the family teach more; the dev examples are examples, not data")


def skill_coverage(task: TaskSpec, prompts: list[str], sample: int = 1000) -> tuple[float, list[str], list[str]]:
    """Share of hidden-eval items whose skills all appear in the job's data, plus the family
    skills covered and missing. Only the aggregate leaves the library."""
    fam = get_family(task.family)
    step = max(1, len(prompts) // sample)
    covered: set[str] = set()
    for prompt in prompts[::step]:
        covered |= fam.tag_text(prompt)
    hidden_items = hidden.hidden_eval(task.family)
    share = sum(1 for ex in hidden_items if set(ex.skills) <= covered) / max(1, len(hidden_items))
    return share, [s for s in fam.SKILL_TAGS if s in covered], [s for s in fam.SKILL_TAGS if s not in covered]


def _tools(report: ProbeReport, res: dict, task: TaskSpec) -> None:
    m = report.measurements
    if "tools_error" in res:
        report.add("tools", "fail", "building the toolsets failed:\n" + res["tools_error"], "toolsets() must construct without raising")
        m["tool_parity"] = 0.0
        return
    have = {t["name"]: t["params"] for t in res.get("tools", [])}
    want = {t["function"]["name"]: sorted(t["function"]["parameters"].get("properties", {})) for t in task.eval_tools}
    missing = [name for name in want if name not in have]
    extra = [name for name in have if name not in want]
    wrong = [name for name in want if name in have and sorted(have[name]) != want[name]]
    m["tool_parity"] = round(sum(1 for n in want if n in have and n not in wrong) / max(1, len(want)), 4)
    if missing or extra or wrong:
        parts = ([f"missing {missing}"] if missing else []) + ([f"extra {extra}"] if extra else []) + \
                ([f"different parameters for {wrong}"] if wrong else [])
        report.add("tools", "fail", "the job's tools differ from the eval tool interface: " + "; ".join(parts),
                   f"wire the eval toolset ({task.eval_toolset}) into your Task.toolsets, and nothing else")
    else:
        report.add("tools", "pass", f"tools match the eval interface ({', '.join(want)})")


def _rewards(report: ProbeReport, res: dict) -> None:
    m = report.measurements
    gold = res.get("gold", [])
    gold_errors = [g["error"] for g in gold if g.get("error")]
    gold_failed = [g for g in gold if g.get("valid") is False]
    if gold_failed:
        report.add("rewards.gold", "fail", f"Task.validate() failed on {len(gold_failed)} of {len(gold)} tasks" +
                   (f": {gold_errors[0]}" if gold_errors else ""), "validate() should confirm each task's reference answer")
    elif all(g.get("valid") is None for g in gold):
        report.add("rewards.gold", "warn", "Task.validate() is not implemented, so the gold answers are unchecked",
                   "implement validate(runtime) to check each task's answer model-free")
    else:
        report.add("rewards.gold", "pass", f"gold check passed on {len(gold)} tasks")
    m["gold_pass_rate"] = round(sum(1 for g in gold if g.get("valid")) / max(1, len(gold)), 4)

    noop = res.get("noop", [])
    noop_errors = [n["error"] for n in noop if n.get("error")]
    passing = [n for n in noop if n.get("reward") is not None and n["reward"] >= 1.0]
    if noop_errors:
        report.add("rewards.noop", "fail", f"scoring an untouched task raised: {noop_errors[0]}",
                   "rewards must handle a rollout with no reply (return 0.0)")
    elif passing:
        report.add("rewards.noop", "fail", f"an untouched task (no reply at all) already earns reward {passing[0]['reward']:g}",
                   "rewards must pay only for a correct answer")
    else:
        report.add("rewards.noop", "pass", "untouched tasks earn no reward")
    m["noop_ok"] = not noop_errors and not passing

    rows = res.get("separation", [])
    scored = [r["reference"] for r in rows] + [d for r in rows for d in r["distractors"]] + [r.get("empty", {}) for r in rows]
    errors = [s["error"] for s in scored if s.get("error")]
    ranked = varied = 0
    for r in rows:
        ref = r["reference"].get("reward")
        others = [d.get("reward") for d in r["distractors"]] + [r.get("empty", {}).get("reward")]
        if ref is not None and all(o is not None and ref > o for o in others):
            ranked += 1
        group = [ref, ref, *others]  # a GRPO group: two correct rollouts, the wrong ones, an empty one
        if None not in group and max(group) > min(group):
            varied += 1
    m["reward_separation"] = round(ranked / max(1, len(rows)), 4)
    m["group_variance"] = round(varied / max(1, len(rows)), 4)
    values = [s["reward"] for s in scored + noop if s.get("reward") is not None]
    outside = [v for v in values if not REWARD_RANGE[0] <= v <= REWARD_RANGE[1]]
    if errors:
        report.add("rewards.ranking", "fail", f"a reward raised or returned no number on a fresh item: {errors[0]}",
                   "rewards must never raise; return 0.0 for replies they cannot parse")
    elif ranked < SEPARATION_PASS * len(rows):
        report.add("rewards.ranking", "fail", f"on {len(rows)} fresh items the reward ranked the correct answer above "
                   f"every plausible wrong answer only {ranked} times", "score the final answer exactly as the answer format says")
    else:
        report.add("rewards.ranking", "pass", f"on {len(rows)} fresh items the correct answer outranks every wrong "
                   f"answer {ranked} times")
    if varied < GROUP_VARIANCE_PASS * len(rows):
        report.add("rewards.group", "fail", f"in {len(rows) - varied} of {len(rows)} simulated GRPO groups (correct, wrong "
                   "and empty replies) every rollout got the same reward: no learning signal", "rewards must differ between "
                   "correct and wrong replies")
    else:
        report.add("rewards.group", "pass", f"{varied} of {len(rows)} simulated GRPO groups have reward variance")
    if outside:
        report.add("rewards.range", "fail", f"a reward of {outside[0]:g} is outside the documented range "
                   f"[{REWARD_RANGE[0]:g}, {REWARD_RANGE[1]:g}]", "keep each reward's weighted sum within [0, 1]")
    else:
        report.add("rewards.range", "pass", f"all {len(values)} rewards seen are within [0, 1]")


def _normalise(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


def _ngrams(text: str) -> set[tuple[str, ...]]:
    words = _normalise(text).split()
    return {tuple(words[i:i + NGRAM]) for i in range(len(words) - NGRAM + 1)}


@cache
def _leak_index(family: str, secret: str) -> tuple[set[str], dict[tuple[str, ...], list[int]], list[tuple[int, str]]]:
    """Normalised hidden prompts; an inverted index from each distinctive n-gram to the hidden
    items holding it; and per item, its distinctive n-gram count and normalised answer."""
    fam = get_family(family)
    counts: dict[tuple[str, ...], int] = {}
    for row in fam.generate("leakage-template", 200):
        for g in _ngrams(row["prompt"]):
            counts[g] = counts.get(g, 0) + 1
    items = hidden.hidden_eval(family)
    index: dict[tuple[str, ...], list[int]] = {}
    sizes = []
    for i, ex in enumerate(items):
        distinct = {g for g in _ngrams(ex.prompt) if counts.get(g, 0) < 2}
        for g in distinct:
            index.setdefault(g, []).append(i)
        sizes.append((len(distinct), _normalise(ex.answer)))
    return {_normalise(ex.prompt) for ex in items}, index, sizes


def leaked(task: TaskSpec, rows: list[tuple[str, str]]) -> bool:
    """Whether any job task (prompt, answer) matches a hidden-eval item."""
    normal, index, sizes = _leak_index(task.family, hidden.secret_seed())
    for prompt, answer in rows:
        if _normalise(prompt) in normal:  # covers exact copies too
            return True
        hits: dict[int, int] = {}
        for g in _ngrams(prompt):
            for i in index.get(g, ()):
                hits[i] = hits.get(i, 0) + 1
        answer = _normalise(answer)
        for i, shared in hits.items():
            size, item_answer = sizes[i]
            if size >= NGRAM_MIN and shared >= NGRAM_SHARE * size and answer == item_answer:
                return True
    return False


def _leakage(report: ProbeReport, res: dict, task: TaskSpec) -> None:
    found = leaked(task, [(r[0], r[1]) for r in res.get("rows", [])])
    report.measurements["leakage"] = found
    if found:
        report.add("leakage", "fail", "some tasks in your data match items of the hidden eval (exactly, after "
                   "normalisation, or by n-gram overlap); which ones is not shown",
                   "generate your own data; never copy eval items into training data")
    else:
        report.add("leakage", "pass", "no task matches a hidden-eval item")


def _config(report: ProbeReport, job: JobConfig, task: TaskSpec, bundle: JobBundle) -> None:
    issues = check_bounds(job, task)
    for issue in issues:
        report.add("config.bounds", "fail", issue.message, issue.hint)
    if not issues:
        report.add("config.bounds", "pass", "job.toml is within the task's bounds")
    p, model, device = job.prime_rl, job.job.base_model, gpu.gpu(task.bounds.gpu)
    if model in gpu.CALIBRATED_MODELS:
        peak = gpu.peak_memory_gib(model, p.seq_len, lora=p.lora is not None)
        report.measurements["peak_memory_gib"] = round(peak, 2)
        if gpu.fits(model, p.seq_len, device, lora=p.lora is not None):
            report.add("config.memory", "pass", f"estimated trainer peak {peak:.1f} GiB fits {device.name} ({device.memory_gib} GB)")
        else:
            report.add("config.memory", "fail", f"estimated trainer peak {peak:.1f} GiB at seq_len {p.seq_len} would run out "
                       f"of memory on {device.name} ({device.memory_gib} GB)", "lower seq_len, use LoRA, or a smaller model")
    rl = render_rl_toml(job, bundle.manifest.taskset_id, task)
    missing = [key for key, ok in (
        ("max_steps", rl.get("max_steps")), ("seq_len", rl.get("seq_len")), ("model.name", rl["model"].get("name")),
        ("orchestrator.group_size >= 2", rl["orchestrator"].get("group_size", 0) >= 2),
        ("harness null", rl["orchestrator"]["train"]["source"][0]["env"]["agent"]["harness"]["id"] == "null"),
        ("runtime subprocess", rl["orchestrator"]["train"]["source"][0]["env"]["agent"]["runtime"]["type"] == "subprocess"),
    ) if not ok]
    if missing:
        report.add("config.rl_toml", "fail", f"the rendered rl.toml lacks {missing}", "this is a trainergym bug: please report it")
    else:
        report.add("config.rl_toml", "pass", "the rendered rl.toml is complete")
    _prime_rl_schema(report, bundle)


# Validates a rendered rl.toml with prime-rl's own config classes (Python 3.12).
_SCHEMA_CHECK = """import sys
from pydantic_config import cli
from prime_rl.configs.rl import RLConfig
cli(RLConfig, args=["@", sys.argv[1], "--dry-run"])
"""


def _prime_rl_schema(report: ProbeReport, bundle: JobBundle) -> None:
    """Optional: `TRAINERGYM_PRIME_RL_PYTHON` names a Python 3.12 with prime-rl's config
    package and the job's taskset installed."""
    python = os.environ.get("TRAINERGYM_PRIME_RL_PYTHON")
    if not python:
        report.add("config.prime_rl", "skip", "prime-rl's config schema was not checked (set TRAINERGYM_PRIME_RL_PYTHON "
                   "to a Python 3.12 with prime-rl's config package to enable it)")
        return
    try:
        out = subprocess.run([python, "-c", _SCHEMA_CHECK, str(bundle.rl_toml)], capture_output=True, text=True, timeout=120)
        ok, detail = out.returncode == 0, (out.stderr or out.stdout)[-1500:]
    except (OSError, subprocess.TimeoutExpired) as e:
        ok, detail = False, f"{type(e).__name__}: {e}"
    if ok:
        report.add("config.prime_rl", "pass", "rl.toml validates against prime-rl's config schema")
    else:
        report.add("config.prime_rl", "fail", f"prime-rl's config schema rejects the rendered rl.toml:\n{detail}",
                   "check the [prime_rl] values named above")


def probe(workspace_root: Path, task: TaskSpec, bundle_dir: Path, timeout: float = 90.0,
          warm: bool = True) -> tuple[ProbeReport, JobBundle | None]:
    """Validate the workspace as a job; the bundle is returned only when everything passed.
    `warm=False` uses a fresh sandbox (and pays the verifiers import)."""
    started = time.monotonic()
    report = ProbeReport()
    job_path = workspace_root / JOB_FILE
    if not job_path.is_file():
        report.add("job.toml", "fail", "job.toml is missing", "write job.toml from the template in INSTRUCTIONS.md")
        return report, None
    job, issues = parse_job(job_path.read_text(errors="replace"))
    if job is None:
        for issue in issues:
            report.add(issue.check, "fail", issue.message, issue.hint)
        return report, None
    if not (workspace_root / TASKSET_DIR / "__init__.py").is_file():
        report.add("shape", "fail", "taskset/__init__.py is missing",
                   "write a verifiers v1 taskset package under taskset/ (see INSTRUCTIONS.md)")
        return report, None
    odd = [p.relative_to(workspace_root).as_posix() for p in sorted((workspace_root / TASKSET_DIR).rglob("*"))
           if p.is_symlink() or not (p.is_file() or p.is_dir())]
    if odd:
        report.add("shape", "fail", f"{odd[0]} is a symlink or special file; a job holds only regular files and "
                   "directories", "replace it with a regular file")
        return report, None

    bundle = build_bundle(workspace_root, bundle_dir, job, task)
    res, report.confinement = _measure(bundle.root / "package", bundle.manifest.taskset_id, task, timeout, warm)
    if _shape(report, res):
        _data(report, res, task, job)
        _tools(report, res, task)
        _rewards(report, res)
        _leakage(report, res, task)
    _config(report, job, task, bundle)
    report.seconds = round(time.monotonic() - started, 2)
    bundle.manifest.probe = report.measurements
    write_manifest(bundle)
    return report, (bundle if report.ok else None)
