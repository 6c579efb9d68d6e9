"""A capped pool of warm GPU pods, provider-agnostic.

`PodProvider` is the whole contract with a cloud (create, get, list, terminate), so the Runpod
GraphQL SDK can later give way to its REST API. `PodPool` provisions pods by walking a `Ladder`
of (GPU type, count, cloud) rungs: out of stock -> next rung; boot timeout -> terminate -> next
rung; transient errors -> retry the same rung; authentication errors stop everything. Idle pods
are reused, then reaped after `idle_seconds`. Every pod is named `<prefix>-<nonce>` and recorded
in SQLite before it is created, so on start `reconcile` can terminate pods the provider bills for
but the database does not know (orphans of a crash) and forget pods that vanished. Terminations
are verified by re-reading, and billed seconds x rate go to the `costs` table.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import time
import uuid
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol


class ProviderError(Exception):
    kind: Literal["capacity", "auth", "transient", "unknown"] = "unknown"


class CapacityError(ProviderError):
    kind = "capacity"


class AuthError(ProviderError):
    kind = "auth"


class TransientError(ProviderError):
    kind = "transient"


@dataclass(frozen=True)
class Rung:
    gpu_type: str
    gpu_count: int = 2
    cloud: Literal["SECURE", "COMMUNITY", "ALL"] = "ALL"


# The original system's preference order: the cheapest per job first, rarely in stock.
DEFAULT_LADDER = (Rung("NVIDIA RTX A5000"), Rung("NVIDIA A40"), Rung("NVIDIA GeForce RTX 4090"), Rung("NVIDIA RTX A6000"))


@dataclass
class PodInfo:
    id: str
    name: str
    status: str  # RUNNING, EXITED, TERMINATED ...
    ready: bool  # the container runs and its ports are mapped
    cost_per_hr: float = 0.0
    url: str | None = None  # where the pod service answers


class PodProvider(Protocol):
    def create(self, name: str, rung: Rung, env: dict[str, str]) -> str: ...
    def get(self, pod_id: str) -> PodInfo | None: ...
    def list(self) -> list[PodInfo]: ...
    def terminate(self, pod_id: str) -> None: ...


@dataclass
class Pod:
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
    def __init__(self, provider: PodProvider, db: Path | str, config: PoolConfig | None = None,
                 clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep):
        self.provider, self.db, self.config = provider, str(db), config or PoolConfig()
        self.clock, self.sleep = clock, sleep
        Path(self.db).parent.mkdir(parents=True, exist_ok=True)
        with self._tx() as db:
            db.executescript(_SCHEMA)
        self.pods: dict[str, Pod] = {}
        self._load()

    @contextmanager
    def _tx(self):
        db = sqlite3.connect(self.db, timeout=30)
        db.row_factory = sqlite3.Row
        try:
            with db:
                yield db
        finally:
            db.close()

    def _load(self) -> None:
        with self._tx() as db:
            for row in db.execute("SELECT * FROM pods WHERE state != 'gone'"):
                rung = Rung(**json.loads(row["rung"]))
                self.pods[row["name"]] = Pod(row["id"], row["name"], row["token"], rung, row["url"], row["cost_per_hr"] or 0.0,
                                             row["started"], row["state"], row["idle_since"], row["job_id"])

    def _save(self, pod: Pod) -> None:
        with self._tx() as db:
            db.execute("INSERT OR REPLACE INTO pods (name, id, token, rung, url, cost_per_hr, started, state, idle_since, "
                       "job_id, ended) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       (pod.name, pod.id, pod.token, json.dumps(pod.rung.__dict__), pod.url, pod.cost_per_hr, pod.started,
                        pod.state, pod.idle_since, pod.job_id, self.clock() if pod.state == "gone" else None))

    @property
    def live(self) -> list[Pod]:
        return [p for p in self.pods.values() if p.state != "gone"]

    # --- provisioning ----------------------------------------------------------------------------
    def acquire(self, job_id: str) -> Pod:
        """An idle warm pod, else a new one from the ladder (within the cap)."""
        for pod in self.live:
            if pod.state == "idle":
                pod.state, pod.job_id, pod.idle_since = "busy", job_id, None
                self._save(pod)
                return pod
        if len(self.live) >= self.config.max_pods:
            raise PoolExhausted(f"all {self.config.max_pods} pods are busy")
        pod = self._provision()
        pod.state, pod.job_id = "busy", job_id
        self._save(pod)
        return pod

    def _provision(self) -> Pod:
        tried = []
        for rung in self.config.ladder:
            for attempt in range(self.config.transient_retries + 1):
                name = f"{self.config.prefix}-{uuid.uuid4().hex[:10]}"
                token = secrets.token_urlsafe(24)
                pod = Pod("", name, token, rung, None, 0.0, self.clock())
                self.pods[name] = pod
                self._save(pod)  # recorded before creation: a crash now leaves a known name to reconcile
                try:
                    pod.id = self.provider.create(name, rung, {**self.config.env, "TRAINERGYM_POD_TOKEN": token})
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
                if self._wait_ready(pod):
                    pod.state, pod.idle_since = "idle", self.clock()
                    self._save(pod)
                    return pod
                tried.append(f"{rung.gpu_type}: did not boot within {self.config.boot_timeout:.0f} s")
                self._terminate(pod, "boot timeout")
                break
        raise PoolExhausted("no pod could be provisioned: " + "; ".join(tried))

    def _wait_ready(self, pod: Pod) -> bool:
        deadline = self.clock() + self.config.boot_timeout
        while self.clock() < deadline:
            try:
                info = self.provider.get(pod.id)
            except TransientError:
                info = None
            if info is not None:
                pod.cost_per_hr = info.cost_per_hr  # a booting pod bills too
                if info.ready and info.url:
                    pod.url = info.url
                    return True
            self.sleep(self.config.poll_seconds)
        return False

    def _forget(self, pod: Pod) -> None:
        pod.state = "gone"
        self._save(pod)
        self.pods.pop(pod.name, None)

    # --- release, reaping, termination -------------------------------------------------------------
    def release(self, pod: Pod) -> None:
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
        with self._tx() as db:
            db.execute("INSERT INTO costs (at, kind, ref, seconds, usd, source) VALUES (?, 'gpu', ?, ?, ?, ?)",
                       (self.clock(), f"{pod.id} {reason}", seconds, seconds / 3600 * pod.cost_per_hr, "billed rate"))

    def billed_usd(self) -> float:
        with self._tx() as db:
            return db.execute("SELECT COALESCE(SUM(usd), 0) FROM costs").fetchone()[0]

    def shutdown(self) -> None:
        for pod in list(self.live):
            if pod.id:
                self._terminate(pod, "shutdown")
            else:
                self._forget(pod)

    # --- crash recovery ----------------------------------------------------------------------------
    def reconcile(self) -> dict[str, list[str]]:
        """Make the database and the provider agree: terminate pods of ours the database does not
        know (or that it lost track of), forget pods the provider no longer has. Returns what it did;
        jobs of forgotten pods are for the caller to requeue (their leases lapse)."""
        known = {p.name: p for p in self.live}
        done: dict[str, list[str]] = {"terminated": [], "forgotten": [], "adopted": []}
        remote = {info.name: info for info in self.provider.list() if info.name.startswith(self.config.prefix + "-")}
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
            if pod.id and name not in remote and self.provider.get(pod.id) is None:
                self._bill(pod, max(0.0, self.clock() - pod.started), "vanished")
                self._forget(pod)
                done["forgotten"].append(pod.id)
            elif not pod.id and name not in remote:
                self._forget(pod)
        return done
