"""Backends train a validated job and score it before and after on the hidden eval.

The whole contract is `Backend`: submit a bundle, get a handle, await its result, cancel.
Implementations: `mock` (a documented surrogate, no GPU), `local` (the runner on this host's
GPUs, through the durable queue). Later: `runpod`.
"""

from __future__ import annotations

from typing import Literal, Protocol, runtime_checkable

from pydantic import BaseModel

from trainergym.job import JobBundle
from trainergym.stack import PIN, StackPin
from trainergym.tasks import TaskSpec


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


def make_backend(name: str, **kwargs) -> Backend:
    if name == "mock":
        from trainergym.backends.mock import MockBackend

        return MockBackend(**kwargs)
    if name == "local":
        from trainergym.backends.local import LocalBackend

        return LocalBackend(**kwargs)
    raise ValueError(f"unknown backend {name!r}; available: mock, local")
