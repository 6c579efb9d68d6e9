"""The durable queue: states, leases, attempts, dedupe, idempotence, crash recovery."""

import multiprocessing
import os
import signal
import time

import pytest

from trainergym.backends.fleet import Clock
from trainergym.infra.queue import JobQueue
from trainergym.job.result import FailureReason, RunResult

MODEL = "Qwen/Qwen3-1.7B"


def put(q, content_hash="h", bundle="/b"):
    return q.enqueue(content_hash, "calc_chain", bundle, family="calc_chain", base_model=MODEL)


def ok(post=0.8):
    return RunResult(status="succeeded", pre=0.5, post=post, base_model=MODEL)


@pytest.fixture
def q(tmp_path):
    clock = Clock(1000.0)
    queue = JobQueue(tmp_path / "jobs.db", lease_seconds=60, max_attempts=2, clock=clock)
    queue.clock_ = clock
    return queue


def test_happy_path_and_dedupe(q):
    job = put(q, "h1", "/b/1")
    assert put(q, "h1", "/b/1").id == job.id  # same bundle, same job
    assert (job.family, job.base_model) == ("calc_chain", MODEL)  # what a dispatcher needs to place it
    leased = q.lease("w1")
    assert leased.id == job.id and leased.state == "leased" and leased.attempts == 1
    assert q.lease("w2") is None
    assert q.start(job.id, "w1") and q.heartbeat(job.id, "w1")
    assert q.complete(job.id, "w1", ok())
    assert q.complete(job.id, "w1", ok(0.1))  # idempotent: the first result stays
    done = q.get(job.id)
    assert done.state == "done" and done.result.post == 0.8 and done.result.job_id == job.id
    assert done.result.content_hash == "h1"
    assert put(q, "h1", "/b/1").id == job.id  # a done bundle is reused, not rerun


def test_only_the_lease_holder_acts(q):
    job = put(q)
    q.lease("w1")
    assert not q.complete(job.id, "intruder", ok())
    assert not q.fail(job.id, "intruder", RunResult.failed(FailureReason.TRAINER_CRASHED))
    assert not q.heartbeat(job.id, "intruder")


def test_expired_lease_requeues_counts_the_attempt_then_fails(q):
    job = put(q)
    q.lease("w1")
    q.clock_.now += 61
    assert q.recover() == 1 and q.get(job.id).state == "queued"
    assert not q.complete(job.id, "w1", ok())  # the lost worker's late answer is refused
    again = q.lease("w2")
    assert again.attempts == 2
    q.clock_.now += 61
    q.recover()
    failed = q.get(job.id)
    assert failed.state == "failed" and failed.failure is FailureReason.LEASE_LOST
    assert "w2 stopped heartbeating" in failed.result.failure_reason
    assert put(q).id != job.id  # a failed bundle may be queued afresh


def test_transient_failures_retry_until_max_attempts(q):
    job = put(q)
    q.lease("w")
    q.fail(job.id, "w", RunResult.failed(FailureReason.INSTALL_FAILED, "exit status 1"))
    assert q.get(job.id).state == "queued"  # the host's fault, maybe: another attempt
    q.lease("w")
    q.fail(job.id, "w", RunResult.failed(FailureReason.SETUP_TIMEOUT, "after 1800 s"))
    failed = q.get(job.id)
    assert failed.state == "failed" and failed.failure is FailureReason.SETUP_TIMEOUT and failed.attempts == 2
    assert failed.result.failure_reason == "setup timed out (after 1800 s)"


@pytest.mark.parametrize("reason", [FailureReason.OUT_OF_MEMORY, FailureReason.TRAINER_CRASHED,
                                    FailureReason.JOB_TIMEOUT, FailureReason.PROVIDER_REFUSED])
def test_the_jobs_own_failures_are_final(q, reason):
    job = put(q)
    q.lease("w")
    q.fail(job.id, "w", RunResult.failed(reason, log_tail="boom"))
    failed = q.get(job.id)
    assert failed.state == "failed" and failed.attempts == 1 and failed.failure is reason
    assert failed.result.log_tail == "boom" and not failed.result.transient


def test_cancel_is_typed_and_refuses_the_holders_late_answer(q):
    job = put(q)
    q.lease("w")
    assert q.cancel(job.id) and not q.cancel(job.id)
    cancelled = q.get(job.id)
    assert cancelled.failure is FailureReason.CANCELLED and cancelled.result.status == "cancelled"
    assert not q.heartbeat(job.id, "w") and not q.complete(job.id, "w", ok())


def test_an_older_queue_file_opens_and_gains_the_new_columns(tmp_path):
    import sqlite3

    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    db.executescript("""CREATE TABLE jobs (id TEXT PRIMARY KEY, content_hash TEXT NOT NULL, task_id TEXT NOT NULL,
        bundle TEXT NOT NULL, state TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, max_attempts INTEGER NOT NULL,
        owner TEXT, lease_expires REAL, created REAL NOT NULL, updated REAL NOT NULL, result TEXT, failure_reason TEXT);
        INSERT INTO jobs VALUES ('job-old', 'h', 't', '/b', 'failed', 1, 3, NULL, NULL, 1, 1, NULL, 'trainer crashed (exit status 1)');""")
    db.commit()
    db.close()
    q = JobQueue(path)
    old = q.get("job-old")
    assert old.family == "" and old.failure is FailureReason.RUNNER_ERROR  # free text from before is kept as an error
    assert put(q, "h2").family == "calc_chain"


def _lease_all(path, owner, out):
    q = JobQueue(path, lease_seconds=600)
    while (job := q.lease(owner)) is not None:
        q.complete(job.id, owner, ok())
        out.put(job.id)


def test_concurrent_workers_never_share_a_job(tmp_path):
    path = tmp_path / "jobs.db"
    q = JobQueue(path)
    ids = {put(q, f"h{i}", f"/b{i}").id for i in range(60)}
    out = multiprocessing.Queue()
    procs = [multiprocessing.Process(target=_lease_all, args=(path, f"w{i}", out)) for i in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    got = [out.get() for _ in range(out.qsize())] if hasattr(out, "qsize") else []
    assert sorted(got) == sorted(ids) and len(got) == len(set(got))
    assert q.counts() == {"done": 60}


def _lease_and_hang(path, ready):
    q = JobQueue(path, lease_seconds=1)
    q.lease("doomed")
    ready.set()
    time.sleep(600)


def test_a_killed_worker_loses_no_job(tmp_path):
    path = tmp_path / "jobs.db"
    q = JobQueue(path, lease_seconds=1)
    job = put(q)
    ready = multiprocessing.Event()
    p = multiprocessing.Process(target=_lease_and_hang, args=(path, ready))
    p.start()
    assert ready.wait(30)
    os.kill(p.pid, signal.SIGKILL)
    p.join()
    time.sleep(1.1)
    restarted = JobQueue(path, lease_seconds=60)  # a fresh process after the crash
    again = restarted.lease("survivor")
    assert again.id == job.id and again.attempts == 2
    assert restarted.complete(job.id, "survivor", ok()) and restarted.get(job.id).state == "done"
