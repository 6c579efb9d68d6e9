"""A capped pool of warm GPU pods, provider-agnostic.

`PodProvider` is the whole contract with a cloud (create, get, list, terminate), so the Runpod
GraphQL SDK can later give way to its REST API. `PodPool` provisions pods by walking a ladder
(`PoolConfig.ladder`) of (GPU type, count, cloud) rungs: out of stock -> next rung; boot timeout -> terminate -> next
rung; transient errors -> retry the same rung; authentication errors stop everything. Idle pods
are reused, then reaped after `idle_seconds`. Every pod is named `<prefix>-<nonce>` and recorded
in SQLite before it is created, so on start `reconcile` can terminate pods the provider bills for
but the database does not know (orphans of a crash) and forget pods that vanished. Terminations
are verified by re-reading, and billed seconds x rate go to the `costs` table.
"""

from __future__ import annotations

import json
import secrets
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from trainergym.infra.store import Store


class ProviderError(Exception):
    """A provider call failed. `kind` says how the pool reacts; an unknown failure may have left a
    pod behind, so the pool reconciles."""

    kind: Literal["capacity", "auth", "transient", "unknown"] = "unknown"


class CapacityError(ProviderError):
    """The rung's GPUs are out of stock: the pool takes the next rung."""

    kind = "capacity"


class AuthError(ProviderError):
    """The provider refused our credentials: nothing can be provisioned."""

    kind = "auth"


class TransientError(ProviderError):
    """A failure worth retrying on the same rung (rate limits, timeouts, dropped connections)."""

    kind = "transient"


@dataclass(frozen=True)
class Rung:
    """One step of the ladder: `gpu_count` GPUs of `gpu_type` (the provider's id) in `cloud`."""

    gpu_type: str
    gpu_count: int = 2
    cloud: Literal["SECURE", "COMMUNITY", "ALL"] = "ALL"


# The original system's preference order: the cheapest per job first, rarely in stock.
DEFAULT_LADDER = (Rung("NVIDIA RTX A5000"), Rung("NVIDIA A40"), Rung("NVIDIA GeForce RTX 4090"), Rung("NVIDIA RTX A6000"))


@dataclass
class PodInfo:
    """A pod as the provider reports it."""

    id: str
    name: str
    status: str  # RUNNING, EXITED, TERMINATED ...
    ready: bool  # the container runs and its ports are mapped
    cost_per_hr: float = 0.0  # what the provider bills for it; 0.0 when it does not say (yet)
    url: str | None = None  # where the pod service answers
    gpu_type: str | None = None  # the GPUs the pod actually holds (None: not reported), which may
    gpu_count: int | None = None  # differ from the rung asked for


class PodProvider(Protocol):
    """The whole contract with a cloud. Every method raises a `ProviderError` (or a subclass) when
    the call fails."""

    def create(self, name: str, rung: Rung, env: dict[str, str]) -> str:
        """Create a pod called `name` on `rung` with environment `env`; returns its id at once (it
        boots in the background). `CapacityError` when the rung is out of stock."""

    def get(self, pod_id: str) -> PodInfo | None:
        """The pod, or None when the provider no longer has it."""

    def list(self) -> list[PodInfo]:
        """Every pod of the account (the pool tells its own by their name prefix)."""

    def terminate(self, pod_id: str) -> None:
        """Terminate the pod (the pool checks with `get` that it is gone)."""

    def available(self, rung: Rung) -> bool | None:
        """Whether the provider's catalog shows `rung` in stock now: False skips the rung without
        a create; None when the provider cannot tell (the create decides)."""


@dataclass
class Pod:
    """A pod as the pool tracks it and records it in its database: its bearer `token`, rung, URL and
    rate, its state (booting, idle, busy, gone), the job it serves and its boot deadline."""

    id: str
    name: str
    token: str
    rung: Rung
    url: str | None
    cost_per_hr: float
    started: float
    state: Literal["booting", "idle", "busy", "gone"] = "booting"
    idle_since: float | None = None
    job_id: str | None = None
    rung_index: int = 0
    boot_deadline: float = 0.0


