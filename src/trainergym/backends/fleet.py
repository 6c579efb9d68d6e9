"""A simulated GPU provider and pods on a virtual clock, for the real pool, queue and dispatcher.

`SimProvider` implements `PodProvider` (stock outs, boot times, pods that never boot or die
mid-job, billed rates); `SimPod` stands in for a pod's service client. Job outcomes come from
a `plan` (by default the mock backend's surrogate on the job's bundle), so every result says
`source: "surrogate"`. Used by `trainergym worker --backend mock` and `bench/fleet.py`.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from trainergym.backends import BackendOptions
from trainergym.infra.pool import CapacityError, PodInfo, PodPool, PoolConfig, Rung
from trainergym.infra.queue import JobQueue
from trainergym.job import gpu as gpus
from trainergym.job.result import RunResult
from trainergym.paths import data_dir

NO_STOCK = "There are no longer any instances available with the requested specifications."


class Clock:
    """Virtual seconds; `sleep` advances them."""

    def __init__(self, now: float = 0.0):
        self.now = now

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        """Advance the clock by `seconds`; returns at once."""
        self.now += seconds


@dataclass
class SimConfig:
    """How the simulated fleet behaves: boot times, pods that never boot or die mid-job, stock outs
    per GPU type. The same `seed` gives the same fleet."""

    boot_seconds: float = 120.0
    boot_jitter: float = 30.0
    never_boot_rate: float = 0.0
    die_rate: float = 0.0  # share of pods that die once, at a random point of their first hours
    die_within: float = 3600.0
    out_of_stock: dict[str, float] = field(default_factory=dict)  # GPU type -> chance a create fails for stock
    list_lag: float = 0.0  # seconds after its create during which a pod is missing from get and list
    rate_unknown: bool = False  # pods report no rate (0.0) until they have booted; they bill all the same
    substitute: dict[str, str] = field(default_factory=dict)  # GPU type asked -> GPU type given
    seed: int = 0


@dataclass
class _SimPod:
    info: PodInfo
    gpu_type: str
    created: float
    boot_at: float | None
    dies_at: float | None
    terminated: float | None = None


class SimProvider:
    """A `PodProvider` on a virtual clock: pods boot after about `boot_seconds`, some never do or
    die mid-job, creates fail for stock at the configured rate, and each pod bills its GPUs' list
    price. `services` keeps each pod's jobs, so they outlive a dispatcher."""

    def __init__(self, clock: Clock, config: SimConfig | None = None):
        self.clock, self.config = clock, config or SimConfig()
        self.rng = random.Random(self.config.seed)
        self.pods: dict[str, _SimPod] = {}
        self.services: dict[str, dict] = {}  # pod id -> its service's jobs (outlive a dispatcher)
        self.creates = 0

    def _alive(self, pod: _SimPod) -> bool:
        now = self.clock()
        return pod.terminated is None and (pod.dies_at is None or now < pod.dies_at)

    def create(self, name: str, rung: Rung, env: dict[str, str]) -> str:
        """A new pod's id; raises `CapacityError` when the rung's GPU type is out of stock."""
        self.creates += 1
        if self.rng.random() < self.config.out_of_stock.get(rung.gpu_type, 0.0):
            raise CapacityError(NO_STOCK)
        pod_id = f"sim{self.creates:07d}"
        now = self.clock()
        boot = None if self.rng.random() < self.config.never_boot_rate else \
            now + max(10.0, self.rng.gauss(self.config.boot_seconds, self.config.boot_jitter))
        dies = now + self.config.boot_seconds + self.rng.uniform(0, self.config.die_within) \
            if self.rng.random() < self.config.die_rate else None
        given = self.config.substitute.get(rung.gpu_type, rung.gpu_type)
        rate = gpus.list_price(given) * rung.gpu_count
        self.pods[pod_id] = _SimPod(PodInfo(pod_id, name, "RUNNING", False, rate, None, given, rung.gpu_count), given, now,
                                    boot, dies)
        return pod_id

    def get(self, pod_id: str) -> PodInfo | None:
        """The pod, ready (with a `sim://` URL) once booted; None once it is terminated or dead, and
        during `list_lag` after its create."""
        pod = self.pods.get(pod_id)
        if pod is None or not self._alive(pod) or self.clock() < pod.created + self.config.list_lag:
            return None
        ready = pod.boot_at is not None and self.clock() >= pod.boot_at
        rate = 0.0 if self.config.rate_unknown and not ready else pod.info.cost_per_hr
        return PodInfo(pod.info.id, pod.info.name, "RUNNING", ready, rate, f"sim://{pod_id}" if ready else None,
                       pod.info.gpu_type, pod.info.gpu_count, created=pod.created)

    def serving(self, pod_id: str) -> bool:
        """Whether the pod's own service answers (booted, not dead nor terminated), whatever `get`
        shows: the API may lag or blank while the pod runs."""
        pod = self.pods.get(pod_id)
        return pod is not None and self._alive(pod) and pod.boot_at is not None and self.clock() >= pod.boot_at

    def available(self, rung: Rung) -> bool | None:
        """A simulated catalog cannot tell: each create draws its own stock out."""
        return None

    def list(self) -> list[PodInfo]:
        """Every pod not terminated or dead (and past its `list_lag`)."""
        return [info for pid in self.pods if (info := self.get(pid)) is not None]

    def terminate(self, pod_id: str) -> None:
        """End the pod's billing now (or at its death, if it died first); idempotent."""
        pod = self.pods.get(pod_id)
        if pod is not None and pod.terminated is None:
            pod.terminated = self.clock() if self._alive(pod) else (pod.dies_at or self.clock())

    def billed_usd(self) -> float:
        """What the provider bills: from create to terminate (or death)."""
        total = 0.0
        for pod in self.pods.values():
            end = pod.terminated if pod.terminated is not None else (pod.dies_at if pod.dies_at and pod.dies_at <= self.clock()
                                                                     else self.clock())
            total += (end - pod.created) / 3600 * pod.info.cost_per_hr
        return total

    def running(self) -> int:
        """How many pods are alive."""
        return sum(1 for pod in self.pods.values() if self._alive(pod))


