"""The validation probe run by `submit_job` (first version).

Checks, in order: `job.toml` parses and respects the task's bounds; the workspace holds a
`taskset/` package; in a confined child process (`probe_child.py`) the package imports,
exports one Taskset, builds tasks, wires the eval tools, and its rewards pass the gold
check, fail an untouched task and rank the reference solver's answer above every distractor
on fresh items the agent never saw. Each check is one `ProbeItem` the agent can act on.
What the probe measures travels with the job in its manifest.

Agent code runs only in the child: scrubbed environment (no keys, no data directory, a
throw-away HOME), resource limits, a new session killed on timeout, and, where the kernel
allows it, its own network namespace. The report states which confinement was applied.
"""

from __future__ import annotations

import json
import os
import re
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from trainergym import hidden
from trainergym.job import JOB_FILE, TASKSET_DIR, JobBundle, JobConfig, build_bundle, check_bounds, parse_job, write_manifest
from trainergym.tasks import TaskSpec, get_family

CHILD = Path(__file__).with_name("probe_child.py")
MIN_TASKS = 32
SEPARATION_PASS = 0.75  # share of fresh items whose reference answer must outrank every distractor
_SECRET_ENV = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL|AUTH|TRAINERGYM", re.IGNORECASE)


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


@cache
def _network_isolation() -> list[str]:
    """`unshare -n` when this kernel lets us create a network namespace, else nothing."""
    unshare = shutil.which("unshare")
    if not unshare:
        return []
    for prefix in ([unshare, "-n"], [unshare, "-rn"]):
        try:
            if subprocess.run([*prefix, "true"], capture_output=True, timeout=5).returncode == 0:
                return prefix
        except (OSError, subprocess.TimeoutExpired):
            pass
    return []


def _child_env(home: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not _SECRET_ENV.search(k)}
    env.update(HOME=home, XDG_DATA_HOME=home, XDG_CACHE_HOME=home, XDG_CONFIG_HOME=home,
               PYTHONDONTWRITEBYTECODE="1", PYTHONNOUSERSITE="1", NO_PROXY="*")
    return env


def _limits(cpu_seconds: int, memory_bytes: int, file_bytes: int):
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds))
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    return apply