_SCHEMA = """
CREATE TABLE IF NOT EXISTS pods (
    name TEXT PRIMARY KEY, id TEXT, token TEXT NOT NULL, rung TEXT NOT NULL, url TEXT, cost_per_hr REAL,
    started REAL NOT NULL, state TEXT NOT NULL, idle_since REAL, job_id TEXT, ended REAL
);
CREATE TABLE IF NOT EXISTS costs (
    at REAL NOT NULL, kind TEXT NOT NULL, ref TEXT NOT NULL, seconds REAL, usd REAL NOT NULL, source TEXT NOT NULL
);
"""


@dataclass
class PoolConfig:
    """How the pool provisions: at most `max_pods` pods, the ladder of rungs, boot and idle
    timeouts, the poll interval, retries of transient errors, the pods' name prefix and the
    environment every pod gets."""

    max_pods: int = 16
    ladder: tuple[Rung, ...] = DEFAULT_LADDER
    boot_timeout: float = 15 * 60.0
    idle_seconds: float = 10 * 60.0
    poll_seconds: float = 5.0
    transient_retries: int = 3
    prefix: str = "trainergym"
    env: dict[str, str] = field(default_factory=dict)  # what every pod gets (never the provider's API key)


class PoolExhausted(Exception):
    """No rung of the ladder could provide a pod."""