def surrogate_plan(bundle_dir: str, seed: int = 0) -> dict:
    """A job's simulated run from the mock backend's surrogate on its bundle."""
    from trainergym.backends.mock import EVAL_SECONDS, simulate
    from trainergym.job.bundle import JobBundle
    from trainergym.task.spec import load_task

    bundle = JobBundle.open(bundle_dir)
    task = load_task(bundle.manifest.task_id)
    result = simulate(bundle, task, seed, gpus.gpu(task.bounds.gpu))
    seconds = result.train_seconds or 0.0
    return {"train_seconds": seconds, "eval_seconds": EVAL_SECONDS, "result": result.model_dump(mode="json")}


class SimPod:
    """Client of a simulated pod's service (`client_factory` of the dispatcher). Once the pod is
    gone, its calls (but `cancel` and `close`) raise httpx.ConnectError, as a dead pod's would."""

    def __init__(self, provider: SimProvider, pod_id: str, plan: Callable[[str], dict] = surrogate_plan):
        self.provider, self.pod_id, self.plan = provider, pod_id, plan
        self.jobs: dict[str, dict] = provider.services.setdefault(pod_id, {})

    @classmethod
    def factory(cls, provider: SimProvider, plan: Callable[[str], dict] = surrogate_plan):
        """A dispatcher `client_factory` that reaches `provider`'s pods by their `sim://<pod id>`
        URLs."""
        return lambda url, token: cls(provider, url.removeprefix("sim://"), plan)

    def _check(self) -> None:
        # The pod itself, not the provider's API view of it: a service answers while the API blanks.
        if not self.provider.serving(self.pod_id):
            raise httpx.ConnectError(f"pod {self.pod_id} is gone")

    def health(self) -> dict:
        """`{ok, busy, job, key}` as the pod service answers (the latest job and its key)."""
        self._check()
        latest = next(reversed(self.jobs), None)
        busy = latest is not None and not self.status(latest)["done"]
        return {"ok": True, "busy": busy, "job": latest, "key": self.jobs[latest]["key"] if latest else None}

    def submit(self, bundle_dir: Path, family: str, base_model: str, key: str = "") -> str:
        """Start a job whose run is `plan(bundle_dir)`; returns its id."""
        self._check()
        job_id = f"{self.pod_id}-{len(self.jobs)}"
        plan = self.plan(str(bundle_dir))
        self.jobs[job_id] = {"plan": plan, "start": self.provider.clock(), "eval_at": None, "key": key}
        return job_id

    def status(self, job_id: str) -> dict:
        """`{phase, done}`: `train`, then `awaiting-eval` once the planned training time has passed,
        then `post` from `send_eval` until the planned eval time has passed, then `done`."""
        self._check()
        job, now = self.jobs[job_id], self.provider.clock()
        if job["eval_at"] is None:
            trained = now >= job["start"] + job["plan"]["train_seconds"]
            return {"phase": "awaiting-eval" if trained else "train", "done": False}
        done = now >= job["eval_at"] + job["plan"]["eval_seconds"]
        return {"phase": "done" if done else "post", "done": done}

    def send_eval(self, job_id: str, items: list[dict]) -> None:
        """Start the job's scoring now (the items themselves are not used)."""
        self._check()
        self.jobs[job_id]["eval_at"] = self.provider.clock()

    def result(self, job_id: str) -> RunResult | None:
        """The planned `RunResult` (the dispatcher asks only once `status` says done)."""
        self._check()
        return RunResult.model_validate(self.jobs[job_id]["plan"]["result"])

    def cancel(self, job_id: str) -> None:
        """Nothing to stop: a simulated job only has a plan."""
        pass

    def close(self) -> None:
        """Nothing to release."""
        pass


def simulated_backend(options: BackendOptions):
    """The registry's `fleet` backend: the real dispatcher, pool and queue on simulated pods and
    a virtual clock (`trainergym worker --backend mock`). Results are the surrogate's. The pods
    live and die with this process, so their database is its own (a temporary file); the queue
    is the shared one, leased on real time, so several simulated workers may drain it at once."""
    import atexit
    import shutil
    import tempfile

    from trainergym.backends.runpod import PodBackend, ladder

    workdir = options.workdir or data_dir() / "worker"
    clock = Clock()
    provider = SimProvider(clock, SimConfig(seed=options.seed))
    config = PoolConfig(max_pods=options.max_jobs or 16, ladder=ladder(options.ladder))
    pods = Path(tempfile.mkdtemp(prefix="trainergym-simulated-pods-"))
    atexit.register(shutil.rmtree, pods, ignore_errors=True)
    pool = PodPool(provider, pods / "pods.db", config, clock=clock, sleep=clock.sleep)
    queue = JobQueue(options.queue or data_dir() / "jobs.db", lease_seconds=options.lease_seconds or 600)
    return PodBackend(workdir, pool, queue=queue, poll_seconds=30, sleep=clock.sleep, client_factory=SimPod.factory(provider))


def lognormal_minutes(rng: random.Random, median: float, sigma: float = 0.6) -> float:
    """A long-tailed duration (minutes) with the given median."""
    return median * math.exp(rng.gauss(0.0, sigma))

