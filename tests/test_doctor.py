"""`trainergym doctor`'s training section, against a fake nvidia-smi on PATH and the fake Runpod
REST API (tests/fakes/runpod_rest_api.py) on 127.0.0.1: every line that is not ok names what is
missing and what to do."""

import io
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from rich.console import Console

from tests.fakes.runpod_api import World
from tests.fakes.runpod_rest_api import FakeRunpodRest
from trainergym import doctor
from trainergym.job import stack_env

A40 = "NVIDIA A40, 46068 MiB, 550.54.15"


def fake_nvidia_smi(bin_dir: Path, rows: list[str], fail: bool = False) -> None:
    """An nvidia-smi that lists `rows` (as `--query-gpu=name,memory.total,driver_version`), their
    `-L` lines and a banner with the CUDA version; or fails as it does when the driver is gone."""
    bin_dir.mkdir(exist_ok=True)
    query = "".join(f"{r}\\n" for r in rows)
    listing = "".join(f"GPU {i}: {r.split(',')[0]} (UUID: GPU-{i})\\n" for i, r in enumerate(rows))
    script = bin_dir / "nvidia-smi"
    script.write_text("#!/bin/sh\n" + (
        "echo 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.'; exit 9\n" if fail else
        f'case "$*" in\n  *--query-gpu*) printf "{query}" ;;\n  -L) printf "{listing}" ;;\n'
        '  *) echo "| NVIDIA-SMI 550.54.15   Driver Version: 550.54.15   CUDA Version: 12.4 |" ;;\nesac\n'))
    script.chmod(0o755)


@pytest.fixture
def host(tmp_path, monkeypatch):
    """PATH with a directory for fakes in front, and none of the variables the checks read."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    for name in ("CUDA_VISIBLE_DEVICES", "RUNPOD_API_KEY", "RUNPOD_REST_URL", "TRAINERGYM_INSTALL",
                 "TRAINERGYM_TRAINER_CONFINEMENT", "TRAINERGYM_STACK"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(stack_env, "ensure", lambda: stack_env.library("not built in this test"))
    return bin_dir


@pytest.fixture
def workdir():
    """A work directory the trainer's own uid can reach (tmp_path is 0700 under a 0700 parent)."""
    path = Path(tempfile.mkdtemp(prefix="tg-doctor-", dir="/var/tmp"))
    path.chmod(0o755)
    yield path / "worker"
    shutil.rmtree(path, ignore_errors=True)


def checks(workdir=None) -> dict[str, doctor.Check]:
    return {c.name: c for c in doctor.host_checks(stack_env.ensure(), workdir)}


def report(**kwargs) -> tuple[int, dict, str]:
    """(exit status, the JSON report, the text report)."""
    text, data = io.StringIO(), io.StringIO()
    status = doctor.run(Console(file=text, width=400), **kwargs)
    from contextlib import redirect_stdout

    with redirect_stdout(data):
        assert doctor.run(Console(file=io.StringIO()), as_json=True, **kwargs) == status
    return status, json.loads(data.getvalue()), text.getvalue()


def assert_says_what_to_do(check: doctor.Check, *words: str) -> None:
    line = check.line()
    assert check.status in ("missing", "warn") and check.todo and " -> " in line, line
    for word in words:
        assert word in line, (word, line)


def test_two_gpus_pass_the_gpu_checks_and_local_is_ready_when_nothing_else_lacks(host, workdir):
    fake_nvidia_smi(host, [A40, A40])
    found = checks(workdir)
    assert found["gpus"].status == "ok" and "2 x NVIDIA A40 (46068 MiB)" in found["gpus"].found
    assert "driver 550.54.15" in found["gpus"].found and "CUDA 12.4" in found["gpus"].found
    assert found["gpu count"].status == "ok" and "2 GPUs visible" in found["gpu count"].found
    assert found["gpu memory"].status == "ok" and "Qwen/Qwen3-0.6B, seq_len 6144" in found["gpu memory"].found
    assert found.get("workdir", doctor.Check("workdir", "ok", "")).status == "ok"
    status, data, text = report(backend="local", workdir=workdir)
    assert set(data["missing"]["local"]).isdisjoint({"gpus", "gpu count", "gpu memory", "disk", "workdir"})
    assert status == (1 if data["missing"]["local"] or data["runs"] == "unavailable" else 0)
    assert "--backend local: " + ("ready" if not data["missing"]["local"] else "not ready") in text
    if found["uv"].status == "ok" and found["trainer confinement"].status == "ok":
        assert status == 0 and data["missing"]["local"] == []


