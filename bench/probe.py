"""Validation-probe latency: cold (a fresh sandbox that imports verifiers) and warm (the
warm worker forks a child that has it imported), for a passing and a failing job, beside a
bare `python -c "import verifiers.v1"` measured in the same run.

    uv run python bench/probe.py [--n 7]

Targets (issue 4): warm p50 <= 1 s; cold p50 <= 1.3x the bare import.
"""

from __future__ import annotations

import argparse
import atexit
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from trainergym.agents.reference import reference_job_files
from trainergym.probe import probe
from trainergym.tasks import load_task


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

    bare = timed(lambda: subprocess.run([sys.executable, "-c", "import verifiers.v1"], check=True), args.n)
    run(passing, True, True)()  # starts a warm worker outside the timings: what an env pays once per process
    rows = {
        "passing, warm": timed(run(passing, True, True), args.n),
        "failing, warm": timed(run(failing, True, False), args.n),
        "passing, cold": timed(run(passing, False, True), args.n),
        "failing, cold": timed(run(failing, False, False), args.n),
    }
    b50 = statistics.median(bare)
    print(f"bare `import verifiers.v1`   p50 {b50:6.3f} s   p95 {pct(bare, 0.95):6.3f} s   (n={len(bare)})")
    for name, xs in rows.items():
        p50 = statistics.median(xs)
        print(f"probe {name:<15}      p50 {p50:6.3f} s   p95 {pct(xs, 0.95):6.3f} s   ({p50 / b50:4.2f}x bare import, n={len(xs)})")
    print("targets: warm p50 <= 1 s; cold p50 <= 1.3x the bare import")


if __name__ == "__main__":
    main()
