"""The pod backend end to end offline: a fake Runpod API whose pods run the real pod service
(with fake train and score executables) on 127.0.0.1."""

import asyncio
import base64
import json
import socket
import sys
import threading
import time

import pytest
import uvicorn

from conftest import write_job
from fake_runpod import FakeRunpod, World
from test_runner import FAKE_SCORE, FAKE_TRAIN
from trainergym.backends.runpod import PodBackend
from trainergym.job.bundle import build_bundle, parse_job
from trainergym.host.pod_service import create_app
from trainergym.infra.pool import PodPool, PoolConfig, Rung
from trainergym.host.runner import Commands
from trainergym.infra.runpod_graphql import RunpodProvider


@pytest.fixture
def fleet(monkeypatch, tmp_path):
    (tmp_path / "train.py").write_text(FAKE_TRAIN)
    (tmp_path / "score.py").write_text(FAKE_SCORE)
    commands = Commands(setup=["true"], train=[sys.executable, str(tmp_path / "train.py"), "ok"],
                        score=[sys.executable, str(tmp_path / "score.py"), "--weights", "{weights}", "--items",
                               "{eval_file}", "--out", "{score_file}", "--mode", "ok", "--log", str(tmp_path / "s.log")])
    servers, world = {}, World(boot_seconds=20)

    def boot(pod):  # the pod's container starts: run the real pod service with the pod's token
        env = dict(e.split("=", 1) for e in pod["env"])
        token = json.loads(base64.b64decode(env["TRAINERGYM_ENV_B64"]))["TRAINERGYM_POD_TOKEN"]
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        sock.close()
        app = create_app(tmp_path / "pods" / pod["id"], token, gpu=pod["gpuType"], gpu_count=pod["gpuCount"], commands=commands)
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
        threading.Thread(target=server.run, daemon=True).start()
        while not server.started:
            time.sleep(0.02)
        servers[pod["id"]] = server
        return "127.0.0.1", port

    def death(pod):
        server = servers.pop(pod["id"], None)
        if server is not None:
            server.should_exit = True

    world.on_boot, world.on_death = boot, death
    fake = FakeRunpod(world)
    monkeypatch.setenv("RUNPOD_API_BASE_URL", fake.url)
    monkeypatch.setenv("HOME", str(tmp_path))

    def virtual_sleep(seconds):  # at least one virtual second a step, so boots and timeouts pass quickly
        world.now += max(seconds, 1.0)
        world.tick()
        time.sleep(0.02)

    provider = RunpodProvider(api_key="test-key", proxy_url="http://{ip}:{public_port}")
    pool = PodPool(provider, tmp_path / "state.db", PoolConfig(max_pods=2, ladder=(Rung("NVIDIA RTX A5000"), Rung("NVIDIA A40")),
                                                                  boot_timeout=60, poll_seconds=10, idle_seconds=300),
                   clock=lambda: world.now, sleep=virtual_sleep)
    backend = PodBackend(tmp_path / "work", pool, poll_seconds=0.05, sleep=virtual_sleep, dead_after=3)
    yield world, backend
    for server in servers.values():
        server.should_exit = True
    fake.close()


def bundles(tmp_path, task, reference_files, n):
    out = []
    for i in range(n):
        files = {**reference_files, "job.toml": reference_files["job.toml"].replace('notes = """', f'notes = """variant {i} ')}
        write_job(tmp_path / f"ws{i}", files)
        job, _ = parse_job(files["job.toml"])
        out.append(build_bundle(tmp_path / f"ws{i}", tmp_path / f"b{i}", job, task))
    return out


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
    assert all(r.status == "succeeded" or r.failure_reason for r in results)
    assert [r.status for r in results] == ["succeeded", "succeeded"], [r.failure_reason for r in results]
    assert world.running() == [] and backend.pool.live == []
