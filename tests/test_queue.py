"""The durable queue: states, leases, attempts, dedupe, idempotence, crash recovery."""

import multiprocessing
import os
import signal
import time

import pytest

from trainergym.backends.fleet import Clock
from trainergym.infra.queue import JobQueue


@pytest.fixture
def q(tmp_path):
    clock = Clock(1000.0)
    queue = JobQueue(tmp_path / "jobs.db", lease_seconds=60, max_attempts=2, clock=clock)
    queue.clock_ = clock
    return queue


def test_happy_path_and_dedupe(q):
    job = q.enqueue("h1", "calc_chain", "/b/1")
    assert q.enqueue("h1", "calc_chain", "/b/1").id == job.id  # same bundle, same job
    leased = q.lease("w1")
    assert leased.id == job.id and leased.state == "leased" and leased.attempts == 1
    assert q.lease("w2") is None
    assert q.start(job.id, "w1") and q.heartbeat(job.id, "w1")
    assert q.complete(job.id, "w1", {"post": 0.8})
    assert q.complete(job.id, "w1", {"post": 0.8})  # idempotent
    done = q.get(job.id)
    assert done.state == "done" and done.result == {"post": 0.8}
    assert q.enqueue("h1", "calc_chain", "/b/1").id == job.id  # a done bundle is reused, not rerun


def test_only_the_lease_holder_acts(q):
    job = q.enqueue("h", "t", "/b")
    q.lease("w1")
    assert not q.complete(job.id, "intruder", {}) and not q.fail(job.id, "intruder", "x")
    assert not q.heartbeat(job.id, "intruder")


def test_expired_lease_requeues_counts_the_attempt_then_fails(q):
    job = q.enqueue("h", "t", "/b")
    q.lease("w1")
    q.clock_.now += 61
    assert q.recover() == 1 and q.get(job.id).state == "queued"
    assert not q.complete(job.id, "w1", {"late": True})  # the lost worker's late answer is refused
    again = q.lease("w2")
    assert again.attempts == 2
    q.clock_.now += 61
    q.recover()
    failed = q.get(job.id)
    assert failed.state == "failed" and "lease lost" in failed.failure_reason
    assert q.enqueue("h", "t", "/b").id != job.id  # a failed bundle may be queued afresh


def test_fail_retries_until_max_attempts(q):
    job = q.enqueue("h", "t", "/b")
    q.lease("w")
    q.fail(job.id, "w", "out of memory")
    assert q.get(job.id).state == "queued"
    q.lease("w")
    q.fail(job.id, "w", "out of memory")
    assert q.get(job.id).state == "failed" and q.get(job.id).failure_reason == "out of memory"
    other = q.enqueue("h2", "t", "/b2")
    q.lease("w")
    q.fail(other.id, "w", "install failed", retry=False)
    assert q.get(other.id).state == "failed"


def _lease_all(path, owner, out):
    q = JobQueue(path, lease_seconds=600)
    while (job := q.lease(owner)) is not None:
        q.complete(job.id, owner, {"by": owner})
        out.put(job.id)


def test_concurrent_workers_never_share_a_job(tmp_path):
    path = tmp_path / "jobs.db"
    q = JobQueue(path)
    ids = {q.enqueue(f"h{i}", "t", f"/b{i}").id for i in range(60)}
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
    job = q.enqueue("h", "t", "/b")
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
    assert restarted.complete(job.id, "survivor", {"ok": True}) and restarted.get(job.id).state == "done"
