"""The pod backend end to end offline: a fake Runpod API whose pods run the real pod service
(with fake train and score executables) on 127.0.0.1."""

import asyncio

import pytest

from tests.fakes.jobs import bundles


def test_jobs_drain_through_the_pool(fleet, tmp_path, task, reference_files):
    world, backend = fleet
    world.stock["NVIDIA RTX A5000"] = 2  # room for one 2-GPU pod; the second comes from the next rung
    handles = [asyncio.run(backend.submit(b, task)) for b in bundles(tmp_path, task, reference_files, 3)]
    backend.drain(once=True, idle_poll=0.05)
    results = [asyncio.run(backend.result(h, timeout=5)) for h in handles]
    assert [r.status for r in results] == ["succeeded"] * 3, [r.failure_reason for r in results]
    assert all(r.post == 0.75 and r.eval_n == 200 and r.source == "measured" for r in results)
    assert {r.gpu for r in results} <= {"NVIDIA RTX A5000", "NVIDIA A40"}
    assert len([c for c in world.calls if c[0] == "create" and "A40" not in c[1]["gpuTypeId"]]) >= 1
    assert world.running() == [] and backend.pool.live == []  # nothing left billing
    # the ledger charges from before create to after a verified terminate: never less than billed
    assert world.billed() - 1e-9 <= backend.pool.billed_usd() <= world.billed() * 1.01


def test_a_pod_dying_mid_job_requeues_it(fleet, tmp_path, task, reference_files):
    world, backend = fleet
    original = world.create

    def create_and_doom(info, input):  # the first pod dies soon after booting
        out = original(info, input)
        if len(world.pods) == 1:
            world.die_after[out["id"]] = 1
        return out

    world.create = create_and_doom
    (handle,) = [asyncio.run(backend.submit(b, task)) for b in bundles(tmp_path, task, reference_files, 1)]
    backend.drain(once=True, idle_poll=0.05)
    result = asyncio.run(backend.result(handle, timeout=5))
    assert result.status == "succeeded" and result.details["attempts"] == 2
    assert world.running() == []


@pytest.mark.parametrize("fault", ["never_boot", "http_errors", "opaque_create", "orphan_create", "terminate_noop",
                                   "out_of_stock"])
def test_faults_end_with_every_job_done_once_and_nothing_billing(fleet, tmp_path, task, reference_files, fault):
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
    elif fault == "out_of_stock":
        world.stock["NVIDIA RTX A5000"] = 0
    handles = [asyncio.run(backend.submit(b, task)) for b in bundles(tmp_path, task, reference_files, 2)]
    backend.drain(once=True, idle_poll=0.05)
    results = [asyncio.run(backend.result(h, timeout=5)) for h in handles]
    assert [r.status for r in results] == ["succeeded", "succeeded"], [r.failure_reason for r in results]
    assert world.running() == [] and backend.pool.live == []
