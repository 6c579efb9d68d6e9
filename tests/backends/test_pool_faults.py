"""The pool faults an audit found, each replayed on the real dispatcher, pool and queue over a
simulated provider (virtual clock): every job ends done once or failed with a reason, no pod is
left running, and the pool bills what the provider billed. The same faults run against the fake
REST v2 and GraphQL APIs in tests/backends/test_runpod.py."""

import time

import pytest

from trainergym.backends.fleet import Clock, SimConfig, SimPod, SimProvider
from trainergym.backends.runpod import PodBackend
from trainergym.infra.costs import Ledger
from trainergym.infra.pool import PodPool, PoolConfig, Rung
from trainergym.infra.queue import JobQueue

MODEL = "Qwen/Qwen3-1.7B"
LADDER = (Rung("NVIDIA RTX A5000"), Rung("NVIDIA A40"), Rung("NVIDIA GeForce RTX 4090"), Rung("NVIDIA RTX A6000"))


def plan(bundle_dir: str) -> dict:
    return {"train_seconds": 1800.0, "eval_seconds": 120.0,
            "result": {"status": "succeeded", "pre": 0.5, "post": 0.6, "source": "surrogate", "train_seconds": 1800.0}}


def fleet(tmp_path, jobs: int = 1, ladder=LADDER, **sim) -> tuple[Clock, SimProvider, PodBackend]:
    clock = Clock()
    provider = SimProvider(clock, SimConfig(**{"boot_jitter": 0.0, **sim}))
    pool = PodPool(provider, tmp_path / "pods.db", PoolConfig(max_pods=4, ladder=ladder, idle_seconds=600, poll_seconds=5),
                   clock=clock, sleep=clock.sleep, ledger=Ledger(tmp_path / "ledger.db"))
    backend = PodBackend(tmp_path, pool, queue=JobQueue(tmp_path / "jobs.db", lease_seconds=600), poll_seconds=30,
                         sleep=clock.sleep, client_factory=SimPod.factory(provider, plan))
    for i in range(jobs):
        backend.queue.enqueue(f"h{i}", "calc_chain", tmp_path, family="calc_chain", base_model=MODEL)
    return clock, provider, backend


def settled(provider: SimProvider, backend: PodBackend) -> None:
    """The checks every fault must pass once the queue is drained."""
    for job in backend.queue.jobs():
        assert job.state == "done" and job.attempts == 1 or job.state == "failed" and job.result.failure_detail, job
    assert provider.running() == 0 and backend.pool.live == []
    assert backend.pool.billed_usd() == pytest.approx(provider.billed_usd(), rel=0.01) and provider.billed_usd() > 0


def test_a_pod_listed_only_seconds_after_its_create_is_waited_for(tmp_path):
    # Once killed at the first "not found": all four rungs burned in 20 virtual seconds, 13 pods per job.
    clock, provider, backend = fleet(tmp_path, jobs=2, list_lag=20.0)
    backend.drain(once=True)
    assert [j.state for j in backend.queue.jobs()] == ["done", "done"]
    assert provider.creates == 2  # one pod per job, on the first rung
    settled(provider, backend)


def test_a_pod_never_listed_counts_as_gone_after_the_grace_and_the_next_rung_is_tried(tmp_path):
    clock, provider, backend = fleet(tmp_path, list_lag=10_000.0, ladder=LADDER[:2])
    backend.drain(once=True)
    (job,) = backend.queue.jobs()
    assert job.state == "failed" and "not listed by the provider 60 s after its create" in job.result.failure_detail
    assert provider.creates == 2 * job.attempts and provider.running() == 0  # each attempt: one pod per rung


def test_a_pod_whose_rate_was_never_reported_bills_the_list_price(tmp_path):
    # Pods that never boot never report a rate: once billed as $0.
    clock, provider, backend = fleet(tmp_path, ladder=LADDER[:1], rate_unknown=True, never_boot_rate=1.0)
    backend.drain(once=True)
    (job,) = backend.queue.jobs()
    assert job.state == "failed" and "did not boot within 900 s" in job.result.failure_detail
    settled(provider, backend)
    assert {r["source"] for r in backend.pool.ledger.rows()} == {"list price"}