def test_no_gpu_says_the_runner_needs_two_and_points_at_runpod(host, workdir):
    fake_nvidia_smi(host, [], fail=True)
    found = checks(workdir)
    assert_says_what_to_do(found["gpus"], "nvidia-smi finds no GPU", "--backend runpod")
    assert_says_what_to_do(found["gpu count"], "0 GPUs", "needs at least 2", "--backend runpod")
    status, data, text = report(backend="local", workdir=workdir)
    assert status == 1 and {"gpus", "gpu count"} <= set(data["missing"]["local"])
    assert "missing gpu count: 0 GPUs" in text and "--backend local: not ready (missing: gpus, gpu count" in text
    # without --backend the exit status is still only about confining agent code
    assert report(workdir=workdir)[0] == (0 if data["runs"] != "unavailable" else 1)


def test_no_nvidia_smi_at_all(host, monkeypatch, workdir):
    monkeypatch.setenv("PATH", os.pathsep.join(d for d in os.environ["PATH"].split(os.pathsep)
                                               if not (Path(d) / "nvidia-smi").exists()))
    assert_says_what_to_do(checks(workdir)["gpus"], "no nvidia-smi on PATH", "--backend runpod")


def test_one_small_gpu_lacks_count_and_memory(host, workdir):
    fake_nvidia_smi(host, ["NVIDIA GeForce RTX 3060, 12288 MiB, 550.54.15"])
    found = checks(workdir)
    assert_says_what_to_do(found["gpu count"], "1 GPU(s) visible", "2+ GPUs")
    assert_says_what_to_do(found["gpu memory"], "12.0 GiB", "more memory")
    assert found["gpu memory"].status == "missing"


def test_sixteen_gigabytes_fit_the_default_job_but_warn_about_the_larger_model(host, workdir, monkeypatch):
    monkeypatch.setenv("TRAINERGYM_GPU_MEASURED", "off")  # the reported table's line (the measured rows fit both)
    fake_nvidia_smi(host, ["NVIDIA RTX A4000, 16376 MiB, 550.54.15"] * 2)
    memory = checks(workdir)["gpu memory"]
    assert memory.status == "warn"
    assert_says_what_to_do(memory, "Qwen/Qwen3-1.7B", "LoRA")


def test_cuda_visible_devices_counts_as_the_runner_counts(host, monkeypatch, workdir):
    fake_nvidia_smi(host, [A40, A40])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert_says_what_to_do(checks(workdir)["gpu count"], "1 GPU(s) visible (CUDA_VISIBLE_DEVICES)", "CUDA_VISIBLE_DEVICES")


@pytest.mark.skipif(os.geteuid() != 0, reason="only root's trainer runs under a uid of its own")
def test_a_workdir_the_trainer_uid_cannot_reach_is_named(tmp_path):
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    closed.chmod(0o700)
    check = doctor.workdir_check(closed / "worker", trainer_uid=1_900_000_000)
    assert_says_what_to_do(check, "cannot traverse", "--workdir")
    assert check.status == "missing" and "local" in check.needed_for


def test_workdir_check_applies_only_to_a_trainer_with_a_uid_of_its_own(workdir):
    assert doctor.workdir_check(workdir, trainer_uid=None) is None
    assert doctor.workdir_check(workdir, trainer_uid=1_900_000_000).status == "ok"


def test_disk_below_the_estimate_warns(tmp_path, monkeypatch):
    monkeypatch.setattr(doctor.shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(100e9, 90e9, 10e9))
    check = doctor.disk_check(tmp_path / "worker")
    assert_says_what_to_do(check, "10 GB free", "roughly 60 GB", "estimate", "--workdir")


def test_uv_missing(host, monkeypatch):
    monkeypatch.setattr(doctor.shutil, "which", lambda name: None)
    assert_says_what_to_do(doctor.uv_check(), "uv is not on PATH", "pip install uv")


def test_an_unknown_trainer_confinement_says_what_to_install(host, monkeypatch):
    monkeypatch.setenv("TRAINERGYM_TRAINER_CONFINEMENT", "bogus")
    check, uid = doctor.confinement_check()
    assert uid is None
    assert_says_what_to_do(check, "bogus", "apt-get install bubblewrap")


def test_the_auto_confinement_names_what_it_picks_and_each_mechanism(host):
    check, _ = doctor.confinement_check()
    assert "bwrap: " in check.found and "setpriv: " in check.found
    assert check.status == "missing" or check.found.startswith("auto picks ")


def test_stack_not_built_says_how_to_build_it(host, monkeypatch):
    monkeypatch.setattr(stack_env, "find_python", lambda: "/opt/python3.12")
    assert_says_what_to_do(doctor.stack_check(stack_env.library("x")), "not built", "trainergym stack --build")
    monkeypatch.setattr(stack_env, "find_python", lambda: None)
    assert_says_what_to_do(doctor.stack_check(stack_env.library("x")), "no Python 3.12", "uv python install 3.12")
    built = stack_env.Stack(python="p", paths=(), verifiers="0.3.1.dev62", prime_rl_configs=True, source="wheels")
    assert doctor.stack_check(built).status == "ok"


