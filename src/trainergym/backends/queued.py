"""What the backends that run jobs through the durable queue share (`local`, `runpod`, `fleet`)."""

from __future__ import annotations

import asyncio
import shutil
import uuid
from pathlib import Path

from trainergym.backends import JobHandle
from trainergym.infra.queue import Job, JobQueue
from trainergym.job.bundle import JobBundle
from trainergym.job.result import FailureReason, RunResult
from trainergym.task.spec import TaskSpec


def enqueue_bundle(queue: JobQueue, workdir: Path, bundle: JobBundle, task: TaskSpec) -> Job:
    """Keep a validated bundle under `workdir/bundles/<hash>`, where workers read it, and queue it
    (a bundle already queued, running or done is not queued twice)."""
    keep = Path(workdir) / "bundles" / bundle.manifest.content_hash
    if not keep.exists():  # copied aside, then renamed: a concurrent submitter of the same bundle may win
        part = keep.with_name(f"{keep.name}.part-{uuid.uuid4().hex[:8]}")
        shutil.copytree(bundle.root, part)
        try:
            part.rename(keep)
        except OSError:
            shutil.rmtree(part, ignore_errors=True)
    return queue.enqueue(bundle.manifest.content_hash, task.id, keep, family=bundle.manifest.family,
                         base_model=bundle.manifest.base_model)


def result_from_job(job: Job) -> RunResult:
    """The `RunResult` of a job that has ended in the queue, with its attempts in `details`."""
    result = job.result or RunResult.failed(job.failure or FailureReason.RUNNER_ERROR)
    return result.model_copy(update={"job_id": job.id, "content_hash": job.content_hash,
                                     "details": {**result.details, "attempts": job.attempts}})


class QueueBackend:
    """What the backends that run jobs through the durable queue share: a bundle is kept under
    `workdir/bundles/<hash>` and queued (deduplicated by hash); a result is awaited by polling."""

    name: str
    workdir: Path
    queue: JobQueue
    poll_seconds: float

    def _enqueue(self, bundle: JobBundle, task: TaskSpec) -> JobHandle:
        job = enqueue_bundle(self.queue, self.workdir, bundle, task)
        return JobHandle(job_id=job.id, content_hash=job.content_hash, backend=self.name)

    async def submit(self, bundle: JobBundle, task: TaskSpec) -> JobHandle:
        """Keep the bundle under `workdir/bundles/<hash>` and queue it (a bundle already queued,
        running or done is not queued again); returns at once."""
        return self._enqueue(bundle, task)

    async def result(self, handle: JobHandle, timeout: float | None = None) -> RunResult:
        """Poll the queue every `poll_seconds` until the job is done or failed; raises TimeoutError
        after `timeout` seconds."""
        async with asyncio.timeout(timeout):
            while True:
                job = self.queue.get(handle.job_id)
                if job is not None and job.state in ("done", "failed"):
                    return self._result(job)
                await asyncio.sleep(self.poll_seconds)

    def _result(self, job: Job) -> RunResult:
        return result_from_job(job)

    async def cancel(self, handle: JobHandle) -> None:
        """Fail the job in the queue as cancelled (its holder stops at its next heartbeat);
        idempotent."""
        self.queue.cancel(handle.job_id)
