"""The local backend: runs validated jobs on this host's GPUs with the runner.

Jobs go through the durable queue (`trainergym.infra.queue`), so a crash of this process loses none:
a restarted backend on the same database picks up what was queued and re-runs what lost its
lease. One worker thread per concurrent job leases a job, runs `Runner` on it while
heartbeating, and records the result. The hidden eval is handed to the runner only after
training (the runner calls back for it), from this process's memory.

The host's owner may replace the runner's phase commands with fake executables for tests and dry
runs (`TRAINERGYM_HOST_COMMANDS`, `Commands.from_env`); a job's files never reach that setting.
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

from trainergym.backends import BackendOptions, BackendUnavailable, JobHandle
from trainergym.backends.queued import QueueBackend, result_from_job
from trainergym.host import deployment
from trainergym.host.runner import Commands, Runner, Timeouts
from trainergym.infra.queue import Job, JobQueue
from trainergym.job import gpu as gpus
from trainergym.job import stack
from trainergym.job.bundle import JobBundle
from trainergym.job.result import FailureReason, RunResult
from trainergym.paths import ROOT_WORKDIRS, data_dir, default_workdir
from trainergym.task import hidden
from trainergym.task.spec import TaskSpec


def _make_workdir(workdir: Path) -> None:
    """Create `workdir`; what we create under /var/lib/trainergym is 0755 whatever the umask (no
    other uid may write where the trainer's inputs live). Raises BackendUnavailable."""
    try:
        for path in [*reversed(workdir.parents), workdir]:
            if path.is_relative_to(ROOT_WORKDIRS) and not path.exists():
                path.mkdir(mode=0o755)
                path.chmod(0o755)
        workdir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise BackendUnavailable(f"cannot create the local backend's work directory {workdir} ({e.strerror}); "
                                 "give it one it can (worker: --workdir)") from None


class LocalBackend(QueueBackend):
    """Jobs run by `Runner` on this host's GPUs, `concurrency` at a time, through the queue at
    `workdir/jobs.db` (or `queue`). The GPU is detected with nvidia-smi unless given. Each job's
    trainer is confined per `confinement` (`trainergym.host.confinement`; as root, with a uid of
    its own, which must be able to traverse to `workdir`)."""

    name = "local"

    def __init__(self, workdir: Path, queue: JobQueue | None = None, commands: Commands | None = None,
                 timeouts: Timeouts | None = None, gpu: str | None = None, gpu_count: int | None = None,
                 usd_per_hour: float = 0.0, concurrency: int = 1, poll_seconds: float = 1.0,
                 confinement: str | None = None):
        self.workdir = Path(workdir)
        self.confinement = confinement
        self.queue = queue or JobQueue(self.workdir / "jobs.db")
        self.commands, self.timeouts = commands, timeouts
        detected = deployment.detect_gpus() if gpu is None or gpu_count is None else (gpu, gpu_count)
        self.gpu, self.gpu_count = gpu or detected[0], gpu_count if gpu_count is not None else detected[1] or 0
        self.usd_per_hour, self.concurrency, self.poll_seconds = usd_per_hour, concurrency, poll_seconds
        self.owner = f"local-{uuid.uuid4().hex[:8]}"
        self._runners: dict[str, Runner] = {}
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()

    @classmethod
    def from_options(cls, options: BackendOptions) -> LocalBackend:
        """The registry's constructor (`make_backend("local", ...)`); refuses a host without a GPU,
        a malformed `TRAINERGYM_HOST_COMMANDS` and a work directory it cannot create."""
        gpu, count = deployment.detect_gpus()
        if not count or gpu == "none":
            raise BackendUnavailable("the local backend trains on this host's GPUs and nvidia-smi finds none here; "
                                     "use --backend mock, or run on a GPU host")
        try:
            commands = Commands.from_env()
        except ValueError as e:
            raise BackendUnavailable(str(e)) from None
        workdir = options.workdir or default_workdir()
        _make_workdir(workdir)
        return cls(workdir, queue=JobQueue(options.queue or data_dir() / "jobs.db", lease_seconds=options.lease_seconds or 120), commands=commands, gpu=gpu,
                   gpu_count=count, concurrency=options.max_jobs or 1)

    async def submit(self, bundle: JobBundle, task: TaskSpec) -> JobHandle:
        """Queue the bundle (deduplicated by content hash) and start worker threads; returns at
        once."""
        handle = self._enqueue(bundle, task)
        self._ensure_workers()
        return handle

    async def cancel(self, handle: JobHandle) -> None:
        """Cancel the job in the queue and stop its runner if it runs in this process; idempotent.
        """
        self.queue.cancel(handle.job_id)
        runner = self._runners.get(handle.job_id)
        if runner is not None:
            runner.cancel()

    def drain(self, once: bool = False, poll: float = 5.0) -> None:
        """Run queued jobs (`trainergym worker --backend local`); with `once`, until none is queued,
        leased or running (a dead worker's jobs are taken over once their leases expire)."""
        while not self._stop.is_set():
            self._ensure_workers()
            for thread in list(self._threads):
                thread.join()
            if once and not self.queue.has_active():
                return
            time.sleep(poll)

    def close(self) -> None:
        """Stop leasing jobs and wait up to 10 s for each worker thread; a job already running is
        not cancelled."""
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
        try:
            self._train(job)
        except Exception as e:  # noqa: BLE001 - a worker reports, never dies with its job leased
            self.queue.fail(job.id, self.owner, RunResult.failed(
                FailureReason.RUNNER_ERROR, f"{type(e).__name__}: {e}", base_model=job.base_model, gpu=self.gpu,
                gpu_count=self.gpu_count))

    def _train(self, job: Job) -> None:
        rate = self.usd_per_hour or gpus.list_price(self.gpu)
        runner = Runner(Path(job.bundle), self.workdir / "runs" / f"{job.id}-{job.attempts}",
                        lambda: [ex.model_dump() for ex in hidden.hidden_eval(job.family)], job.family, job.base_model,
                        gpu=self.gpu, gpu_count=self.gpu_count, usd_per_hour=rate, commands=self.commands,
                        timeouts=self.timeouts, host=self.workdir, install=stack.install_specs(job.family),
                        confinement=self.confinement)
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
        if result.status == "succeeded":
            self.queue.complete(job.id, self.owner, result)
        else:  # the queue retries what `result.transient` says may be the host's fault
            self.queue.fail(job.id, self.owner, result)

    def _result(self, job: Job) -> RunResult:
        return result_from_job(job).model_copy(update={"gpu": self.gpu, "gpu_count": self.gpu_count})
