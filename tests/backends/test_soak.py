"""Crash soak: the dispatcher is SIGKILLed at random points in 20 trials; after each restart every
job completes exactly once (or fails with a stated reason) and no pod bills unseen."""

import os
import random
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fakes.jobs import bundles
from trainergym.infra.queue import JobQueue

pytestmark = pytest.mark.slow
HERE = Path(__file__).parents[1] / "fakes"


def test_sigkill_soak(fleet, tmp_path, task, reference_files, monkeypatch):  # noqa: F811
    world, _ = fleet
    world.boot_seconds = 0.3
    t0 = time.time()
    stop = []

    def real_time():  # the fake cloud's clock follows the wall clock here
        import threading

        def loop():
            while not stop:
                world.now = time.time() - t0
                world.tick()
                time.sleep(0.02)
        threading.Thread(target=loop, daemon=True).start()

    real_time()
    rng = random.Random(7)
    workdir = tmp_path / "dispatch"
    workdir.mkdir()
    queue = JobQueue(workdir / "jobs.db", lease_seconds=1.0, max_attempts=10)
    all_bundles = bundles(tmp_path, task, reference_files, 20)
    env = {**os.environ, "PYTHONPATH": str(HERE)}
    zygote = subprocess.Popen([sys.executable, str(HERE / "soak_worker.py")], env=env, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)

    def ask(line: str, timeout: float = 120.0) -> int:
        zygote.stdin.write(line + "\n")
        zygote.stdin.flush()
        ready, _, _ = select.select([zygote.stdout], [], [], timeout)
        assert ready, f"no answer to {line!r} within {timeout} s"
        return int(zygote.stdout.readline())

    try:
        assert zygote.stdout.readline().strip() == "ready"
        for trial in range(20):
            b = all_bundles[trial]
            queue.enqueue(b.manifest.content_hash, task.id, b.root, family=task.family, base_model=b.manifest.base_model)
            pid = ask(f"run {workdir} {tmp_path / f'killed-{trial}.log'}")
            time.sleep(rng.uniform(0.05, 1.5))
            os.kill(pid, signal.SIGKILL)
            assert ask(f"wait {pid}") == -signal.SIGKILL
            time.sleep(1.1)  # let the dead dispatcher's leases lapse
            log = tmp_path / f"restarted-{trial}.log"
            status = ask(f"wait {ask(f'run {workdir} {log}')}")
            assert status == 0, log.read_text()[-2000:]
            jobs = queue.jobs()
            assert all(j.state == "done" or (j.state == "failed" and j.failure_reason) for j in jobs), \
                [(j.id, j.state, j.failure_reason) for j in jobs]
            assert len({j.content_hash for j in jobs}) == len(jobs) == trial + 1  # each bundle once
            assert world.running() == [], f"trial {trial}: pods left billing"
        assert queue.counts() == {"done": 20}
    finally:
        stop.append(True)
        zygote.kill()
        zygote.wait()
