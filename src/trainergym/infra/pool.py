"""A capped pool of warm GPU pods, provider-agnostic.

`PodProvider` is the whole contract with a cloud (create, get, list, terminate), so the Runpod
GraphQL SDK can later give way to its REST API. `PodPool` provisions pods by walking a ladder
(`PoolConfig.ladder`) of (GPU type, count, cloud) rungs: out of stock -> next rung; boot timeout -> terminate -> next
rung; transient errors -> retry the same rung; authentication errors stop everything. A rung the
provider's catalog shows out of stock is skipped without a create. A new pod the provider does
not list yet (its API is eventually consistent) is looked up by name and waited for during
`list_grace` before it counts as gone. Idle pods are reused, then reaped after `idle_seconds`.
Every pod is named `<prefix>-<database id>-<nonce>` and recorded in SQLite before it is created,
so on start `reconcile` can terminate pods the provider bills for but the database does not know
(orphans of a crash) and forget pods that vanished.

Ownership (several dispatchers, one account): each pods database has its own random id in its
pods' names, so a pool reconciles only pods named after its own database (plus legacy
`<prefix>-<nonce>` names of releases before the id) and never touches another workdir's pods.
Within one database each `PodPool` is an owner that heartbeats a row of `owners` (on the
monotonic clock, with the boot it runs in); every pod row names its owner, and a pool loads,
reconciles and re-attaches only its own pods and those of owners whose heartbeat has lapsed
(`PoolConfig.owner_lease`) or that ran in another boot. So two workers on one machine, on one
database or two, never terminate, reuse or re-attach each other's pods.

A terminate is never taken on one read's word: the pod goes to state `terminating` and stays in
the database, re-checked on every tick by id and by name (the DELETE re-sent while it shows),
until it has been absent for `terminate_settle` seconds; only then is it billed and forgotten, in
one transaction, up to when it was first seen gone (for a pod that died, halfway between when it
was last seen alive and when it was first seen gone). A create that failed in an unknown way is
looked up by name until `boot_timeout`. Billed seconds x rate go to the `costs` table: the rate
the provider reported, else the list price of the GPUs the pod holds, never $0 for a pod that ran.
Durations are measured on a monotonic clock (a wall-clock jump neither stops reaping nor changes a
bill); the database keeps wall times, and monotonic ones that a restart in the same boot uses.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from trainergym.infra.queue import boot_id
from trainergym.infra.store import Store
from trainergym.job.gpu import list_price


class ProviderError(Exception):
    """A provider call failed. `kind` says how the pool reacts; an unknown failure may have left a
    pod behind, so the pool reconciles."""

    kind: Literal["capacity", "auth", "transient", "invalid", "unknown"] = "unknown"


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
    created: float | None = None  # when the provider created it (a wall date), if it says


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
    state: Literal["booting", "idle", "busy", "terminating", "gone"] = "booting"
    idle_since: float | None = None
    job_id: str | None = None
    rung_index: int = 0
    boot_deadline: float = 0.0
    gpu_type: str = ""  # the GPUs the pod holds: the rung's until the provider says otherwise
    gpu_count: int = 0
    gpu_said: bool = False  # the provider named the GPUs (else they are the rung's guess)
    seen: float | None = None  # when the provider or the pod's service last showed it alive
    gone_since: float | None = None  # terminating: since when it is absent (None: seen since)
    deleted_at: float | None = None  # terminating: when the last DELETE was sent
    reason: str = ""  # terminating: why
    billed_until: float | None = None  # terminating: billed up to then (it may show again)

    def __post_init__(self):
        self.gpu_type, self.gpu_count = self.gpu_type or self.rung.gpu_type, self.gpu_count or self.rung.gpu_count

    @property
    def gpus(self) -> str:
        """What the pod holds, e.g. "2x NVIDIA A40"."""
        return f"{self.gpu_count}x {self.gpu_type}"


_SCHEMA = """
CREATE TABLE IF NOT EXISTS pods (
    name TEXT PRIMARY KEY, id TEXT, token TEXT NOT NULL, rung TEXT NOT NULL, url TEXT, cost_per_hr REAL,
    started REAL NOT NULL, state TEXT NOT NULL, idle_since REAL, job_id TEXT, ended REAL, gpu TEXT,
    owner TEXT, mono TEXT
);
CREATE TABLE IF NOT EXISTS owners (owner TEXT PRIMARY KEY, beat REAL NOT NULL, domain TEXT NOT NULL, pid INTEGER);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
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
    list_grace: float = 60.0  # a new pod may be missing from the provider's answers this long (at most boot_timeout)
    idle_seconds: float = 10 * 60.0
    poll_seconds: float = 5.0
    transient_retries: int = 3
    prefix: str = "trainergym"
    terminate_settle: float = 180.0  # a terminated pod stays absent this long (at most 30 polls) before it is forgotten
    shutdown_wait: float = 600.0  # how long `shutdown` waits for terminations to settle (the rest stay recorded)
    owner_lease: float = 600.0  # a pool whose heartbeat is older than this is dead: its pods are taken over
    env: dict[str, str] = field(default_factory=dict)  # what every pod gets (never the provider's API key)


