"""Crash soak: the dispatcher is SIGKILLed at random points in 20 trials; after each restart every
job completes exactly once (or fails with a stated reason) and no pod bills unseen."""

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from test_pod_backend import bundles, fleet  # noqa: F401 - the fixture
from trainergym.queue import JobQueue

HERE = Path(__file__).parent


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
    try:
        for trial in range(20):
            b = all_bundles[trial]
            queue.enqueue(b.manifest.content_hash, task.id, b.root)
            worker = subprocess.Popen([sys.executable, str(HERE / "soak_worker.py"), str(workdir)], env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            time.sleep(rng.uniform(0.2, 2.0))
            worker.send_signal(signal.SIGKILL)
            worker.wait()
            time.sleep(1.1)  # let the dead dispatcher's leases lapse
            restarted = subprocess.run([sys.executable, str(HERE / "soak_worker.py"), str(workdir)], env=env,
                                       capture_output=True, text=True, timeout=120)
            assert restarted.returncode == 0, restarted.stderr[-2000:]
            jobs = queue.jobs()
            assert all(j.state == "done" or (j.state == "failed" and j.failure_reason) for j in jobs), \
                [(j.id, j.state, j.failure_reason) for j in jobs]
            assert len({j.content_hash for j in jobs}) == len(jobs) == trial + 1  # each bundle once
            assert world.running() == [], f"trial {trial}: pods left billing"
        assert queue.counts() == {"done": 20}
    finally:
        stop.append(True)
