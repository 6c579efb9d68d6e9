"""The pod backend's fixture: a fake Runpod (one world, spoken to through its REST v2 or GraphQL
API) whose pods run the real pod service (with the fake trainer and scorer) on 127.0.0.1."""

import base64
import json
import socket
import sys
import threading
import time
import pytest
import uvicorn
from tests.fakes.runpod_api import FakeRunpod, World
from tests.fakes.runpod_rest_api import FakeRunpodRest
from tests.fakes.gpu_host import FAKE_SCORE, FAKE_TRAIN
from trainergym.backends.runpod import PodBackend
from trainergym.host.pod_service import create_app
from trainergym.infra.costs import Ledger
from trainergym.infra.pool import PodPool, PoolConfig, Rung
from trainergym.host.runner import Commands
from trainergym.infra.runpod_graphql import RunpodProvider
from trainergym.infra.runpod_rest import RunpodRestProvider

APIS = ("rest", "graphql")  # parametrize `fleet_api` over these to run a test against both


@pytest.fixture
def fleet_api(request) -> str:
    """Which API of the fake the `fleet` speaks: GraphQL unless the test parametrizes it (the soak's
    forked dispatchers speak GraphQL)."""
    return getattr(request, "param", "graphql")


@pytest.fixture
def fleet(monkeypatch, tmp_path, fleet_api):
    (tmp_path / "train.py").write_text(FAKE_TRAIN)
    (tmp_path / "score.py").write_text(FAKE_SCORE)
    commands = Commands(setup=["true"], train=[sys.executable, str(tmp_path / "train.py"), "ok", "{run_dir}"],
                        score=[sys.executable, str(tmp_path / "score.py"), "--weights", "{weights}", "--items",
                               "{eval_file}", "--out", "{score_file}", "--mode", "ok", "--log", str(tmp_path / "s.log")])
    servers, world = {}, World(boot_seconds=20)

    def boot(pod):  # the pod's container starts: run the real pod service with the pod's token, on the GPUs it holds
        env = dict(e.split("=", 1) for e in pod["env"])
        token = json.loads(base64.b64decode(env["TRAINERGYM_ENV_B64"]))["TRAINERGYM_POD_TOKEN"]
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        sock.close()
        app = create_app(tmp_path / "pods" / pod["id"], token, gpu=pod["gpuType"], gpu_count=pod["gpuCount"], commands=commands,
                         confinement="none")
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
    graphql = FakeRunpod(world)  # also for the soak's forked dispatchers, which speak GraphQL
    monkeypatch.setenv("RUNPOD_API_BASE_URL", graphql.url)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("TRAINERGYM_ALLOW_UNCONFINED", "1")  # the fake trainer runs under sys.executable

    def virtual_sleep(seconds):  # at least one virtual second a step, so boots and timeouts pass quickly
        world.now += max(seconds, 1.0)
        world.tick()
        time.sleep(0.02)

    rest = None
    if fleet_api == "rest":
        rest = FakeRunpodRest(world)
        provider = RunpodRestProvider(api_key="test-key", base_url=rest.url, proxy_url="http://{ip}:{public_port}",
                                      sleep=virtual_sleep)
    else:
        provider = RunpodProvider(api_key="test-key", proxy_url="http://{ip}:{public_port}")
    pool = PodPool(provider, tmp_path / "state.db", PoolConfig(max_pods=2, ladder=(Rung("NVIDIA RTX A5000"), Rung("NVIDIA A40")),
                                                                  boot_timeout=60, poll_seconds=10, idle_seconds=300),
                   clock=lambda: world.now, sleep=virtual_sleep, ledger=Ledger(tmp_path / "ledger.db"))
    backend = PodBackend(tmp_path / "work", pool, poll_seconds=0.05, sleep=virtual_sleep, dead_after=3)
    yield world, backend
    for server in list(servers.values()):
        server.should_exit = True
    graphql.close()
    if rest is not None:
        provider.close()
        rest.close()
