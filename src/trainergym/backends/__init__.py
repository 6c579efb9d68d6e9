"""Backends train a validated job and score it before and after on the hidden eval.

The whole contract is `Backend`: submit a bundle, get a handle, await its `RunResult`, cancel.
Every backend is built the same way, by name, from one `BackendOptions`:

    backend = make_backend("mock", seed=0)

- `mock`: a documented surrogate (`backends.mock`), no GPU; its results say `surrogate`.
- `local`: the runner on this host's GPUs, through the durable queue (`backends.local`).
- `runpod`: a warm pool of rented Runpod pods, through the durable queue (`backends.runpod`);
  jobs run once `trainergym worker --backend runpod` drains the queue.
- `fleet`: the runpod backend on simulated pods and a virtual clock (`backends.fleet`);
  surrogate results, for the pool's tests and benchmarks.
- `mini`: real GRPO of a tiny model per family in this process, on a GPU or the CPU
  (`backends.mini`, the `mini` extra); its results say `measured` at `scale="mini"`.

A backend that cannot start here (no GPU, no API key, a missing extra) raises
`BackendUnavailable` with one line saying why and what to do.

Zone: the library and the dispatcher. Backends may import `task`, `job`, `infra`, `host` and
`mini`, and of `probe` only `probe.sandbox` (the mini backend runs the job's rewards confined
exactly as the probe does); never `env`, the rest of `probe`, `agents` or `adapters`.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from pydantic import BaseModel, ConfigDict, Field

from trainergym.job.result import RunResult

if TYPE_CHECKING:
    from trainergym.job.bundle import JobBundle
    from trainergym.task.spec import TaskSpec


class JobHandle(BaseModel):
    """What `submit` returns: enough to ask for the job's result or cancel it."""

    job_id: str
    content_hash: str
    backend: str


class Backend(Protocol):
    """Trains validated jobs. Implementations must be safe to share across concurrent episodes
    of one event loop, and must never show a job's code the hidden eval."""

    name: str

    async def submit(self, bundle: JobBundle, task: TaskSpec) -> JobHandle:
        """Queue a validated job; returns at once. A byte-identical bundle may be answered
        with the result of its earlier run."""
        ...

    async def result(self, handle: JobHandle, timeout: float | None = None) -> RunResult:
        """Wait for the job's result (raises TimeoutError after `timeout` seconds)."""
        ...

    async def cancel(self, handle: JobHandle) -> None:
        """Stop the job if it is still running; idempotent."""
        ...


class BackendOptions(BaseModel):
    """Everything a backend may be configured with; each backend reads what applies to it.
    Fields left None take the backend's default (paths under the data directory)."""

    model_config = ConfigDict(extra="forbid")
    seed: int = 0  # mock and fleet: the seed of the surrogate's noise and the simulated fleet
    workdir: Path | None = None  # queue backends: bundles, runs, pod state (default <data dir>/worker)
    queue: Path | None = None  # queue backends: the queue database (default <data dir>/jobs.db)
    max_jobs: int | None = None  # local: concurrent jobs; runpod and fleet: pods
    lease_seconds: float | None = Field(None, gt=0)  # queue backends: a lease's life without a heartbeat
    ladder: Path | None = None  # runpod and fleet: TOML file of [[rung]] gpu_type, gpu_count, cloud
    gpu_class: str | None = None  # mock: the GPU class to simulate (default: the task's)
    latency: float = 0.0  # mock: seconds a job takes
    reuse: bool = True  # mock: answer a byte-identical resubmission with the earlier result
    device: str | None = None  # mini: "cuda", "cuda:N" or "cpu" (default: CUDA if torch sees a GPU, else the CPU)
    scale: str | None = None  # mini: "gpu" or "micro" (default: gpu on a GPU, micro on the CPU)
    seeds: int | None = Field(None, ge=1)  # mini: seeds per job (default 8 on a GPU, 2 on the CPU)
    eval_n: int | None = Field(None, ge=1)  # mini: hidden-eval items pre and post are scored on (default all 200)
    base_model: Path | None = None  # mini: a local Hugging Face model directory instead of the family's mini base


class BackendUnavailable(RuntimeError):
    """The backend cannot start here; the message says why and what to do, in one line."""


# name -> "module:factory"; a factory takes BackendOptions and returns a Backend. Imported on
# use, so the mock never pays for httpx, the runpod SDK or the runner.
BACKENDS = {
    "mock": "trainergym.backends.mock:MockBackend.from_options",
    "local": "trainergym.backends.local:LocalBackend.from_options",
    "runpod": "trainergym.backends.runpod:PodBackend.from_options",
    "fleet": "trainergym.backends.fleet:simulated_backend",
    "mini": "trainergym.backends.mini:MiniBackend.from_options",
}


def make_backend(name: str, options: BackendOptions | None = None, **fields) -> Backend:
    """Build the backend called `name` from `options` (updated by `fields`). Raises ValueError
    for an unknown name and `BackendUnavailable` when it cannot run here."""
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}; available: {', '.join(BACKENDS)}")
    options = BackendOptions.model_validate({**(options or BackendOptions()).model_dump(exclude_unset=True), **fields})
    module, attr = BACKENDS[name].split(":")
    factory = importlib.import_module(module)
    for part in attr.split("."):
        factory = getattr(factory, part)
    return factory(options)


_shared: dict[tuple, Backend] = {}


def shared_backend(name: str, options: BackendOptions | None = None, **fields) -> Backend:
    """One backend per (name, options) in this process. Callers that build envs by the
    hundred (RL adapters) share it, so a GPU backend's queue and concurrency cap hold across
    all of them; the mock is cheap and is made fresh instead."""
    if name == "mock":
        return make_backend(name, options, **fields)
    key = (name, (options or BackendOptions()).model_copy(update=fields).model_dump_json())
    if key not in _shared:
        _shared[key] = make_backend(name, options, **fields)
    return _shared[key]