def test_no_pod_is_created_for_a_job_that_has_failed(tmp_path):
    # The dispatcher once asked the pool again before reading the failure: a fresh pod, busy for
    # the dead job, billed for hours with an empty queue.
    clock, provider, backend = fleet(tmp_path, ladder=LADDER[:2], never_boot_rate=1.0)
    backend.drain(once=True)
    (job,) = backend.queue.jobs()
    assert job.state == "failed" and job.attempts == 3  # no pod is a transient failure: retried
    assert provider.creates == 2 * job.attempts  # one pod per rung and attempt, none for a failed attempt
    settled(provider, backend)


def test_a_busy_pod_no_dispatcher_holds_goes_back_to_the_pool_and_is_reaped(tmp_path):
    clock, provider, backend = fleet(tmp_path, jobs=0)
    pool = backend.pool
    assert pool.request("ghost") is None  # a job that is not in the queue, nor active here
    while not any(p.state == "busy" for p in pool.live):
        clock.sleep(30)
        pool.tick()
    backend.tick()
    assert [p.state for p in pool.live] == ["idle"]
    clock.sleep(601)
    backend.tick()
    assert pool.live == [] and provider.running() == 0


def test_the_gpu_actually_given_is_named_everywhere(tmp_path):
    clock, provider, backend = fleet(tmp_path, substitute={"NVIDIA RTX A5000": "NVIDIA RTX A6000"})
    backend.drain(once=True)
    (job,) = backend.queue.jobs()
    assert (job.result.gpu, job.result.gpu_count) == ("NVIDIA RTX A6000", 2)
    (row,) = backend.pool.ledger.rows()
    assert "2x NVIDIA RTX A6000, asked 2x NVIDIA RTX A5000" in row["note"] and row["source"] == "billed rate"
    settled(provider, backend)


def test_the_pods_env_names_no_gpu(tmp_path):
    seen = []
    clock, provider, backend = fleet(tmp_path)
    original = provider.create
    provider.create = lambda name, rung, env: seen.append(env) or original(name, rung, env)
    backend.drain(once=True)
    assert seen and not any(k.startswith("TRAINERGYM_GPU") for env in seen for k in env)


def test_durations_are_monotonic_when_the_wall_clock_jumps_back(tmp_path, monkeypatch):
    # Once on the wall clock: a jump back an hour stopped idle reaping and billed 3,665 s as $0.
    sim = Clock()
    provider = SimProvider(sim, SimConfig(boot_seconds=10, boot_jitter=0.0))
    pool = PodPool(provider, tmp_path / "pods.db", PoolConfig(ladder=LADDER[:1], idle_seconds=0.3, poll_seconds=0.01))
    assert pool.clock is time.monotonic
    pool.request("j")
    sim.sleep(10)
    pool.tick()
    (pod,) = pool.live
    pool.release(pod)
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() - 3600)
    time.sleep(0.35)
    assert pool.reap() == 1
    (row,) = [r for r in pool.store.tx().__enter__().execute("SELECT seconds, usd FROM costs")]
    assert 0.3 < row["seconds"] < 30 and row["usd"] > 0


def test_a_restarted_pool_keeps_its_pods_ages(tmp_path):
    sim = Clock()
    provider = SimProvider(sim, SimConfig(boot_seconds=10, boot_jitter=0.0))
    first = PodPool(provider, tmp_path / "pods.db", PoolConfig(ladder=LADDER[:1]))
    first.request("j")
    time.sleep(0.2)
    second = PodPool(provider, tmp_path / "pods.db", PoolConfig(ladder=LADDER[:1]))  # another process's view
    (pod,) = second.live
    assert 0.2 <= second.clock() - pod.started < 5


def test_an_interrupted_worker_stops_renting_what_serves_no_job(tmp_path):
    clock, provider, backend = fleet(tmp_path, jobs=0)
    pool = backend.pool
    pool.request("a"), pool.request("b")
    while sum(p.state == "busy" for p in pool.live) < 2:
        clock.sleep(30)
        pool.tick()
    pool.release(next(p for p in pool.live if p.job_id == "b"))
    pool.shutdown(keep_busy=True)  # what `trainergym worker` does on Ctrl-C
    assert [(p.state, p.job_id) for p in pool.live] == [("busy", "a")] and provider.running() == 1
