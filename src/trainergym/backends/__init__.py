"""Backends train a validated job and score it before and after on the hidden eval.

The whole contract is `Backend`: submit a bundle, get a handle, await its result, cancel.
Implementations: `mock` (a documented surrogate, no GPU), `local` (the runner on this host's
GPUs, through the durable queue). Later: `runpod`.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

from pydantic import BaseModel

from trainergym.job.bundle import JobBundle
from trainergym.infra.queue import Job, JobQueue
from trainergym.job.stack import PIN, StackPin
from trainergym.task.spec import TaskSpec


class JobHandle(BaseModel):
    job_id: str
    content_hash: str
    backend: str


class JobResult(BaseModel):
    """`result.json`: what one job produced. `source` says whether the figures were
    measured by real training or computed by a surrogate (the mock backend)."""

    job_id: str
    content_hash: str
    status: Literal["succeeded", "failed", "cancelled"]
    failure_reason: str | None = None
    base_model: str
    pre: float | None = None
    post: float | None = None
    eval_n: int = 0
    train_seconds: float | None = None
    steps_done: int = 0
    gpu: str
    gpu_count: int
    cost_usd: float = 0.0
    log_tail: str = ""
    stack: StackPin = PIN
    source: Literal["measured", "surrogate"]
    details: dict = {}


@runtime_checkable
class Backend(Protocol):
    name: str

    async def submit(self, bundle: JobBundle, task: TaskSpec) -> JobHandle:
        """Queue a validated job; returns at once."""
        ...

    async def result(self, handle: JobHandle, timeout: float | None = None) -> JobResult:
        """Wait for the job's result (raises TimeoutError after `timeout` seconds)."""
        ...

    async def cancel(self, handle: JobHandle) -> None:
        """Stop the job if it is still running; idempotent."""
        ...


def result_from_job(job: Job) -> JobResult:
    """The JobResult of a finished job of the durable queue (`trainergym.infra.queue.Job`)."""
    r = job.result or {}
    status = "succeeded" if job.state == "done" else ("cancelled" if job.failure_reason == "cancelled" else "failed")
    return JobResult(job_id=job.id, content_hash=job.content_hash, status=status,
                     failure_reason=None if status == "succeeded" else job.failure_reason,
                     base_model=r.get("base_model", ""), pre=r.get("pre"), post=r.get("post"), eval_n=r.get("eval_n", 0),
                     train_seconds=r.get("train_seconds"), gpu=r.get("gpu", ""), gpu_count=r.get("gpu_count", 0),
                     cost_usd=r.get("cost_usd", 0.0), log_tail=r.get("log_tail", ""), source=r.get("source", "measured"),
                     details={"attempts": job.attempts, **({"pod": r["pod"]} if r.get("pod") else {})})


class QueueBackend:
    """What the backends that run jobs through the durable queue share: a bundle is kept under
    `workdir/bundles/<hash>` and queued (deduplicated by hash); a result is awaited by polling."""

    name: str
    workdir: Path
    queue: JobQueue
    poll_seconds: float

    def _enqueue(self, bundle: JobBundle, task: TaskSpec) -> JobHandle:
        keep = self.workdir / "bundles" / bundle.manifest.content_hash
        if not keep.exists():
            shutil.copytree(bundle.root, keep)
        job = self.queue.enqueue(bundle.manifest.content_hash, task.id, keep)
        return JobHandle(job_id=job.id, content_hash=job.content_hash, backend=self.name)

    async def submit(self, bundle: JobBundle, task: TaskSpec) -> JobHandle:
        return self._enqueue(bundle, task)

    async def result(self, handle: JobHandle, timeout: float | None = None) -> JobResult:
        async with asyncio.timeout(timeout):
            while True:
                job = self.queue.get(handle.job_id)
                if job is not None and job.state in ("done", "failed"):
                    return self._result(job)
                await asyncio.sleep(self.poll_seconds)

    def _result(self, job: Job) -> JobResult:
        return result_from_job(job)

    async def cancel(self, handle: JobHandle) -> None:
        self.queue.cancel(handle.job_id)


def make_backend(name: str, **kwargs) -> Backend:
    if name == "mock":
        from trainergym.backends.mock import MockBackend

        return MockBackend(**kwargs)
    if name == "local":
        from trainergym.backends.local import LocalBackend

        return LocalBackend(**kwargs)
    raise ValueError(f"unknown backend {name!r}; available: mock, local")


_shared: dict[tuple, Backend] = {}


def shared_backend(name: str, **kwargs) -> Backend:
    """One backend per (name, settings) in this process. Callers that build envs by the
    hundred (RL adapters) share it, so a GPU backend's queue and concurrency cap hold across
    all of them; the mock is cheap and is made fresh instead."""
    if name == "mock":
        return make_backend(name, **kwargs)
    key = (name, tuple(sorted((k, repr(v)) for k, v in kwargs.items())))
    if key not in _shared:
        _shared[key] = make_backend(name, **kwargs)
    return _shared[key]