def run_child(package_dir: Path, module: str, request: dict, timeout: float = 90.0) -> tuple[dict, str]:
    """Run probe_child.py on a private copy of the package; (result, confinement)."""
    nonce = secrets.token_hex(8)
    with tempfile.TemporaryDirectory(prefix="tg-probe-") as tmp:
        copy = Path(tmp) / "pkg"
        shutil.copytree(package_dir, copy, symlinks=True)
        home = Path(tmp) / "home"
        home.mkdir()
        netns = _network_isolation()
        cmd = [*netns, sys.executable, "-I", str(CHILD)]
        req = {**request, "package_dir": str(copy), "module": module, "nonce": nonce}
        confinement = ("network namespace, " if netns else "NO network isolation (unshare unavailable), ") + \
            "scrubbed environment, private copy, rlimits (cpu, memory, file size), timeout"
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                cwd=tmp, env=_child_env(str(home)), start_new_session=True,
                                preexec_fn=_limits(int(timeout) + 5, 6 << 30, 64 << 20))
        try:
            stdout, stderr = proc.communicate(json.dumps(req), timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            stdout, stderr = proc.communicate()
            return {"stage": "timeout", "error": f"the taskset did not finish loading and scoring within {timeout:.0f} s "
                    "(an endless loop, or far too much work at import or in load())", "stderr": stderr[-2000:]}, confinement
        finally:
            _kill_group(proc)  # nothing the agent started outlives the probe
        marker = "@@trainergym-probe@@" + nonce
        for line in reversed(stdout.splitlines()):
            if line.startswith(marker):
                result = json.loads(line[len(marker):])
                result["stderr"] = stderr[-2000:]
                return result, confinement
        return {"stage": "crash", "error": f"the probe process {_exit_reason(proc.returncode)} before reporting",
                "stderr": stderr[-2000:]}, confinement


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _exit_reason(code: int) -> str:
    if code >= 0:
        return f"exited with status {code}"
    sig = -code
    known = {signal.SIGXCPU: "was stopped for using too much CPU time", signal.SIGXFSZ: "was stopped for writing too large a file",
             signal.SIGKILL: "was killed (out of memory?)", signal.SIGSEGV: "crashed (segmentation fault)"}
    return known.get(sig, f"was killed by signal {signal.Signals(sig).name}")


def _probe_request(task: TaskSpec) -> dict:
    fam = get_family(task.family)
    items = []
    for ex in hidden.probe_items(task.family):
        row = ex.model_dump()
        items.append({"prompt": ex.prompt, "answer": ex.answer, "world": ex.world, "reference": fam.solve(row),
                      "distractors": fam.distractors(row)})
    return {"probe_items": items, "max_tasks": 5000, "sample_size": 400, "gold_tasks": 5, "reward_timeout": 10.0}


def skill_coverage(task: TaskSpec, prompts: list[str]) -> tuple[float, list[str], list[str]]:
    """Share of hidden-eval items whose skills all appear in the job's data, plus the
    family skills covered and missing. Only the aggregate leaves the library."""
    fam = get_family(task.family)
    covered: set[str] = set()
    for prompt in prompts:
        covered |= fam.tag_text(prompt)
    hidden_items = hidden.hidden_eval(task.family)
    share = sum(1 for ex in hidden_items if set(ex.skills) <= covered) / max(1, len(hidden_items))
    skills = list(fam.SKILL_TAGS)
    return share, [s for s in skills if s in covered], [s for s in skills if s not in covered]


def _check_package(report: ProbeReport, res: dict, task: TaskSpec, job: JobConfig) -> None:
    m = report.measurements
    if res.get("stage") in ("import", "crash", "timeout"):
        report.add("shape", "fail", "the taskset package could not be imported or built:\n" + res.get("error", "") +
                   ("\nstderr: " + res["stderr"][-800:] if res.get("stderr") else ""),
                   "taskset/__init__.py must import cleanly and set __all__ to exactly one vf.Taskset subclass")
        return
    version = res.get("verifiers_version")
    report.add("shape", "pass", f"imports with verifiers {version} and exports one Taskset")
    if res.get("stage") == "load":
        report.add("data", "fail", "building the tasks failed:\n" + res.get("error", ""), "load() must return tasks without raising")
        return

    n = res["n_tasks"]
    m.update(n_tasks=n, infinite=res["infinite"])
    need = max(MIN_TASKS, job.prime_rl.batch_size // job.prime_rl.group_size)
    if n < need:
        report.add("data", "fail", f"load() yields {n} tasks; at least {need} are needed", "generate more tasks")
    elif res["empty_prompts"]:
        report.add("data", "fail", f"{res['empty_prompts']} tasks have an empty prompt", "every task needs a prompt")
    elif not res["answer_field"] or res["missing_answers"]:
        report.add("data", "fail", "tasks must carry the expected final answer in an `answer: str` field of their TaskData "
                   f"({res['missing_answers']} of {n} are missing one)", "add `answer: str` to your vf.TaskData subclass")
    else:
        report.add("data", "pass", f"{n}{'+' if res['truncated'] else ''} tasks with prompts and answers")

    share, covered, missing = skill_coverage(task, [s["prompt"] for s in res.get("sample", [])])
    m.update(skill_coverage=round(share, 4), skills_covered=covered)
    report.add("coverage", "pass" if not missing else "warn",
               f"skills covered: {', '.join(covered) or 'none'}" + (f"; missing: {', '.join(missing)}" if missing else ""),
               "tasks that exercise every skill of the family teach more")

    if "tools_error" in res:
        report.add("tools", "fail", "building the toolsets failed:\n" + res["tools_error"], "toolsets() must construct without raising")
        m["tool_parity"] = 0.0
    else:
        have = {t["name"]: t["params"] for t in res.get("tools", [])}
        want = {t["function"]["name"]: sorted(t["function"]["parameters"].get("properties", {})) for t in task.eval_tools}
        missing_tools = [name for name in want if name not in have]
        extra = [name for name in have if name not in want]
        wrong = [name for name in want if name in have and sorted(have[name]) != want[name]]
        m["tool_parity"] = round(sum(1 for n_ in want if n_ in have and n_ not in wrong) / max(1, len(want)), 4)
        if missing_tools or extra or wrong:
            parts = ([f"missing {missing_tools}"] if missing_tools else []) + ([f"extra {extra}"] if extra else []) + \
                    ([f"different parameters for {wrong}"] if wrong else [])
            report.add("tools", "fail", "the job's tools differ from the eval tool interface: " + "; ".join(parts),
                       f"wire the eval toolset ({task.eval_toolset}) into your Task.toolsets")
        else:
            report.add("tools", "pass", f"tools match the eval interface ({', '.join(want)})")

    _check_rewards(report, res)


def _check_rewards(report: ProbeReport, res: dict) -> None:
    m = report.measurements
    gold = res.get("gold", [])
    gold_errors = [g["error"] for g in gold if g.get("error")]
    gold_failed = [g for g in gold if g.get("valid") is False]
    if gold_failed:
        report.add("gold", "fail", f"Task.validate() failed on {len(gold_failed)} of {len(gold)} tasks" +
                   (f": {gold_errors[0]}" if gold_errors else ""), "validate() should confirm each task's reference answer")
    elif all(g.get("valid") is None for g in gold):
        report.add("gold", "warn", "Task.validate() is not implemented, so the gold answers are unchecked",
                   "implement validate(runtime) to check each task's answer model-free")
    else:
        report.add("gold", "pass", f"gold check passed on {len(gold)} tasks")
    m["gold_pass_rate"] = round(sum(1 for g in gold if g.get("valid")) / max(1, len(gold)), 4)

    noop = res.get("noop", [])
    noop_errors = [n["error"] for n in noop if n.get("error")]
    passing = [n for n in noop if n.get("reward") is not None and n["reward"] >= 1.0]
    if noop_errors:
        report.add("noop", "fail", f"scoring an untouched task raised: {noop_errors[0]}",
                   "rewards must handle a rollout with no reply (return 0.0)")
    elif passing:
        report.add("noop", "fail", f"an untouched task (no reply at all) already earns reward {passing[0]['reward']:g}",
                   "rewards must pay only for a correct answer")
    else:
        report.add("noop", "pass", "untouched tasks earn no reward")
    m["noop_ok"] = not noop_errors and not passing

    rows = res.get("separation", [])
    errors = [r["reference"]["error"] for r in rows if r["reference"].get("error")] + \
             [d["error"] for r in rows for d in r["distractors"] if d.get("error")]
    ranked = 0
    for r in rows:
        ref = r["reference"].get("reward")
        others = [d.get("reward") for d in r["distractors"]] + [r.get("empty", {}).get("reward")]
        if ref is not None and all(o is not None and ref > o for o in others):
            ranked += 1
    share = ranked / max(1, len(rows))
    m["reward_separation"] = round(share, 4)
    if errors:
        report.add("rewards", "fail", f"a reward raised on a fresh item: {errors[0]}", "rewards must never raise")
    elif share < SEPARATION_PASS:
        report.add("rewards", "fail", f"on {len(rows)} fresh items the reward ranked the correct answer above every wrong "
                   f"answer only {ranked} times", "score the final answer exactly as the answer format says")
    else:
        report.add("rewards", "pass", f"on {len(rows)} fresh items the correct answer outranks every wrong answer "
                   f"{ranked} times")


def probe(workspace_root: Path, task: TaskSpec, bundle_dir: Path, timeout: float = 90.0) -> tuple[ProbeReport, JobBundle | None]:
    """Validate the workspace as a job; the bundle is returned only when everything passed."""
    import time

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
    issues = check_bounds(job, task)
    for issue in issues:
        report.add(issue.check, "fail", issue.message, issue.hint)
    if not issues:
        report.add("bounds", "pass", "job.toml is within the task's bounds")
    if not (workspace_root / TASKSET_DIR / "__init__.py").is_file():
        report.add("shape", "fail", "taskset/__init__.py is missing",
                   "write a verifiers v1 taskset package under taskset/ (see INSTRUCTIONS.md)")
        return report, None

    bundle = build_bundle(workspace_root, bundle_dir, job, task)
    res, report.confinement = run_child(bundle.root / "package", bundle.manifest.taskset_id, _probe_request(task), timeout)
    _check_package(report, res, task, job)
    report.seconds = round(time.monotonic() - started, 2)
    bundle.manifest.probe = report.measurements
    write_manifest(bundle)
    return report, (bundle if report.ok else None)
