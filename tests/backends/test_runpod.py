"""The pod backend end to end offline, against the fake Runpod's REST v2 API and its GraphQL API
(one world, the same faults): its pods run the real pod service (with fake train and score
executables) on 127.0.0.1. Whatever the fault, every job ends completed exactly once or failed
with a stated reason, no pod the pool's database does not know is left running, and the pool
bills within 1% of what the provider billed."""

import asyncio

import pytest

from tests.backends.conftest import APIS
from tests.fakes.jobs import bundles

pytestmark = pytest.mark.parametrize("fleet_api", APIS, indirect=True)


def asked(call: tuple[str, dict]) -> str:
    """The GPU type a create call asked for, in either API's words."""
    return call[1].get("gpuTypeId") or call[1]["gpu"]["id"]


def settled(world, backend, tmp_path, results) -> None:
    """The checks every fault must pass once the queue is drained."""
    for r in results:
        assert r.status == "succeeded" or (r.status == "failed" and r.failure_reason), r
    jobs = backend.queue.jobs()
    assert all(j.state == "done" and j.attempts == 1 or j.state == "failed" and j.result.failure_detail for j in jobs)
    ran = list((tmp_path / "pods").glob("*/pod-*"))  # each job the pods' services took (pods/<pod id>/pod-<job>)
    assert len(ran) <= sum(j.attempts for j in jobs)  # none submitted twice in one attempt
    with backend.pool.store.tx() as db:
        known = {row["name"] for row in db.execute("SELECT name FROM pods")}
    assert [p["name"] for p in world.running() if p["name"] not in known] == []  # nothing billing unseen
    assert world.running() == [] and backend.pool.live == []  # and nothing billing at all
    assert world.billed() > 0 and backend.pool.billed_usd() == pytest.approx(world.billed(), rel=0.01)


def run(backend, tmp_path, task, reference_files, n: int):
    handles = [asyncio.run(backend.submit(b, task)) for b in bundles(tmp_path, task, reference_files, n)]
    backend.drain(once=True, idle_poll=0.05)
    return [asyncio.run(backend.result(h, timeout=5)) for h in handles]


def test_jobs_drain_through_the_pool(fleet, tmp_path, task, reference_files):
    world, backend = fleet
    world.stock["NVIDIA RTX A5000"] = 2  # room for one 2-GPU pod; the second comes from the next rung
    results = run(backend, tmp_path, task, reference_files, 3)
    assert [r.status for r in results] == ["succeeded"] * 3, [r.failure_reason for r in results]
    assert all(r.post == 0.75 and r.eval_n == 200 and r.source == "measured" for r in results)
    assert {r.gpu for r in results} <= {"NVIDIA RTX A5000", "NVIDIA A40"}
    assert len([c for c in world.calls if c[0] == "create" and "A40" not in asked(c)]) >= 1
    # the ledger charges from before create to after a verified terminate: never less than billed
    assert world.billed() - 1e-9 <= backend.pool.billed_usd() <= world.billed() * 1.01
    settled(world, backend, tmp_path, results)


def test_a_pod_dying_mid_job_requeues_it(fleet, tmp_path, task, reference_files):
    world, backend = fleet
    original = world.create_pod

    def create_and_doom(*args, **kwargs):  # the first pod dies soon after booting
        pod = original(*args, **kwargs)
        if len(world.pods) == 1:
            world.die_after[pod["id"]] = 1
        return pod

    world.create_pod = create_and_doom
    (result,) = run(backend, tmp_path, task, reference_files, 1)
    assert result.status == "succeeded" and result.details["attempts"] == 2
    assert world.running() == [] and backend.pool.live == []


FAULTS = ["never_boot", "http_errors", "opaque_create", "orphan_create", "terminate_noop", "out_of_stock",
          "stale_catalog", "throttled", "list_lag", "rate_unknown", "substitute"]


@pytest.mark.slow
@pytest.mark.parametrize("fault", FAULTS)
def test_faults_end_with_every_job_done_once_and_nothing_billing(fleet, fleet_api, tmp_path, task, reference_files, fault):
    world, backend = fleet
    if fault == "never_boot":
        world.never_boot = {"NVIDIA RTX A5000"}
    elif fault == "http_errors":
        world.http_fail_next = [(429, b"<html>Too Many Requests</html>"), (502, b""), (500, b'{"message": "x"}')]
    elif fault == "opaque_create":
        world.opaque_next = 1
    elif fault == "orphan_create":
        world.create_then_error = 1
    elif fault == "terminate_noop":
        world.terminate_noop = 1
    elif fault == "out_of_stock":  # the catalog shows it: no create on that rung
        world.stock["NVIDIA RTX A5000"] = 0
    elif fault == "stale_catalog":  # the catalog shows stock it does not have: the create finds out
        world.stock["NVIDIA RTX A5000"], world.catalog_blind = 0, True
    elif fault == "throttled":  # 429s with Retry-After, more than the REST provider waits out in one call
        world.throttle_next, world.retry_after = 6, 1
    elif fault == "list_lag":  # once killed at the first "not found": every rung burned, the job failed
        world.list_lag = 20.0
    elif fault == "rate_unknown":
        world.rate_unknown = True
    elif fault == "substitute":
        world.substitute = {"NVIDIA RTX A5000": "NVIDIA RTX A6000"}
    results = run(backend, tmp_path, task, reference_files, 2)
    assert [r.status for r in results] == ["succeeded", "succeeded"], [r.failure_reason for r in results]
    settled(world, backend, tmp_path, results)
    creates = [asked(c) for c in world.calls if c[0] == "create"]
    if fault == "out_of_stock":
        assert "NVIDIA RTX A5000" not in creates  # skipped on the catalog's word
    if fault == "stale_catalog":
        assert "NVIDIA RTX A5000" in creates and {r.gpu for r in results} == {"NVIDIA A40"}
    if fault == "list_lag":
        assert len(creates) == 2  # one pod per job, each waited for
    if fault == "substitute":
        assert {(r.gpu, r.gpu_count) for r in results} == {("NVIDIA RTX A6000", 2)}
        notes = [row["note"] for row in backend.pool.ledger.rows()]
        assert notes and all("2x NVIDIA RTX A6000, asked 2x NVIDIA RTX A5000" in n for n in notes), notes
