"""The durable job queue: SQLite in WAL mode, safe across processes and crashes.

    queued -> leased -> running -> done
                 \\-------\\-----> failed (after max_attempts, or a permanent failure)

A worker `lease`s the oldest queued job for `lease_seconds`, keeps the lease alive with
`heartbeat`, and ends it with `complete` or `fail`. A lease that expires (the worker or its pod
died) is returned to the queue by `recover`, and that attempt counts. Completion is idempotent
and only the current lease holder can change a job, so a late answer from a lost worker never
overwrites a newer attempt. Jobs are deduplicated by bundle content hash. A row carries what a
dispatcher needs to place the job (its family, base model and hash) and, once it ends, its
`RunResult`; whether a failed attempt is retried is the result's own `transient` flag.

Leases run on this machine's monotonic clock, which every process shares and a wall-clock jump
does not move; each lease also records the boot it was taken in, and a lease from another boot
has lapsed (its holder died with the machine). Simulated fleets keep their virtual clocks for
pods and job durations, never for leases, so dispatchers sharing a queue never run a job twice.
`created` and `updated` are wall-clock dates, for people.
"""

from __future__ import annotations

import functools
import sqlite3
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from trainergym.infra.store import Store
from trainergym.job.result import FailureReason, RunResult

State = Literal["queued", "leased", "running", "done", "failed"]
ACTIVE: tuple[State, ...] = ("queued", "leased", "running")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    content_hash TEXT NOT NULL,
    task_id TEXT NOT NULL,
    family TEXT NOT NULL DEFAULT '',
    base_model TEXT NOT NULL DEFAULT '',
    bundle TEXT NOT NULL,
    state TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL,
    owner TEXT,
    lease_expires REAL,
    created REAL NOT NULL,
    updated REAL NOT NULL,
    result TEXT,
    failure_reason TEXT,
    lease_boot TEXT
);
CREATE INDEX IF NOT EXISTS jobs_state ON jobs (state, created);
CREATE INDEX IF NOT EXISTS jobs_hash ON jobs (content_hash);
"""


# Columns added since the first release, so an older queue file opens as it is.
_ADDED = {"family": "TEXT NOT NULL DEFAULT ''", "base_model": "TEXT NOT NULL DEFAULT ''", "lease_boot": "TEXT"}


@functools.cache
def boot_id() -> str:
    """This boot of the machine (Linux's random boot id): monotonic times compare only within one."""
    try:
        return open("/proc/sys/kernel/random/boot_id").read().strip()
    except OSError:
        return "unknown"


class Job(BaseModel):
    """One row of the queue. `bundle` is the directory of the job bundle the dispatcher runs;
    `result` is set when an attempt ends (the last attempt's, for a failed job)."""

    id: str
    content_hash: str
    task_id: str
    family: str
    base_model: str
    bundle: str
    state: State
    attempts: int
    max_attempts: int
    owner: str | None = None
    lease_expires: float | None = None
    created: float
    updated: float
    result: RunResult | None = None
    failure: FailureReason | None = None


class JobQueue:
    """The queue in one SQLite file (`path`), shared by every process that opens it. `clock` is the
    lease clock: the machine's monotonic one; only the queue's own tests replace it."""

    def __init__(self, path: Path | str, lease_seconds: float = 120.0, max_attempts: int = 3,
                 clock: Callable[[], float] = time.monotonic):
        self.path, self.lease_seconds, self.max_attempts, self.clock = str(path), lease_seconds, max_attempts, clock
        self.store = Store(self.path, _SCHEMA, "jobs")
        with self.store.tx() as db:
            have = {r["name"] for r in db.execute("PRAGMA table_info(jobs)")}
            for column, kind in _ADDED.items():
                if column not in have:
                    db.execute(f"ALTER TABLE jobs ADD COLUMN {column} {kind}")

    @staticmethod
    def _job(row: sqlite3.Row | None) -> Job | None:
        if row is None:
            return None
        data = dict(row)
        data.pop("lease_boot", None)
        data["result"] = RunResult.model_validate_json(data["result"]) if data["result"] else None
        reason = data.pop("failure_reason")
        data["failure"] = FailureReason(reason) if reason in FailureReason._value2member_map_ else (
            FailureReason.RUNNER_ERROR if reason else None)  # free text from an older release
        return Job.model_validate(data)

    def _end(self, db, row: sqlite3.Row, state: State, result: RunResult) -> None:
        """Write an attempt's end: the job's state, its failure and its result."""
        result = result.model_copy(update={"job_id": row["id"], "content_hash": row["content_hash"]})
        db.execute("UPDATE jobs SET state = ?, failure_reason = ?, result = ?, owner = NULL, lease_expires = NULL, "
                   "lease_boot = NULL, updated = ? WHERE id = ?", (state, result.failure.value if result.failure else None,
                                                result.model_dump_json(), time.time(), row["id"]))

    # --- producers -------------------------------------------------------------------------
    def enqueue(self, content_hash: str, task_id: str, bundle: Path | str, *, family: str, base_model: str) -> Job:
        """Queue a job; a bundle already queued, running or done is not queued twice."""
        now = time.time()
        with self.store.tx() as db:
            existing = db.execute("SELECT * FROM jobs WHERE content_hash = ? AND state != 'failed' ORDER BY created DESC",
                                  (content_hash,)).fetchone()
            if existing is not None:
                return self._job(existing)
            job_id = f"job-{uuid.uuid4().hex[:12]}"
            db.execute("INSERT INTO jobs (id, content_hash, task_id, family, base_model, bundle, state, max_attempts, "
                       "created, updated) VALUES (?, ?, ?, ?, ?, ?, 'queued', ?, ?, ?)",
                       (job_id, content_hash, task_id, family, base_model, str(bundle), self.max_attempts, now, now))
            return self._job(db.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone())

    # --- workers ---------------------------------------------------------------------------
    def lease(self, owner: str) -> Job | None:
        """Take the oldest queued job (expired leases are recovered first); counts an attempt."""
        now = self.clock()
        with self.store.tx() as db:
            self._recover(db, now)
            row = db.execute("SELECT * FROM jobs WHERE state = 'queued' ORDER BY created LIMIT 1").fetchone()
            if row is None:
                return None
            db.execute("UPDATE jobs SET state = 'leased', owner = ?, lease_expires = ?, lease_boot = ?, "
                       "attempts = attempts + 1, updated = ? WHERE id = ?",
                       (owner, now + self.lease_seconds, boot_id(), time.time(), row["id"]))
            return self._job(db.execute("SELECT * FROM jobs WHERE id = ?", (row["id"],)).fetchone())

    def _holder(self, db, job_id: str, owner: str) -> sqlite3.Row | None:
        return db.execute("SELECT * FROM jobs WHERE id = ? AND owner = ? AND state IN ('leased', 'running')",
                          (job_id, owner)).fetchone()

    def start(self, job_id: str, owner: str) -> bool:
        """Mark a leased job running (its holder has placed it); False if `owner` lost it."""
        now = self.clock()
        with self.store.tx() as db:
            if self._holder(db, job_id, owner) is None:
                return False
            db.execute("UPDATE jobs SET state = 'running', lease_expires = ?, lease_boot = ?, updated = ? WHERE id = ?",
                       (now + self.lease_seconds, boot_id(), time.time(), job_id))
            return True

    def heartbeat(self, job_id: str, owner: str) -> bool:
        """Extend the lease; False means it was lost (expired and given to someone else)."""
        now = self.clock()
        with self.store.tx() as db:
            if self._holder(db, job_id, owner) is None:
                return False
            db.execute("UPDATE jobs SET lease_expires = ?, lease_boot = ?, updated = ? WHERE id = ?",
                       (now + self.lease_seconds, boot_id(), time.time(), job_id))
            return True

    def complete(self, job_id: str, owner: str, result: RunResult) -> bool:
        """Record a successful attempt's result. Idempotent: completing a done job again
        changes nothing. False if `owner` no longer holds the job."""
        with self.store.tx() as db:
            row = db.execute("SELECT state FROM jobs WHERE id = ?", (job_id,)).fetchone()
            if row is not None and row["state"] == "done":
                return True
            held = self._holder(db, job_id, owner)
            if held is None:
                return False
            self._end(db, held, "done", result)
            return True

    def fail(self, job_id: str, owner: str, result: RunResult) -> bool:
        """End this attempt with a failed `result`: back to the queue while attempts remain and
        the failure is `transient`, else failed for good. False if `owner` no longer holds it."""
        with self.store.tx() as db:
            row = self._holder(db, job_id, owner)
            if row is None:
                return False
            final = not result.transient or row["attempts"] >= row["max_attempts"]
            self._end(db, row, "failed" if final else "queued", result)
            return True

    def adopt(self, job_id: str, owner: str) -> Job | None:
        """Take over a job that is still running somewhere after its holder died (a restarted
        dispatcher re-attaching to a pod's job): it becomes `owner`'s, running, with a fresh lease
        and no new attempt. None if the job has ended meanwhile."""
        now = self.clock()
        with self.store.tx() as db:
            row = db.execute("SELECT state FROM jobs WHERE id = ?", (job_id,)).fetchone()
            if row is None or row["state"] not in ("queued", "leased", "running"):
                return None
            db.execute("UPDATE jobs SET state = 'running', owner = ?, lease_expires = ?, lease_boot = ?, updated = ? "
                       "WHERE id = ?", (owner, now + self.lease_seconds, boot_id(), time.time(), job_id))
            return self._job(db.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone())

    def cancel(self, job_id: str) -> bool:
        """Stop a job that has not ended: it fails with reason "cancelled" and its holder's next
        heartbeat returns False. Idempotent; a finished job is left as it is."""
        with self.store.tx() as db:
            row = db.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
            if row is None or row["state"] not in ACTIVE:
                return False
            self._end(db, row, "failed", RunResult.failed(FailureReason.CANCELLED, base_model=row["base_model"]))
            return True

    # --- recovery and inspection -------------------------------------------------------------
    def _recover(self, db, now: float) -> int:
        expired = db.execute("SELECT * FROM jobs WHERE state IN ('leased', 'running') AND "
                             "(lease_expires < ? OR lease_boot IS NOT ?)", (now, boot_id())).fetchall()
        for row in expired:
            lost = RunResult.failed(FailureReason.LEASE_LOST, f"worker {row['owner']} stopped heartbeating",
                                    base_model=row["base_model"])
            self._end(db, row, "failed" if row["attempts"] >= row["max_attempts"] else "queued", lost)
        return len(expired)

    def recover(self) -> int:
        """Return jobs whose lease expired to the queue (or fail them at max attempts)."""
        with self.store.tx() as db:
            return self._recover(db, self.clock())

    def get(self, job_id: str) -> Job | None:
        """The job with this id, or None."""
        with self.store.tx() as db:
            return self._job(db.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone())

    def jobs(self, state: State | None = None) -> list[Job]:
        """Every job (in `state`, if given), oldest first."""
        with self.store.tx() as db:
            query = "SELECT * FROM jobs" + (" WHERE state = ?" if state else "") + " ORDER BY created"
            return [self._job(r) for r in db.execute(query, (state,) if state else ())]

    def has_queued(self) -> bool:
        """Whether any job waits for a worker."""
        with self.store.tx() as db:
            return db.execute("SELECT 1 FROM jobs WHERE state = 'queued' LIMIT 1").fetchone() is not None

    def has_active(self) -> bool:
        """Whether any job is queued, leased or running (a dead worker's lease included, until it
        expires and the job is queued again): what `worker --once` waits out before it exits."""
        with self.store.tx() as db:
            return db.execute("SELECT 1 FROM jobs WHERE state IN ('queued', 'leased', 'running') LIMIT 1").fetchone() is not None

    def counts(self) -> dict[str, int]:
        """How many jobs are in each state."""
        with self.store.tx() as db:
            return {r["state"]: r["n"] for r in db.execute("SELECT state, COUNT(*) AS n FROM jobs GROUP BY state")}