def _running(pid: int) -> bool:
    """Whether process `pid` exists on this machine."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, not ours to signal
    return True


class PoolExhausted(Exception):
    """No rung of the ladder could provide a pod."""


class PodPool:
    """Warm pods for jobs, provisioned down the ladder and recorded in SQLite (`db`), so that a
    restarted pool can `reconcile`. Driven by one thread (the dispatcher's). `clock` measures
    durations (monotonic; a simulated fleet passes its virtual one, and `sleep` to match); `wall`
    only dates what the database keeps, so a restarted pool can carry its pods' ages over."""

    def __init__(self, provider: PodProvider, db: Path | str, config: PoolConfig | None = None,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep, ledger=None,
                 wall: Callable[[], float] | None = None):
        """`ledger`: the installation's cost ledger (`trainergym.infra.costs.Ledger`), which also
        receives every pod's bill; a simulated fleet leaves it out. `wall` defaults to `time.time`
        with the default clock, else to `clock` itself (a virtual fleet keeps virtual dates)."""
        self.provider, self.db, self.config = provider, str(db), config or PoolConfig()
        self.clock, self.sleep, self.ledger = clock, sleep, ledger
        wall = wall or (time.time if clock is time.monotonic else clock)
        self._wall_offset = wall() - clock()  # database time = clock time + offset, fixed for this process
        # Monotonic times compare across processes only within one boot (and one virtual clock).
        self._domain = boot_id() if clock is time.monotonic else f"virtual-{id(clock)}"
        self.owner = f"pool-{uuid.uuid4().hex[:8]}"
        self.store = Store(self.db, _SCHEMA, "pods")
        self.pods: dict[str, Pod] = {}
        self._seen_saved: dict[str, float] = {}  # pod name -> the `seen` last written to the database
        self.failed_jobs: dict[str, str] = {}  # job id -> why no pod could be provisioned for it
        self.refused: str | None = None  # the provider refused our credentials (AuthError) in `tick`
        self.refused_jobs: set[str] = set()  # jobs in `failed_jobs` for that refusal
        with self.store.tx() as db:
            have = {r["name"] for r in db.execute("PRAGMA table_info(pods)")}
            for column in ("gpu", "owner", "mono"):  # an older release's file
                if column not in have:
                    db.execute(f"ALTER TABLE pods ADD COLUMN {column} TEXT")
            row = db.execute("SELECT value FROM meta WHERE key = 'id'").fetchone()
            if row is None:
                db.execute("INSERT INTO meta (key, value) VALUES ('id', ?)", (uuid.uuid4().hex[:8],))
                row = db.execute("SELECT value FROM meta WHERE key = 'id'").fetchone()
        self.db_id = row["value"]
        self._load()

    @property
    def prefix(self) -> str:
        """This database's pods' names start with it (then a nonce)."""
        return f"{self.config.prefix}-{self.db_id}"

    def _ours(self, name: str) -> bool:
        """Whether a pod of the account is named after this database (or by an older release)."""
        legacy = re.fullmatch(re.escape(self.config.prefix) + r"-[0-9a-f]{10}", name)
        return name.startswith(self.prefix + "-") or legacy is not None

    def _beat(self, db=None) -> None:
        """Heartbeat this pool's owner row: its pods are not to be taken over."""
        if db is None:
            with self.store.tx() as db:
                return self._beat(db)
        db.execute("INSERT OR REPLACE INTO owners (owner, beat, domain, pid) VALUES (?, ?, ?, ?)",
                   (self.owner, self.clock(), self._domain, os.getpid()))

    def _live_owners(self, db) -> set[str]:
        """Owners other than this pool whose heartbeat has not lapsed and whose process runs."""
        rows = db.execute("SELECT owner, pid FROM owners WHERE owner != ? AND domain = ? AND beat >= ?",
                          (self.owner, self._domain, self.clock() - self.config.owner_lease)).fetchall()
        # An owner in this very process is never live: in one process a second pool on a database
        # is a restart (the first was abandoned); only another running process keeps its pods.
        return {r["owner"] for r in rows if r["pid"] is not None and r["pid"] != os.getpid() and _running(r["pid"])}

    def _load(self) -> None:
        """Take over the recorded pods of dead owners (and of none) and track them."""
        with self.store.tx() as db:
            self._beat(db)
            live = self._live_owners(db)
            for row in db.execute("SELECT * FROM pods WHERE state != 'gone'").fetchall():
                if row["name"] in self.pods or (row["owner"] in live):
                    continue
                db.execute("UPDATE pods SET owner = ? WHERE name = ?", (self.owner, row["name"]))
                rung = Rung(**json.loads(row["rung"]))
                held = json.loads(row["gpu"]) if row["gpu"] else {}
                mono = json.loads(row["mono"]) if row["mono"] else {}
                if mono.get("domain") == self._domain:  # the same boot: the monotonic times hold
                    started, idle_since = mono["started"], mono.get("idle_since")
                else:  # A pod's age carries over a reboot through the wall clock; never into the future.
                    started = min(self.clock(), row["started"] - self._wall_offset)
                    idle_since = None if row["idle_since"] is None else min(self.clock(), row["idle_since"] - self._wall_offset)
                    mono = {}
                pod = Pod(row["id"], row["name"], row["token"], rung, row["url"], row["cost_per_hr"] or 0.0,
                          started, row["state"], idle_since, row["job_id"], **held)
                pod.seen, pod.gone_since = mono.get("seen"), mono.get("gone_since")
                pod.deleted_at, pod.reason = mono.get("deleted_at"), mono.get("reason", "")
                pod.billed_until = mono.get("billed_until")
                self.pods[row["name"]] = pod

    def _row(self, pod: Pod) -> tuple:
        offset = self._wall_offset
        mono = {"domain": self._domain, "started": pod.started, "idle_since": pod.idle_since, "seen": pod.seen,
                "gone_since": pod.gone_since, "deleted_at": pod.deleted_at, "reason": pod.reason,
                "billed_until": pod.billed_until}
        return (pod.name, pod.id, pod.token, json.dumps(pod.rung.__dict__), pod.url, pod.cost_per_hr,
                pod.started + offset, pod.state, None if pod.idle_since is None else pod.idle_since + offset,
                pod.job_id, self.clock() + offset if pod.state == "gone" else None,
                json.dumps({"gpu_type": pod.gpu_type, "gpu_count": pod.gpu_count, "gpu_said": pod.gpu_said}),
                self.owner, json.dumps(mono))

    _INSERT = ("INSERT OR REPLACE INTO pods (name, id, token, rung, url, cost_per_hr, started, state, idle_since, "
               "job_id, ended, gpu, owner, mono) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")

    def _save(self, pod: Pod) -> None:
        with self.store.tx() as db:
            db.execute(self._INSERT, self._row(pod))

    @property
    def live(self) -> list[Pod]:
        """The pods in use: booting, idle or busy (`terminating` ones are tracked apart)."""
        return [p for p in self.pods.values() if p.state not in ("gone", "terminating")]

    @property
    def terminating(self) -> list[Pod]:
        """Pods terminated whose absence is not confirmed yet: still tracked, possibly billing."""
        return [p for p in self.pods.values() if p.state == "terminating"]

    def saw(self, pod: Pod) -> None:
        """The pod's service answered: it was alive now (what a bill ends at if it dies). Kept in
        memory at once, in the database at most once a minute (a crash loses at most that)."""
        pod.seen = self.clock()
        if pod.seen - self._seen_saved.get(pod.name, -float("inf")) >= 60.0:
            self._seen_saved[pod.name] = pod.seen
            self._save(pod)

    def find(self, pod: Pod) -> PodInfo | None:
        """The provider's view of `pod`, by id and by name (None: it does not show it now)."""
        return self._look_up(pod)

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
            try:
                in_stock = self.provider.available(rung)
            except TransientError:
                in_stock = None  # the create decides
            if in_stock is False:
                tried.append(f"{rung.gpu_count}x {rung.gpu_type} ({rung.cloud}): out of stock in the catalog")
                continue
            for attempt in range(self.config.transient_retries + 1):
                name = f"{self.prefix}-{uuid.uuid4().hex[:10]}"
                pod = Pod("", name, secrets.token_urlsafe(24), rung, None, 0.0, self.clock(), job_id=job_id,
                          rung_index=index, boot_deadline=self.clock() + self.config.boot_timeout)
                self.pods[name] = pod
                self._save(pod)  # recorded before creation: a crash now leaves a known name to reconcile
                try:
                    # No GPU name in the pod's env: the provider may give another type than the
                    # rung's, and the pod's service reads what it holds from the GPUs themselves.
                    pod.id = self.provider.create(name, rung, {**self.config.env, "TRAINERGYM_POD_TOKEN": pod.token})
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
                except ProviderError as e:
                    if e.kind == "invalid":  # the provider refused this rung's request: skip the rung, never retry it
                        tried.append(f"{rung.gpu_count}x {rung.gpu_type} ({rung.cloud}): {e}")
                        self._forget(pod)
                        break
                    # unknown: the pod may exist; tick finds it by name and ends it
                    tried.append(f"{rung.gpu_type}: {e}")
                    pod.job_id = None
                    self._save(pod)
                    break
                pod.started = self.clock()  # billing starts when the create is taken (after any Retry-After)
                pod.boot_deadline = pod.started + self.config.boot_timeout
                self._save(pod)
                return pod
        raise PoolExhausted("no pod could be provisioned: " + "; ".join(tried))

    def _look_up(self, pod: Pod) -> PodInfo | None:
        """The provider's view of `pod`: by id, else by its unique name (a provider may list a new
        pod before its id resolves, or answer for it under another id)."""
        info = self.provider.get(pod.id) if pod.id else None
        if info is None:
            info = next((i for i in self.provider.list() if i.name == pod.name), None)
            if info is not None and info.id != pod.id:
                pod.id = info.id
        if info is not None:
            pod.seen = self.clock()
            if info.ready and info.url and pod.state in ("idle", "busy"):
                pod.url = info.url
        return info

    def _learn(self, pod: Pod, info: PodInfo) -> None:
        """Keep what the provider says of the pod: its rate (0.0 means not said) and its GPUs."""
        if info.cost_per_hr > 0:
            pod.cost_per_hr = info.cost_per_hr
        if info.gpu_type:
            pod.gpu_type, pod.gpu_count, pod.gpu_said = info.gpu_type, info.gpu_count or pod.gpu_count, True

    def tick(self) -> None:
        """Advance booting pods (ready; or timed out, or gone after `list_grace`: terminate and take
        the next rung), reap idle ones."""
        grace = min(self.config.list_grace, self.config.boot_timeout)
        self._beat()
        self._settle_pending()
        for pod in [p for p in self.live if p.state == "booting" and p.id]:
            try:
                info = self._look_up(pod)
            except ProviderError:  # transient or opaque: the next tick asks again
                continue
            if info is not None:
                self._learn(pod, info)
                if info.ready and info.url:
                    pod.url = info.url
                    pod.state = "busy" if pod.job_id else "idle"
                    pod.idle_since = None if pod.job_id else self.clock()
                    self._save(pod)
                    continue
            missing = info is None and self.clock() - pod.started >= grace
            if self.clock() >= pod.boot_deadline or missing:
                reason = (f"{pod.gpus}: not listed by the provider {grace:.0f} s after its create" if missing
                          else f"{pod.gpus}: did not boot within {self.config.boot_timeout:.0f} s")
                job_id = pod.job_id
                self._terminate(pod, "gone before booting" if missing else "boot timeout")
                if job_id is None:
                    continue  # a spare: nobody waits for its replacement
                try:
                    self._create(job_id, pod.rung_index + 1, [reason])
                except PoolExhausted as e:
                    self.failed_jobs[job_id] = str(e)
                except AuthError as e:  # e.g. no balance: nothing can be provisioned
                    self.failed_jobs[job_id] = str(e)
                    self.refused_jobs.add(job_id)
                    self.refused = str(e)
        self.reap()

    def _settle_pending(self) -> None:
        """Advance what may still bill without serving: creates that failed in an unknown way (a
        pod the provider lists under the name is terminated; one unlisted through `boot_timeout`
        never was) and terminations not yet confirmed."""
        unsure = [p for p in self.live if not p.id and p.state != "terminating"]
        if unsure:
            try:
                remote = {info.name: info for info in self.provider.list()}
            except ProviderError:
                remote = None
            for pod in unsure if remote is not None else []:
                info = remote.get(pod.name)
                if info is not None:
                    pod.id = info.id
                    self._learn(pod, info)
                    self._terminate(pod, "created despite an error")
                elif self.clock() - pod.started >= self.config.boot_timeout:
                    self._forget(pod)
        for pod in self.terminating:
            self._check_terminating(pod)

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

    def abandon(self, job_id: str) -> None:
        """The job no longer needs a pod (it failed, was cancelled, or ran elsewhere): a pod booting
        for it becomes a spare, a pod serving it becomes idle, both reaped if nobody takes them."""
        self.failed_jobs.pop(job_id, None)
        for pod in self.live:
            if pod.job_id == job_id and pod.state == "booting":
                pod.job_id = None
                self._save(pod)
            elif pod.job_id == job_id and pod.state == "busy":
                self.release(pod)

    # --- release, reaping, termination -------------------------------------------------------------
    def release(self, pod: Pod) -> None:
        """The pod's job is over: the pod becomes idle, for reuse until `reap` ends it."""
        pod.state, pod.job_id, pod.idle_since = "idle", None, self.clock()
        self._save(pod)

    def discard(self, pod: Pod, reason: str, died: bool = False) -> None:
        """A pod that misbehaved or died: terminate it and stop using it. A pod that `died` is
        billed to halfway between when it was last seen alive and now."""
        gone = None
        if died and pod.seen is not None:
            gone = (pod.seen + self.clock()) / 2
        self._terminate(pod, reason, gone)

    def reap(self) -> int:
        """Terminate pods idle for longer than `idle_seconds`."""
        now, reaped = self.clock(), 0
        for pod in list(self.live):
            if pod.state == "idle" and pod.idle_since is not None and now - pod.idle_since >= self.config.idle_seconds:
                self._terminate(pod, "idle")
                reaped += 1
        return reaped

    def _terminate(self, pod: Pod, reason: str, gone_since: float | None = None) -> None:
        """Send the pod's DELETE and keep it `terminating` (recorded, re-checked by id and by name
        on later ticks) until its absence is confirmed; never raises for the provider."""
        if not pod.cost_per_hr and pod.id:  # last chance to learn its rate and GPUs before it is gone
            try:
                info = self.provider.get(pod.id)
                if info is not None:
                    self._learn(pod, info)
            except ProviderError:
                pass
        pod.state, pod.job_id, pod.reason, pod.gone_since, pod.deleted_at = "terminating", None, reason, gone_since, None
        if pod.id:
            try:
                self.provider.terminate(pod.id)
                pod.deleted_at = self.clock()
            except ProviderError:
                pass
        self._save(pod)
        self._check_terminating(pod)

    def _check_terminating(self, pod: Pod) -> None:
        now = self.clock()
        try:
            info = self._look_up(pod)
        except ProviderError:
            return
        if info is not None:  # still there (a DELETE that did not take, or has not yet): again
            self._learn(pod, info)
            pod.gone_since = None
            try:
                self.provider.terminate(pod.id)
                pod.deleted_at = now
            except ProviderError:
                pass
            self._save(pod)
            return
        if pod.gone_since is None:  # it ended at our last DELETE if sent since it was last seen, else by now
            pod.gone_since = min(now, max(pod.seen or 0.0, pod.deleted_at or 0.0)) or now
        if pod.billed_until is None or pod.gone_since > pod.billed_until:  # billed (in one transaction with the row)
            seconds = max(0.0, pod.gone_since - (pod.billed_until if pod.billed_until is not None else pod.started))
            pod.billed_until = pod.gone_since
            self._finish(pod, seconds, pod.reason)
        settle = min(self.config.terminate_settle, 30 * self.config.poll_seconds)
        if now - max(pod.gone_since, pod.deleted_at or pod.gone_since) >= settle:
            self._forget(pod)

    def _finish(self, pod: Pod, seconds: float, reason: str) -> None:
        """Bill `seconds` of the pod, its row saved in the same transaction."""
        usd, source = self._bill(pod, seconds, reason)
        if self.ledger is not None:
            note = f"pod {pod.id} ({pod.gpus}" + (f", asked {pod.rung.gpu_count}x {pod.rung.gpu_type}"
                                                  if (pod.gpu_type, pod.gpu_count) != (pod.rung.gpu_type, pod.rung.gpu_count)
                                                  else "") + f"), {seconds:.0f} s, {reason}"
            if reason == "vanished":  # billed to its last sighting; it died unseen some time after
                note += " (a lower bound: billed until last seen alive)"
            self.ledger.record("gpu", usd, source, note=note)

    def _bill(self, pod: Pod, seconds: float, reason: str) -> tuple[float, str]:
        """Bill `seconds` of the pod: at the rate the provider reported, else (it never said) at the
        list price of the GPUs it holds. The pod's row (state gone) is written in the same
        transaction, so a crash never bills a pod that stays recorded."""
        if pod.cost_per_hr > 0:
            rate, source = pod.cost_per_hr, "billed rate"
        else:
            rate, source = list_price(pod.gpu_type) * pod.gpu_count, "list price"
        usd = seconds / 3600 * rate
        with self.store.tx() as db:
            db.execute("INSERT INTO costs (at, kind, ref, seconds, usd, source) VALUES (?, 'gpu', ?, ?, ?, ?)",
                       (self.clock() + self._wall_offset, f"{pod.id} {reason}", seconds, usd, source))
            db.execute(self._INSERT, self._row(pod))
        return usd, source

    def billed_usd(self) -> float:
        """The dollars billed for this pool's ended pods so far (seconds x rate, from its database).
        """
        with self.store.tx() as db:
            return db.execute("SELECT COALESCE(SUM(usd), 0) FROM costs").fetchone()[0]

    def shutdown(self, keep_busy: bool = False, wait: bool = True) -> None:
        """Terminate (and bill) every live pod, or with `keep_busy` every one not running a job (a
        restarted dispatcher re-attaches to those). With `wait`, re-check until every termination
        (and every create that failed in an unknown way) has settled, up to `shutdown_wait`; what
        has not stays recorded, for the next start's `reconcile`. Never raises for the provider."""
        for pod in list(self.live):
            if (keep_busy and pod.state == "busy") or pod.state == "terminating" or not pod.id:
                continue
            self._terminate(pod, "shutdown")
        deadline = self.clock() + self.config.shutdown_wait
        while wait and (self.terminating or any(not p.id for p in self.live)) and self.clock() < deadline:
            self.sleep(self.config.poll_seconds)
            self._beat()
            self._settle_pending()

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
    def reconcile(self, restart: bool = True) -> dict[str, list[str]]:
        """Make the database and the provider agree, for this pool's own pods (see the module's
        ownership rules): take over the pods of dead owners; terminate pods named after this
        database that no live owner records or whose id it never learned (a create that failed
        after all), and, on a `restart`, those a dead pool was booting; a recorded pod the
        provider shows neither by id nor by name is `terminate_vanished`, except, on a `restart`, a busy one:
        the caller re-attaches to it and asks the pod itself. Returns what it did; jobs of
        forgotten pods are for the caller to requeue (their leases lapse)."""
        self._load()
        known = {p.name: p for p in self.pods.values() if p.state != "gone"}
        with self.store.tx() as db:
            live = self._live_owners(db)
            others = {r["name"] for r in db.execute("SELECT name, owner FROM pods WHERE state != 'gone'") if r["owner"] in live}
        done: dict[str, list[str]] = {"terminated": [], "forgotten": [], "adopted": []}
        remote = {info.name: info for info in self._retry(self.provider.list) if self._ours(info.name)}
        for name, info in remote.items():
            pod = known.get(name)
            if name in others or (pod is not None and pod.state == "terminating"):
                continue
            if pod is None or not pod.id or (restart and pod.state == "booting"):
                rung = pod.rung if pod is not None else Rung(info.gpu_type or "unknown", info.gpu_count or 1)
                started = self.clock() if info.created is None else min(self.clock(), info.created - self._wall_offset)
                orphan = Pod(info.id, name, "", rung, info.url, info.cost_per_hr, started,
                             gpu_type=info.gpu_type or "", gpu_count=info.gpu_count or 0)
                if pod is not None:
                    orphan.started = pod.started
                self.pods[name] = orphan
                self._terminate(orphan, "orphan")
                done["terminated"].append(info.id)
        grace = min(self.config.list_grace, self.config.boot_timeout)
        for name, pod in known.items():
            if name in remote or self.clock() - pod.started < grace or pod.state == "terminating" or not pod.id:
                continue
            if restart and pod.state == "busy" and pod.job_id is not None:
                continue  # the restarted dispatcher asks the pod itself: a provider's blank is no death
            if self._retry(self._look_up, pod) is None:
                self.terminate_vanished(pod)
                done["forgotten"].append(pod.id)
        return done

    def terminate_vanished(self, pod: Pod) -> None:
        """A pod the provider shows neither by id nor by name: terminated the slow way (re-checked
        until its absence settles), billed up to when it was last seen alive."""
        self._terminate(pod, "vanished", pod.seen if pod.seen is not None else self.clock())
