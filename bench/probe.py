"""Validation-probe latency: the first probe of a fresh process (starts the sandbox, which
imports verifiers, and builds the hidden-eval index meanwhile), cold (a fresh sandbox per probe)
and warm (the warm worker forks a child that has verifiers imported), for a passing and a failing
job and for every family's reference job, beside a bare `python -c "import verifiers.v1"` on the
interpreter agent code runs on (prime-rl's stack where built: `trainergym stack`), measured in
the same run. A warm probe there includes prime-rl's config check; the same probe under the
library's verifiers (no config check) is measured beside it.

    uv run python bench/probe.py [--n 7]

Then the same calc_chain probe, warm and cold, in each sandbox mode this host supports
(bubblewrap; namespaces, for hosts without it), and what a sandbox's own cgroup costs to make
and remove (once per worker, not per probe).

Targets: warm p50 <= 1 s; the first probe of a process <= 1.3x the bare import.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from trainergym.agents.reference import reference_job_files
from trainergym.job import stack_env
from trainergym.probe.cgroup import Cgroup
from trainergym.probe.checks import probe
from trainergym.probe.sandbox import Sandbox
from trainergym.task.spec import families, load_task

FIRST = """
import json, sys, time
from pathlib import Path
from trainergym.probe.checks import probe
from trainergym.task.spec import load_task
t = time.perf_counter()
report, _ = probe(Path(sys.argv[1]), load_task("calc_chain"), Path(sys.argv[2]))
assert report.ok, report.render()
print(json.dumps({"seconds": time.perf_counter() - t}))
"""


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))]


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, content in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(content)
    return root


def timed(fn, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=7)
    args = parser.parse_args()
    task = load_task("calc_chain")
    tmp = Path(tempfile.mkdtemp(prefix="tg-bench-probe-"))
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)
    good = reference_job_files("calc_chain")
    passing = write(tmp / "pass", good)
    old = "return float(final_integer(trace.last_reply) == int(self.data.answer))"
    failing = write(tmp / "fail", {**good, "taskset/chains.py": good["taskset/chains.py"].replace(old, "return 1.0")})

    def run(root: Path, warm: bool, expect: bool):
        def go():
            report, _ = probe(root, task, tmp / "bundle", warm=warm)
            assert report.ok is expect, report.render()
        return go

    runtime = stack_env.ensure()
    print(f"agent code runs under {runtime.describe()}")
    bare = timed(lambda: subprocess.run([runtime.python, "-I", "-c", "import verifiers.v1"], check=True), args.n)
    first = [json.loads(subprocess.run([sys.executable, "-c", FIRST, str(passing), str(tmp / f"b-first-{i}")], check=True,
                                       capture_output=True, text=True).stdout)["seconds"] for i in range(args.n)]
    run(passing, True, True)()  # starts a warm worker outside the timings: what an env pays once per process
    rows = {
        "first in a process": first,
        "passing, warm": timed(run(passing, True, True), args.n),
        "failing, warm": timed(run(failing, True, False), args.n),
        "passing, cold": timed(run(passing, False, True), args.n),
        "failing, cold": timed(run(failing, False, False), args.n),
    }
    for family in sorted(families()):
        root = write(tmp / family, reference_job_files(family))
        spec = load_task(family)
        probe(root, spec, tmp / "bundle")  # its hidden index, outside the timings
        rows[f"{family}, warm"] = timed(lambda root=root, spec=spec: probe(root, spec, tmp / "bundle"), args.n)
    if runtime.pinned:  # the same warm probe without prime-rl's config check, on the library's verifiers
        os.environ["TRAINERGYM_STACK"] = "library"
        stack_env.reset()
        run(passing, True, True)()
        rows["passing, warm, library"] = timed(run(passing, True, True), args.n)
        del os.environ["TRAINERGYM_STACK"]
        stack_env.reset()
    b50 = statistics.median(bare)
    print(f"bare `import verifiers.v1`   p50 {b50:6.3f} s   p95 {pct(bare, 0.95):6.3f} s   (n={len(bare)})")
    for name, xs in rows.items():
        p50 = statistics.median(xs)
        print(f"probe {name:<22} p50 {p50:6.3f} s   p95 {pct(xs, 0.95):6.3f} s   ({p50 / b50:4.2f}x bare import, n={len(xs)})")
    print("targets: warm p50 <= 1 s; the first probe of a process <= 1.3x the bare import")
    for mode in ("bwrap", "namespaces"):
        if Sandbox(mode=mode).kind != mode:
            print(f"mode {mode}: not available here")
            continue
        os.environ["TRAINERGYM_SANDBOX"] = mode
        run(passing, True, True)()  # a warm worker of this mode, outside the timings
        warm, cold = timed(run(passing, True, True), args.n), timed(run(passing, False, True), args.n)
        print(f"mode {mode:<10} passing warm p50 {statistics.median(warm):6.3f} s   cold p50 {statistics.median(cold):6.3f} s"
              f"   ({Sandbox().describe()[:60]}...)")
    group = Cgroup.create(4 << 30, 256)
    if group is None:
        print("a sandbox's own cgroup: not available here (totals are per process)")
        return
    group.remove()
    made = timed(lambda: Cgroup.create(4 << 30, 256).remove(), args.n)
    print(f"a sandbox's own cgroup, made and removed: p50 {statistics.median(made) * 1e3:.1f} ms (once per worker)")


if __name__ == "__main__":
    main()
