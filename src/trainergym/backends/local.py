"""The local backend: runs validated jobs on this host's GPUs with the runner.

Jobs go through the durable queue (`trainergym.infra.queue`), so a crash of this process loses none:
a restarted backend on the same database picks up what was queued and re-runs what lost its
lease. One worker thread per concurrent job leases a job, runs `Runner` on it while
heartbeating, and records the result. The hidden eval is handed to the runner only after
training (the runner calls back for it), from this process's memory.
"""

from __future__ import annotations

import json
import subprocess
import threading
import uuid
from pathlib import Path

from trainergym.job import gpu as gpus
from trainergym.task import hidden
from trainergym.job import stack
from trainergym.backends import JobHandle, JobResult, QueueBackend, result_from_job
from trainergym.job.bundle import JobBundle
from trainergym.infra.queue import Job, JobQueue
from trainergym.host.runner import Commands, Runner, Timeouts
from trainergym.task.spec import TaskSpec, load_task


def detect_gpus() -> tuple[str, int]:
    """(GPU name, count) from nvidia-smi, or ("none", 0)."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return "none", 0
    names = [line.strip() for line in out.stdout.splitlines() if line.strip()]
    return (names[0], len(names)) if out.returncode == 0 and names else ("none", 0)


class LocalBackend(QueueBackend):
    name = "local"

    def __init__(self, workdir: Path, queue: JobQueue | None = None, commands: Commands | None = None,
                 timeouts: Timeouts | None = None, gpu: str | None = None, gpu_count: int | None = None,
                 usd_per_hour: float = 0.0, concurrency: int = 1, poll_seconds: float = 1.0):
        self.workdir = Path(workdir)
        self.queue = queue or JobQueue(self.workdir / "jobs.db")
        self.commands, self.timeouts = commands, timeouts
        detected = detect_gpus() if gpu is None or gpu_count is None else (gpu, gpu_count)
        self.gpu, self.gpu_count = gpu or detected[0], gpu_count if gpu_count is not None else detected[1]
        self.usd_per_hour, self.concurrency, self.poll_seconds = usd_per_hour, concurrency, poll_seconds
        self.owner = f"local-{uuid.uuid4().hex[:8]}"
        self._tasks: dict[str, TaskSpec] = {}
        self._runners: dict[str, Runner] = {}
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()

    async def submit(self, bundle: JobBundle, task: TaskSpec) -> JobHandle:
        handle = self._enqueue(bundle, task)
        self._tasks[handle.job_id] = task
        self._ensure_workers()
        return handle

    async def cancel(self, handle: JobHandle) -> None:
        self.queue.cancel(handle.job_id)
        runner = self._runners.get(handle.job_id)
        if runner is not None:
            runner.cancel()

    def drain(self, once: bool = False, poll: float = 5.0) -> None:
        """Run queued jobs (`trainergym worker --backend local`); with `once`, until none is left."""
        import time

        while not self._stop.is_set():
            self._ensure_workers()
            for thread in list(self._threads):
                thread.join()
            if once and not self.queue.has_queued():
                return
            time.sleep(poll)

    def close(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=10)

    # --- workers -----------------------------------------------------------------------------
    def _ensure_workers(self) -> None:
        self._threads = [t for t in self._threads if t.is_alive()]
        while len(self._threads) < self.concurrency:
            thread = threading.Thread(target=self._work, name="trainergym-local-worker", daemon=True)
            thread.start()
            self._threads.append(thread)

    def _work(self) -> None:
        while not self._stop.is_set():
            job = self.queue.lease(self.owner)
            if job is None:
                return  # the queue is empty; submit() starts a worker again
            self._run(job)

    def _run(self, job: Job) -> None:
        task = self._tasks.get(job.id) or load_task(job.task_id)
        bundle = Path(job.bundle)
        base_model = json.loads((bundle / "manifest.json").read_text())["base_model"]
        rate = self.usd_per_hour or gpus.list_price(self.gpu)
        runner = Runner(bundle, self.workdir / "runs" / f"{job.id}-{job.attempts}",
                        lambda: [ex.model_dump() for ex in hidden.hidden_eval(task.family)], task.family, base_model,
                        gpu=self.gpu, gpu_count=self.gpu_count, usd_per_hour=rate, commands=self.commands,
                        timeouts=self.timeouts, pre_cache=self.workdir / "pre-cache",
                        install=stack.install_specs(task.family), stack_dir=self.workdir / "prime-rl")
        self._runners[job.id] = runner
        self.queue.start(job.id, self.owner)
        beating = threading.Event()

        def heartbeat() -> None:
            while not beating.wait(min(30.0, self.queue.lease_seconds / 3)):
                if not self.queue.heartbeat(job.id, self.owner):
                    runner.cancel()  # cancelled, or the lease was lost
                    return

        beat = threading.Thread(target=heartbeat, daemon=True)
        beat.start()
        try:
            result = runner.run()
        finally:
            beating.set()
            beat.join()
            self._runners.pop(job.id, None)
        if result["status"] == "succeeded":
            self.queue.complete(job.id, self.owner, result)
        else:  # a broken install may be the host's fault: retry; the job's own failures are final
            transient = result.get("failure_reason", "").startswith(("install failed", "setup timed out"))
            self.queue.fail(job.id, self.owner, result.get("failure_reason", "failed"), retry=transient, result=result)

    def _result(self, job: Job) -> JobResult:
        return result_from_job(job).model_copy(update={"gpu": self.gpu, "gpu_count": self.gpu_count})