class PodPool:
    """Warm pods for jobs, provisioned down the ladder and recorded in SQLite (`db`), so that a
    restarted pool can `reconcile`. Driven by one thread (the dispatcher's); `clock` and `sleep` may
    be virtual."""

    def __init__(self, provider: PodProvider, db: Path | str, config: PoolConfig | None = None,
                 clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep, ledger=None):
        """`ledger`: the installation's cost ledger (`trainergym.infra.costs.Ledger`), which also
        receives every pod's bill; a simulated fleet leaves it out."""
        self.provider, self.db, self.config = provider, str(db), config or PoolConfig()
        self.clock, self.sleep, self.ledger = clock, sleep, ledger
        self.store = Store(self.db, _SCHEMA)
        self.pods: dict[str, Pod] = {}
        self.failed_jobs: dict[str, str] = {}  # job id -> why no pod could be provisioned for it
        self._load()

    def _load(self) -> None:
        with self.store.tx() as db:
            for row in db.execute("SELECT * FROM pods WHERE state != 'gone'"):
                rung = Rung(**json.loads(row["rung"]))
                self.pods[row["name"]] = Pod(row["id"], row["name"], row["token"], rung, row["url"], row["cost_per_hr"] or 0.0,
                                             row["started"], row["state"], row["idle_since"], row["job_id"])

    def _save(self, pod: Pod) -> None:
        with self.store.tx() as db:
            db.execute("INSERT OR REPLACE INTO pods (name, id, token, rung, url, cost_per_hr, started, state, idle_since, "
                       "job_id, ended) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       (pod.name, pod.id, pod.token, json.dumps(pod.rung.__dict__), pod.url, pod.cost_per_hr, pod.started,
                        pod.state, pod.idle_since, pod.job_id, self.clock() if pod.state == "gone" else None))

    @property
    def live(self) -> list[Pod]:
        """The pods not gone: booting, idle or busy."""
        return [p for p in self.pods.values() if p.state != "gone"]

    # --- provisioning: non-blocking, advanced by tick() -----------------------------------------
    def request(self, job_id: str) -> Pod | None:
        """A ready pod for `job_id`, or None while one is being provisioned or all are busy.
        Raises PoolExhausted when no rung of the ladder can provide a pod."""
        for pod in self.live:
            if pod.job_id == job_id and pod.state == "busy":
                return pod
        if any(p.job_id == job_id and p.state == "booting" for p in self.live):
            return None
        for pod in self.live:
            if pod.state == "idle":
                pod.state, pod.job_id, pod.idle_since = "busy", job_id, None
                self._save(pod)
                return pod
        for pod in self.live:  # a pod booting for a job that no longer needs it
            if pod.state == "booting" and pod.job_id is None:
                pod.job_id = job_id
                self._save(pod)
                return None
        if len(self.live) < self.config.max_pods:
            self._create(job_id, 0, [])
        return None

    def _create(self, job_id: str | None, first_rung: int, tried: list[str]) -> Pod:
        """Create a pod on the first rung from `first_rung` that accepts; it boots in the background."""
        for index in range(first_rung, len(self.config.ladder)):
            rung = self.config.ladder[index]
            for attempt in range(self.config.transient_retries + 1):
                name = f"{self.config.prefix}-{uuid.uuid4().hex[:10]}"
                pod = Pod("", name, secrets.token_urlsafe(24), rung, None, 0.0, self.clock(), job_id=job_id,
                          rung_index=index, boot_deadline=self.clock() + self.config.boot_timeout)
                self.pods[name] = pod
                self._save(pod)  # recorded before creation: a crash now leaves a known name to reconcile
                try:
                    pod.id = self.provider.create(name, rung, {**self.config.env, "TRAINERGYM_POD_TOKEN": pod.token,
                                                               "TRAINERGYM_GPU": rung.gpu_type,
                                                               "TRAINERGYM_GPU_COUNT": str(rung.gpu_count)})
                except CapacityError as e:
                    tried.append(f"{rung.gpu_count}x {rung.gpu_type} ({rung.cloud}): {e}")
                    self._forget(pod)
                    break
                except TransientError as e:
                    tried.append(f"{rung.gpu_type}: transient: {e}")
                    self._forget(pod)
                    self.sleep(min(60.0, 2.0 ** attempt))
                    continue
                except AuthError:
                    self._forget(pod)
                    raise
                except ProviderError as e:  # unknown: the pod may exist; reconcile finds it by name
                    tried.append(f"{rung.gpu_type}: {e}")
                    self.reconcile()
                    break
                self._save(pod)
                return pod
        raise PoolExhausted("no pod could be provisioned: " + "; ".join(tried))

    def tick(self) -> None:
        """Advance booting pods (ready, or timed out: terminate and take the next rung), reap idle ones."""
        for pod in [p for p in self.live if p.state == "booting" and p.id]:
            try:
                info = self.provider.get(pod.id)
            except TransientError:
                continue
            if info is not None:
                pod.cost_per_hr = info.cost_per_hr  # a booting pod bills too
                if info.ready and info.url:
                    pod.url = info.url
                    pod.state = "busy" if pod.job_id else "idle"
                    pod.idle_since = None if pod.job_id else self.clock()
                    self._save(pod)
                    continue
            if self.clock() >= pod.boot_deadline or info is None:
                reason = f"{pod.rung.gpu_type}: did not boot within {self.config.boot_timeout:.0f} s"
                self._terminate(pod, "boot timeout")
                try:
                    self._create(pod.job_id, pod.rung_index + 1, [reason])
                except PoolExhausted:
                    self.failed_jobs[pod.job_id] = reason
        self.reap()

    def acquire(self, job_id: str) -> Pod:
        """Blocking `request`: wait (sleeping `poll_seconds`) until a pod is ready for the job."""
        while True:
            if job_id in self.failed_jobs:
                raise PoolExhausted(self.failed_jobs.pop(job_id))
            pod = self.request(job_id)
            if pod is not None:
                return pod
            if len(self.live) >= self.config.max_pods and not any(p.job_id == job_id for p in self.live):
                raise PoolExhausted(f"all {self.config.max_pods} pods are busy")
            self.sleep(self.config.poll_seconds)
            self.tick()

    def _forget(self, pod: Pod) -> None:
        pod.state = "gone"
        self._save(pod)
        self.pods.pop(pod.name, None)

    # --- release, reaping, termination -------------------------------------------------------------
    def release(self, pod: Pod) -> None:
        """The pod's job is over: the pod becomes idle, for reuse until `reap` ends it."""
        pod.state, pod.job_id, pod.idle_since = "idle", None, self.clock()
        self._save(pod)

    def discard(self, pod: Pod, reason: str) -> None:
        """A pod that misbehaved or died: terminate it and stop using it."""
        self._terminate(pod, reason)

    def reap(self) -> int:
        """Terminate pods idle for longer than `idle_seconds`."""
        now, reaped = self.clock(), 0
        for pod in list(self.live):
            if pod.state == "idle" and pod.idle_since is not None and now - pod.idle_since >= self.config.idle_seconds:
                self._terminate(pod, "idle")
                reaped += 1
        return reaped

    def _terminate(self, pod: Pod, reason: str) -> None:
        for _ in range(3):
            try:
                self.provider.terminate(pod.id)
                if self.provider.get(pod.id) is None:
                    break
            except TransientError:
                pass
            self.sleep(self.config.poll_seconds)
        else:
            raise ProviderError(f"pod {pod.id} ({pod.name}) is still there after terminate: it keeps billing")
        seconds = max(0.0, self.clock() - pod.started)
        self._bill(pod, seconds, reason)
        self._forget(pod)

    def _bill(self, pod: Pod, seconds: float, reason: str) -> None:
        usd = seconds / 3600 * pod.cost_per_hr
        with self.store.tx() as db:
            db.execute("INSERT INTO costs (at, kind, ref, seconds, usd, source) VALUES (?, 'gpu', ?, ?, ?, ?)",
                       (self.clock(), f"{pod.id} {reason}", seconds, usd, "billed rate"))
        if self.ledger is not None:
            self.ledger.record("gpu", usd, "billed rate", note=f"pod {pod.id} ({pod.rung.gpu_count}x {pod.rung.gpu_type}), "
                                                               f"{seconds:.0f} s, {reason}")

    def billed_usd(self) -> float:
        """The dollars billed for this pool's ended pods so far (seconds x rate, from its database).
        """
        with self.store.tx() as db:
            return db.execute("SELECT COALESCE(SUM(usd), 0) FROM costs").fetchone()[0]

    def shutdown(self) -> None:
        """Terminate (and bill) every live pod; a pod not created yet is forgotten. Raises
        ProviderError if a pod is still there after its terminate."""
        for pod in list(self.live):
            if pod.id:
                self._terminate(pod, "shutdown")
            else:
                self._forget(pod)

    def _retry(self, fn, *args):
        """A provider read, retried with backoff over transient failures."""
        for attempt in range(self.config.transient_retries + 1):
            try:
                return fn(*args)
            except TransientError:
                if attempt == self.config.transient_retries:
                    raise
                self.sleep(min(60.0, 2.0 ** attempt))

    # --- crash recovery ----------------------------------------------------------------------------
    def reconcile(self) -> dict[str, list[str]]:
        """Make the database and the provider agree: terminate pods of ours the database does not
        know (or that it lost track of), forget pods the provider no longer has. Returns what it did;
        jobs of forgotten pods are for the caller to requeue (their leases lapse)."""
        known = {p.name: p for p in self.live}
        done: dict[str, list[str]] = {"terminated": [], "forgotten": [], "adopted": []}
        remote = {info.name: info for info in self._retry(self.provider.list) if info.name.startswith(self.config.prefix + "-")}
        for name, info in remote.items():
            pod = known.get(name)
            if pod is None or pod.state == "booting" or not pod.id:
                orphan = Pod(info.id, name, "", Rung("unknown"), info.url, info.cost_per_hr, self.clock())
                if pod is not None:
                    orphan.started = pod.started
                    self.pods.pop(name, None)
                self._terminate(orphan, "orphan")
                done["terminated"].append(info.id)
        for name, pod in known.items():
            if pod.id and name not in remote and self._retry(self.provider.get, pod.id) is None:
                self._bill(pod, max(0.0, self.clock() - pod.started), "vanished")
                self._forget(pod)
                done["forgotten"].append(pod.id)
            elif not pod.id and name not in remote:
                self._forget(pod)
        return done
