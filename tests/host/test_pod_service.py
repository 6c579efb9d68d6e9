"""The pod service on 127.0.0.1 with fake train/score executables, driven by its client."""

import json
import socket
import sys
import threading
import time

import httpx
import pytest
import uvicorn

from tests.fakes.jobs import write_job
from tests.fakes.gpu_host import FAKE_SCORE, FAKE_TRAIN, fake_nvidia_smi, wait_for
from trainergym.job.bundle import build_bundle, parse_job
from trainergym.host.pod_service import PodClient, create_app, settings_from_env
from trainergym.job.result import FailureReason
from trainergym.host.runner import Commands

TOKEN = "pod-token-for-tests"


@pytest.fixture
def service(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINERGYM_ALLOW_UNCONFINED", "1")
    (tmp_path / "train.py").write_text(FAKE_TRAIN)
    (tmp_path / "score.py").write_text(FAKE_SCORE)
    commands = Commands(setup=["true"], train=[sys.executable, str(tmp_path / "train.py"), "ok", "{run_dir}"],
                        score=[sys.executable, str(tmp_path / "score.py"), "--weights", "{weights}", "--items",
                               "{eval_file}", "--out", "{score_file}", "--mode", "ok", "--log", str(tmp_path / "s.log")])
    app = create_app(tmp_path / "pod", TOKEN, gpu="NVIDIA A40", gpu_count=2, usd_per_hour=0.44, commands=commands,
                     confinement="none")  # the fake trainer runs under sys.executable
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.time() + 20
    while not server.started and time.time() < deadline:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(10)


@pytest.fixture
def bundle(tmp_path, task, reference_files):
    write_job(tmp_path / "ws", reference_files)
    job, _ = parse_job(reference_files["job.toml"])
    return build_bundle(tmp_path / "ws", tmp_path / "bundle", job, task)



def test_submit_poll_eval_result(service, bundle):
    client = PodClient(service, TOKEN)
    assert client.health()["ok"]
    job_id = client.submit(bundle.root, "calc_chain", "Qwen/Qwen3-1.7B")
    assert httpx.post(f"{service}/jobs", content=b"x", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 409
    status = wait_for(client, job_id, "awaiting-eval")
    assert status["phase"] == "awaiting-eval" and client.result(job_id) is None
    client.send_eval(job_id, [{"id": "h1", "prompt": "p", "answer": "1"}, {"id": "h2", "prompt": "q", "answer": "2"}])
    wait_for(client, job_id, "done")
    result = client.result(job_id)
    assert result.status == "succeeded" and (result.pre, result.post) == (0.5, 0.75) and result.eval_n == 2
    assert "== train" in client.log(job_id)
    client.close()


def test_authentication_and_bad_input(service, bundle):
    assert httpx.get(f"{service}/health").status_code == 401
    assert httpx.get(f"{service}/health", headers={"Authorization": "Bearer wrong"}).status_code == 401
    client = PodClient(service, TOKEN)
    bad = client.http.post("/jobs", content=b"not a tarball", headers={"X-Family": "f", "X-Base-Model": "m"})
    assert bad.status_code == 400
    assert client.http.get("/jobs/nope").status_code == 404
    job_id = client.submit(bundle.root, "calc_chain", "Qwen/Qwen3-1.7B")
    early = client.http.post(f"/jobs/{job_id}/eval", content="[]")
    assert early.status_code == 409 or client.status(job_id)["phase"] == "awaiting-eval"
    client.cancel(job_id)
    wait_for(client, job_id, "done")
    assert client.result(job_id).failure is FailureReason.CANCELLED
    client.close()


def test_the_pod_reads_its_own_gpus_and_the_rented_ones_only_as_fallback(tmp_path, monkeypatch):
    """The provider may hand out another GPU than the pool asked for: nvidia-smi is believed."""
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi yet
    rented = {"TRAINERGYM_POD_TOKEN": "tok", "TRAINERGYM_GPU": "NVIDIA RTX A5000", "TRAINERGYM_GPU_COUNT": "2"}
    settings = settings_from_env(rented)
    assert (settings["gpu"], settings["gpu_count"], settings["commands"]) == ("NVIDIA RTX A5000", 2, None)
    fake_nvidia_smi(tmp_path, names=("NVIDIA A40",) * 4)
    settings = settings_from_env({**rented, "TRAINERGYM_HOST_COMMANDS": json.dumps({"setup": ["true"]})})
    assert (settings["gpu"], settings["gpu_count"]) == ("NVIDIA A40", 4) and settings["commands"].setup == ["true"]
    with pytest.raises(SystemExit, match="TRAINERGYM_POD_COMMANDS must be"):
        settings_from_env({**rented, "TRAINERGYM_POD_COMMANDS": '{"train": "rm -rf /"}'})
