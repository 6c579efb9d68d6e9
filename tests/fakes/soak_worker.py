"""A dispatcher for the soak test: the real PodBackend against the fake Runpod API.

    python soak_worker.py --zygote

imports everything once, prints `ready`, then serves commands on stdin: `run WORKDIR LOG` forks a
dispatcher that drains the queue in WORKDIR once (its stderr to LOG) and prints its pid; `wait PID`
reaps it and prints its exit status. Forking from a warm process makes every SIGKILL land in
the dispatcher's own work, not in its imports."""

import os
import sys
import traceback
from pathlib import Path

from trainergym.backends.runpod import PodBackend
from trainergym.infra.pool import PodPool, PoolConfig, Rung
from trainergym.infra.queue import JobQueue
from trainergym.infra.runpod_graphql import RunpodProvider


def dispatch(workdir: Path) -> None:
    provider = RunpodProvider(api_key="test-key", proxy_url="http://{ip}:{public_port}")
    pool = PodPool(provider, workdir / "pods.db", PoolConfig(max_pods=2, ladder=(Rung("NVIDIA RTX A5000"), Rung("NVIDIA A40")),
                                                                boot_timeout=20, poll_seconds=0.1, idle_seconds=0.5))
    queue = JobQueue(workdir / "jobs.db", lease_seconds=1.0, max_attempts=10)
    PodBackend(workdir, pool, queue=queue, poll_seconds=0.1, dead_after=5).drain(once=True)


def serve() -> None:
    print("ready", flush=True)
    for line in sys.stdin:
        command, *args = line.split()
        if command == "run":
            pid = os.fork()
            if pid == 0:
                log = os.open(args[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(log, 2)
                status = 0
                try:
                    dispatch(Path(args[0]))
                except BaseException:  # noqa: BLE001 - reported through the exit status and the log
                    traceback.print_exc()
                    status = 1
                sys.stderr.flush()
                os._exit(status)
            print(pid, flush=True)
        elif command == "wait":
            _, status = os.waitpid(int(args[0]), 0)
            print(os.waitstatus_to_exitcode(status), flush=True)


if __name__ == "__main__":
    serve()
