"""Validation-probe latency: the first probe of a fresh process (starts the sandbox, which
imports verifiers, and builds the hidden-eval index meanwhile), cold (a fresh sandbox per probe)
and warm (the warm worker forks a child that has verifiers imported), for a passing and a failing
job and for every family's reference job, beside a bare `python -c "import verifiers.v1"` on the
interpreter agent code runs on (prime-rl's stack where built: `trainergym stack`), measured in
the same run (the bare imports and the first probes alternate, so the host's load drifts into
both alike). A warm probe there includes prime-rl's config check; the same probe under the
library's verifiers (no config check) is measured beside it.

    uv run python bench/probe.py [--n 7]

Per family two warm figures: the reference job probed again (the library has read its data
before and reuses that reading: an identical load answer, `checks._READINGS`; the sandbox work
is all done again), and the reference job with fresh data each probe (its generator's seed
changed: nothing is reused but the hidden index and the probe items). Each probe's CPU time is
split between the library's process and the sandbox's (the worker and its children).

Then the same calc_chain probe, warm and cold, in each sandbox mode this host supports
(bubblewrap; namespaces, for hosts without it), and what a sandbox's own cgroup costs to make
and remove (once per worker, not per probe).

Targets: warm p50 <= 1 s for each family's reference job; the first probe of a process <= 1.3x
the bare import, measured in the same run. The last lines say whether each was met.
"""

from __future__ import annotations

import argparse
import atexit
import itertools
import json
import os
import re
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


_HZ = os.sysconf("SC_CLK_TCK")


def _tree_cpu(pid: int) -> float:
    """CPU seconds of `pid` and its descendants (with their reaped children's)."""
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        try:
            total += sum(int(x) for x in Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[11:15]) / _HZ
            for tid in os.listdir(f"/proc/{p}/task"):
                todo += [int(c) for c in Path(f"/proc/{p}/task/{tid}/children").read_text().split()]
        except OSError:
            pass
    return total


def sandbox_cpu() -> float:
    """CPU seconds of every warm worker's sandbox so far."""
    from trainergym.probe import checks

    return sum(_tree_cpu(w._proc.pid) for w in list(checks._idle.queue) if w._proc is not None)


def split(fn, n: int) -> tuple[list[float], list[float], list[float]]:
    """`fn` run n times: (wall seconds, the library's CPU seconds, the sandboxes' CPU seconds)."""
    walls, libs, boxes = [], [], []
    for _ in range(n):
        lib, box, t = time.process_time(), sandbox_cpu(), time.perf_counter()
        fn()
        walls.append(time.perf_counter() - t)
        libs.append(time.process_time() - lib)
        boxes.append(sandbox_cpu() - box)
    return walls, libs, boxes


def fresh(files: dict[str, str], seed: int) -> dict[str, str]:
    """The reference job with its generator's seed changed: the same job, new data."""
    out, changed = dict(files), 0
    for path, text in files.items():
        if path.endswith(".py"):
            out[path], k = re.subn(r"(\bseed: int = )\d+", rf"\g<1>{seed}", text)
            changed += k
    assert changed, "the reference job names no `seed: int = N` to change"
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
    bare, first = [], []
    for i in range(args.n):  # alternating: the host's load drifts into both alike
        bare += timed(lambda: subprocess.run([runtime.python, "-I", "-c", "import verifiers.v1"], check=True), 1)
        first.append(json.loads(subprocess.run([sys.executable, "-c", FIRST, str(passing), str(tmp / f"b-first-{i}")],
                                               check=True, capture_output=True, text=True).stdout)["seconds"])
    run(passing, True, True)()  # starts a warm worker outside the timings: what an env pays once per process
    rows = {
        "first in a process": first,
        "passing, warm": timed(run(passing, True, True), args.n),
        "failing, warm": timed(run(failing, True, False), args.n),
        "passing, cold": timed(run(passing, False, True), args.n),
        "failing, cold": timed(run(failing, False, False), args.n),
    }
    cpu: dict[str, tuple[float, float]] = {}
    seeds = itertools.count(1000)
    for family in sorted(families()):
        files = reference_job_files(family)
        root = write(tmp / family, files)
        spec = load_task(family)
        probe(root, spec, tmp / "bundle")  # its hidden index, outside the timings
        walls, libs, boxes = split(lambda root=root, spec=spec: probe(root, spec, tmp / "bundle"), args.n)
        rows[f"{family}, warm"], cpu[f"{family}, warm"] = walls, (statistics.median(libs), statistics.median(boxes))
        roots = [write(tmp / f"{family}-{k}", fresh(files, next(seeds))) for k in range(args.n)]
        it = iter(roots)

        def once(spec=spec, it=it):
            report, _ = probe(next(it), spec, tmp / "bundle")
            assert report.ok, report.render()

        walls, libs, boxes = split(once, args.n)
        rows[f"{family}, warm, fresh"], cpu[f"{family}, warm, fresh"] = walls, (statistics.median(libs),
                                                                               statistics.median(boxes))
    if runtime.pinned:  # the same warm probe without prime-rl's config check, on the library's verifiers
        os.environ["TRAINERGYM_STACK"] = "library"
        stack_env.reset()
        run(passing, True, True)()
        rows["passing, warm, library"] = timed(run(passing, True, True), args.n)
        del os.environ["TRAINERGYM_STACK"]
        stack_env.reset()
    b50 = statistics.median(bare)
    print(f"bare `import verifiers.v1`         p50 {b50:6.3f} s   p95 {pct(bare, 0.95):6.3f} s   (n={len(bare)})")
    for name, xs in rows.items():
        p50 = statistics.median(xs)
        split_ = f", CPU: library {cpu[name][0]:.3f} s, sandbox {cpu[name][1]:.3f} s" if name in cpu else ""
        print(f"probe {name:<28} p50 {p50:6.3f} s   p95 {pct(xs, 0.95):6.3f} s   ({p50 / b50:4.2f}x bare import, "
              f"n={len(xs)}{split_})")
    ratio = statistics.median(first) / b50
    for kind in (", warm", ", warm, fresh"):
        slowest = max((statistics.median(xs), name) for name, xs in rows.items()
                      if name.endswith(kind) and name.split(",")[0] in families())
        print(f"target warm p50 <= 1 s for each family's reference job{' (fresh data)' if 'fresh' in kind else ''}: "
              f"slowest {slowest[1]} {slowest[0]:.3f} s ({'met' if slowest[0] <= 1 else 'NOT met'})")
    print(f"target first probe of a process <= 1.3x the bare import (same run): {ratio:.2f}x "
          f"({'met' if ratio <= 1.3 else 'NOT met'})")
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
