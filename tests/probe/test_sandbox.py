"""The sandbox's modes: bubblewrap, namespaces (no bubblewrap), and refusing to run unconfined."""

import os
import secrets
import shutil
from pathlib import Path

import pytest

from trainergym.paths import data_dir
from tests.marks import requires_bwrap
from trainergym.probe.sandbox import Sandbox, run_once


def request(task_module: str) -> dict:
    return {"nonce": secrets.token_hex(8), "module": task_module, "max_tasks": 50, "timeout": 60}


@pytest.fixture
def package(tmp_path, reference_files):
    from tests.fakes.jobs import write_job

    write_job(tmp_path / "pkg" / "job_sbx", {k.removeprefix("taskset/"): v for k, v in reference_files.items()
                                             if k.startswith("taskset/")})
    return tmp_path / "pkg"


@requires_bwrap
def test_bwrap_starts_from_an_empty_root(tmp_path):
    """No `--ro-bind / /`: the data directory, homes and other checkouts are simply not there."""
    box = Sandbox()
    cmd = box.command(["python"], tmp_path)
    assert "--unshare-net" in cmd and "--unshare-pid" in cmd
    assert not any(cmd[i:i + 3] == ["--ro-bind", "/", "/"] for i in range(len(cmd)))
    assert str(data_dir().resolve()) not in cmd and "/home" not in cmd
    assert "allow-list root" in box.describe()


@pytest.mark.skipif(Sandbox(mode="namespaces").kind != "namespaces", reason="unshare cannot create namespaces here")
def test_namespaces_mode_runs_a_job_without_bubblewrap(monkeypatch, package):
    real_which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name: None if name == "bwrap" else real_which(name))
    box = Sandbox()  # auto, with no bubblewrap on the PATH
    assert box.kind == "namespaces" and box.describe().startswith("namespaces") and "allow-list root" in box.describe()
    (loaded,), end = run_once(box, package, request("job_sbx"))
    assert loaded["stage"] == "loaded" and len(loaded["tasks"]) == 50 and end["stage"] == "closed"
    if os.geteuid() == 0:  # as root the host lets us write cgroups here
        assert end["accounting"].startswith("cgroup")


def test_modes_are_explicit(monkeypatch):
    monkeypatch.setenv("TRAINERGYM_SANDBOX", "bogus")
    with pytest.raises(ValueError, match="auto, bwrap, namespaces, none"):
        Sandbox()
    monkeypatch.setenv("TRAINERGYM_SANDBOX", "none")
    monkeypatch.delenv("TRAINERGYM_ALLOW_UNCONFINED", raising=False)
    assert Sandbox().kind == "unavailable" and "TRAINERGYM_ALLOW_UNCONFINED=1" in Sandbox().describe()


def test_no_sandbox_refuses_unless_opted_in(monkeypatch, package):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.delenv("TRAINERGYM_ALLOW_UNCONFINED", raising=False)
    box = Sandbox()
    assert box.kind == "unavailable" and "bubblewrap is not installed" in box.describe()
    with pytest.raises(RuntimeError, match="Install bubblewrap"):
        run_once(box, package, request("job_sbx"))
    monkeypatch.setenv("TRAINERGYM_ALLOW_UNCONFINED", "1")
    assert Sandbox().kind == "unavailable"  # the opt-in alone does not downgrade auto
    box = Sandbox(mode="none")
    assert box.kind == "rlimits-only" and box.describe().startswith("UNCONFINED")


def test_environment_is_scrubbed(monkeypatch):
    monkeypatch.setenv("MY_SERVICE_TOKEN", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    env = Sandbox().env("/tmp")
    assert not any(k in env for k in ("MY_SERVICE_TOKEN", "AWS_SECRET_ACCESS_KEY", "TRAINERGYM_HIDDEN_SEED"))
    assert env["HOME"] == "/tmp" and "PATH" in env


def test_the_root_shows_only_what_a_job_needs(tmp_path):
    """An allow-list: the system's programs and libraries, the loader's files of /etc, the
    interpreter and its site-packages, the families' public modules, the job spool, a /dev of its
    own. sys.path as such is never shown: editable installs put the library's and the families'
    source trees there."""
    import sys

    from trainergym.job import stack_env
    from trainergym.probe.sandbox import SYSTEM, SYSTEM_FILES, code_masks

    box = Sandbox(mode="namespaces")
    steps = box.mounts(tmp_path)
    assert steps[0] == ("root",)
    shown = {Path(step[1]) for step in steps if step[0] == "bind"}
    runtime = {Path(p).resolve() for p in (*stack_env.library().paths, sys.prefix, sys.base_prefix)}
    public = set(code_masks(stack_env.library().paths[2:])[1])
    devices = {Path(f"/dev/{d}") for d in ("null", "zero", "full", "random", "urandom")}
    allowed = {Path(p) for p in (*SYSTEM, *SYSTEM_FILES)} | runtime | public | devices | {tmp_path}
    assert shown <= allowed, shown - allowed
    checkout = Path(__file__).resolve().parents[2]
    assert not [p for p in shown if checkout.is_relative_to(p) or p in (checkout / "src", checkout / "envs")]