@pytest.fixture
def runpod(monkeypatch):
    """The fake Runpod REST API v2 (key "test-key"), holding one pod of ours and one not; its
    `world.calls` records every call that reached the API."""
    world = World()
    world.create_pod("trainergym-ab12", "NVIDIA A40", 2, "SECURE", [])
    world.create_pod("notebook", "NVIDIA RTX A5000", 1, "SECURE", [])
    api = FakeRunpodRest(world)
    monkeypatch.setenv("RUNPOD_REST_URL", api.url)
    yield world
    api.close()


def test_runpod_key_unset(host):
    runpod = {c.name: c for c in doctor.runpod_checks()}
    assert_says_what_to_do(runpod["runpod key"], "RUNPOD_API_KEY is not set", "set RUNPOD_API_KEY")
    assert runpod["runpod key"].needed_for == ("runpod",)


def test_a_good_key_is_checked_with_one_read_only_call(host, runpod, monkeypatch, workdir):
    monkeypatch.setenv("RUNPOD_API_KEY", "test-key")
    monkeypatch.setenv("TRAINERGYM_INSTALL", "https://example.invalid/trainergym-0.1.0-py3-none-any.whl")
    found = {c.name: c for c in doctor.runpod_checks()}
    assert runpod.calls == [("pods", {})]
    assert found["runpod key"].status == "ok" and "2 pod(s)" in found["runpod key"].found
    assert "1 named trainergym-*" in found["runpod key"].found and "reaps" in found["runpod key"].todo
    assert found["pod install"].status == "ok"
    fake_nvidia_smi(host, [], fail=True)
    status, data, text = report(backend="runpod", workdir=workdir)
    assert data["missing"]["runpod"] == [] and status == (1 if data["runs"] == "unavailable" else 0)
    assert "--backend runpod: ready" in text and "test-key" not in text  # the key is never shown


def test_a_refused_key_says_to_set_a_valid_one(host, runpod, monkeypatch, workdir):
    monkeypatch.setenv("RUNPOD_API_KEY", "rpa_STALEKEY")
    check = {c.name: c for c in doctor.runpod_checks()}["runpod key"]
    assert check.status == "missing" and runpod.calls == []
    assert_says_what_to_do(check, "Runpod refused RUNPOD_API_KEY", "401", "set RUNPOD_API_KEY to a valid key")
    status, data, text = report(backend="runpod", workdir=workdir)
    assert status == 1 and "runpod key" in data["missing"]["runpod"] and "rpa_STALEKEY" not in text


def test_an_account_without_balance_is_refused_too(host, runpod, monkeypatch):
    monkeypatch.setenv("RUNPOD_API_KEY", "test-key")
    runpod.http_fail_next.append((402, json.dumps({"title": "Payment Required", "status": 402,
                                                   "detail": "insufficient balance"}).encode()))
    check = {c.name: c for c in doctor.runpod_checks()}["runpod key"]
    assert_says_what_to_do(check, "no balance", "add credit")
    assert check.status == "missing"


def test_a_rate_limit_is_not_waited_out_and_only_warns(host, runpod, monkeypatch):
    monkeypatch.setenv("RUNPOD_API_KEY", "test-key")
    runpod.throttle_next = 2
    check = {c.name: c for c in doctor.runpod_checks()}["runpod key"]
    assert runpod.throttle_next == 1  # one request, no retry
    assert_says_what_to_do(check, "could not check RUNPOD_API_KEY", "rate limited", "run `trainergym doctor` again")


def test_an_unreachable_api_warns_without_blaming_the_key(host, monkeypatch):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("RUNPOD_REST_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("RUNPOD_API_KEY", "test-key")
    check = {c.name: c for c in doctor.runpod_checks()}["runpod key"]
    assert check.status == "warn"
    assert_says_what_to_do(check, "could not check RUNPOD_API_KEY", "RUNPOD_REST_URL")


def test_pods_without_trainergym_install_would_install_from_pypi(host):
    check = {c.name: c for c in doctor.runpod_checks()}["pod install"]
    assert check.status == "missing" and check.needed_for == ("runpod",)
    assert_says_what_to_do(check, "TRAINERGYM_INSTALL is not set", "PyPI", "set TRAINERGYM_INSTALL", "git URLs")


def test_an_unknown_backend_is_refused(host):
    with pytest.raises(ValueError, match="local or runpod"):
        doctor.run(Console(file=io.StringIO()), backend="mock")


def test_every_line_of_the_text_report_that_is_not_ok_says_what_to_do(host, workdir):
    fake_nvidia_smi(host, [], fail=True)
    _, data, text = report(workdir=workdir)
    lines = [line for line in text.splitlines() if line.startswith(("missing ", "warn "))]
    assert len(lines) == sum(c["status"] != "ok" for c in data["host"]) >= 3  # gpus, gpu count, key, install
    assert all(" -> " in line for line in lines), lines
