"""A dispatcher that dies mid-run is replaced by one that re-attaches to the pods' running jobs
(simulated fleet, virtual clock): no job re-runs, no attempt is spent, nothing is billed unseen."""


import pytest

from trainergym.backends.runpod import PodBackend
from trainergym.backends.fleet import Clock, SimConfig, SimPod, SimProvider
from trainergym.infra.pool import PodPool, PoolConfig
from trainergym.infra.queue import JobQueue

MODEL = "Qwen/Qwen3-1.7B"


def plan(bundle_dir: str) -> dict:
    return {"train_seconds": 3600.0, "eval_seconds": 120.0,
            "result": {"status": "succeeded", "pre": 0.5, "post": 0.6, "source": "surrogate", "train_seconds": 3600.0}}


@pytest.fixture
def fleet(tmp_path):
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    clock = Clock()
    provider = SimProvider(clock, SimConfig())

    def dispatcher() -> PodBackend:  # a fresh process's view: everything rebuilt from the databases
        pool = PodPool(provider, tmp_path / "pods.db", PoolConfig(max_pods=3, idle_seconds=600), clock=clock, sleep=clock.sleep)
        queue = JobQueue(tmp_path / "jobs.db", lease_seconds=600)
        return PodBackend(tmp_path, pool, queue=queue, poll_seconds=30, sleep=clock.sleep,
                          client_factory=SimPod.factory(provider, plan))

    return clock, provider, bundle, dispatcher


def test_a_restarted_dispatcher_reattaches_to_running_jobs(fleet):
    clock, provider, bundle, dispatcher = fleet
    first = dispatcher()
    ids = [first.queue.enqueue(f"h{i}", "calc_chain", bundle, family="calc_chain", base_model=MODEL).id for i in range(3)]
    first.start()
    while not all(d.remote_id for d in first.active.values()) or len(first.active) < 3:
        first.tick()
        clock.sleep(30)
    clock.sleep(600)  # the first dispatcher is dead (SIGKILL: nothing cleaned up); its leases lapse meanwhile

    second = dispatcher()
    second.start()
    assert len(second.active) == 3 and all(d.remote_id for d in second.active.values())
    second.drain(once=True)
    jobs = [second.queue.get(i) for i in ids]
    assert [j.state for j in jobs] == ["done"] * 3
    assert [j.attempts for j in jobs] == [1, 1, 1]  # re-attached, not re-run
    assert sum(len(s) for s in provider.services.values()) == 3  # each job submitted once
    assert not any(provider._alive(p) for p in provider.pods.values())


def test_a_pod_that_ran_a_finished_job_goes_back_to_the_pool(fleet):
    clock, provider, bundle, dispatcher = fleet
    first = dispatcher()
    job = first.queue.enqueue("h", "calc_chain", bundle, family="calc_chain", base_model=MODEL)
    first.start()
    while not first.active or not next(iter(first.active.values())).remote_id:
        first.tick()
        clock.sleep(30)
    pod = next(iter(first.active.values())).pod
    first.queue.cancel(job.id)  # the job ended while no dispatcher watched it

    second = dispatcher()
    second.start()
    assert not second.active
    assert pod.id not in {p.id for p in second.pool.live}  # its pod was still busy with it: terminated
    assert second.queue.get(job.id).state == "failed"
