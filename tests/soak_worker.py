"""A dispatcher process for the soak test: the real PodBackend against the fake Runpod API.
Usage: python soak_worker.py WORKDIR"""

import sys
from pathlib import Path

from trainergym.backends.runpod import PodBackend
from trainergym.pool import PodPool, PoolConfig, Rung
from trainergym.queue import JobQueue
from trainergym.runpod_provider import RunpodProvider

workdir = Path(sys.argv[1])
provider = RunpodProvider(api_key="test-key", proxy_url="http://{ip}:{public_port}")
pool = PodPool(provider, workdir / "pods.db", PoolConfig(max_pods=2, ladder=(Rung("NVIDIA RTX A5000"), Rung("NVIDIA A40")),
                                                            boot_timeout=20, poll_seconds=0.1, idle_seconds=0.5))
queue = JobQueue(workdir / "jobs.db", lease_seconds=1.0, max_attempts=10)
PodBackend(workdir, pool, queue=queue, poll_seconds=0.1, dead_after=5).drain(once=True)
