"""A pod's boot path end to end: the provider creates the pod through the fake Runpod API; we then
do what the pod does with what the API received (run `dockerArgs` with the pod's env), and
drive the service that comes up with the pool's token."""

import base64
import json
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from tests.fakes.jobs import write_job
from tests.fakes.runpod_api import FakeRunpod, World
from tests.fakes.gpu_host import wait_for
from tests.fakes.gpu_host import FAKE_SCORE, FAKE_TRAIN

from trainergym.job.bundle import build_bundle, parse_job
from trainergym.host.pod_service import PodClient
from trainergym.infra.pool import Rung
from trainergym.infra.runpod_graphql import DOCKER_ARGS, POD_BOOTSTRAP, RunpodProvider
from trainergym.job.stack import pod_install


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def booted(tmp_path, monkeypatch):
    world = World(boot_seconds=0)
    fake = FakeRunpod(world)
    monkeypatch.setenv("RUNPOD_API_BASE_URL", fake.url)
    (tmp_path / "train.py").write_text(FAKE_TRAIN)
    (tmp_path / "score.py").write_text(FAKE_SCORE)
    commands = {"setup": ["true"], "train": [sys.executable, str(tmp_path / "train.py"), "ok", "{run_dir}"],
                "score": [sys.executable, str(tmp_path / "score.py"), "--weights", "{weights}", "--items", "{eval_file}",
                          "--out", "{score_file}", "--mode", "ok", "--log", str(tmp_path / "s.log")]}
    port = _port()
    cli = Path(sys.executable).parent / "trainergym"
    boot = f"exec {cli} pod-serve --host 127.0.0.1 --port {port} --workdir {tmp_path / 'pod'}\n"
    provider = RunpodProvider(api_key="test-key", proxy_url="http://{ip}:{public_port}", bootstrap=boot)
    # As the pool sends them (TRAINERGYM_GPU_COUNT: no nvidia-smi here to count them).
    pod_id = provider.create("tg-boot", Rung("NVIDIA A40"), {"TRAINERGYM_POD_TOKEN": "tok-123", "TRAINERGYM_GPU": "NVIDIA A40",
                                                               "TRAINERGYM_GPU_COUNT": "2",
                                                               "TRAINERGYM_POD_COMMANDS": json.dumps(commands)})
    sent = next(c[1] for c in world.calls if c[0] == "create")
    env = {e["key"]: e["value"] for e in sent["env"]}
    # The fake trainer runs under sys.executable, which a trainer's own uid may not reach: unconfined.
    unconfined = {"TRAINERGYM_TRAINER_CONFINEMENT": "none", "TRAINERGYM_ALLOW_UNCONFINED": "1"}
    proc = subprocess.Popen(shlex.split(sent["dockerArgs"]), env={"PATH": "/usr/bin:/bin", **unconfined, **env},
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 401:
                break
        except httpx.HTTPError:
            time.sleep(0.2)
    yield url, "tok-123", pod_id, sent
    proc.kill()
    proc.wait()
    fake.close()


def test_a_booted_pod_serves_jobs_with_its_token(booted, tmp_path, task, reference_files):
    url, token, _, sent = booted
    assert sent["dockerArgs"] == DOCKER_ARGS
    env = {e["key"]: e["value"] for e in sent["env"]}
    assert "test-key" not in json.dumps(sent)  # the pod never sees the provider's API key
    client = PodClient(url, token)
    health = client.health()
    assert health["gpu"] == "NVIDIA A40" and health["busy"] is False
    assert base64.b64decode(env["TRAINERGYM_BOOTSTRAP_B64"]).decode().startswith("exec ")
    write_job(tmp_path / "ws", reference_files)
    job, _ = parse_job(reference_files["job.toml"])
    bundle = build_bundle(tmp_path / "ws", tmp_path / "bundle", job, task)
    job_id = client.submit(bundle.root, "calc_chain", "Qwen/Qwen3-1.7B", key="job-abc")
    assert client.health()["key"] == "job-abc"
    wait_for(client, job_id, "awaiting-eval")
    client.send_eval(job_id, [{"id": "h1", "prompt": "p", "answer": "1"}, {"id": "h2", "prompt": "q", "answer": "2"}])
    wait_for(client, job_id, "done")
    assert client.result(job_id).status == "succeeded"
    assert httpx.get(f"{url}/health", headers={"Authorization": "Bearer test-key"}).status_code == 401


def test_the_default_bootstrap_installs_us_and_serves(monkeypatch):
    monkeypatch.setenv("TRAINERGYM_INSTALL", "https://example.invalid/trainergym.whl calc-chain==0.1.0")
    script = POD_BOOTSTRAP.format(install=pod_install(), port=8000)
    assert "trainergym.whl calc-chain==0.1.0" in script and "pod-serve --port 8000" in script
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0
    monkeypatch.delenv("TRAINERGYM_INSTALL")
    assert "trainergym==" in pod_install() and "trainergym-calc-chain==" in pod_install()


def test_pod_serve_refuses_to_run_without_a_token(tmp_path):
    cli = Path(sys.executable).parent / "trainergym"
    out = subprocess.run([str(cli), "pod-serve", "--workdir", str(tmp_path)], env={"PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "TRAINERGYM_POD_TOKEN" in out.stderr + out.stdout
