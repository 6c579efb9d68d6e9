"""The local backend end to end with fake GPU commands: an episode's validated job goes
through the durable queue and the runner, and comes back as a result. In process, and from the
command line as a host's owner runs it: a fake nvidia-smi first on PATH and the phase commands
replaced through TRAINERGYM_HOST_COMMANDS."""

import asyncio
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.fakes.jobs import write_job
from tests.fakes.gpu_host import FAKE_TRAIN_SH, fake_commands, fake_nvidia_smi
from trainergym import AsyncTrainerEnv
from trainergym.agents import make_agent, run_episode
from trainergym.backends import BackendUnavailable, make_backend
from trainergym.backends.local import LocalBackend
from trainergym.paths import default_workdir
from trainergym.host.confinement import TRAIN_UID_RANGE, Confinement
from trainergym.job.bundle import build_bundle, parse_job
from trainergym.host.runner import Commands
from trainergym.infra.queue import JobQueue
from trainergym.paths import data_dir

BIN = Path(sys.executable).with_name("trainergym")
ROOT = Path(__file__).parents[2]


@pytest.fixture
def backend(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINERGYM_ALLOW_UNCONFINED", "1")

    def make(train_mode="ok"):
        commands = Commands(**fake_commands(tmp_path, train_mode))
        return LocalBackend(tmp_path / f"local-{train_mode}", commands=commands, gpu="NVIDIA A40", gpu_count=2,
                            poll_seconds=0.1, confinement="none")  # the fake trainer runs under sys.executable
    return make


def test_local_backend_runs_an_episode(backend):
    local = backend()
    env = AsyncTrainerEnv(backend=local)
    info = asyncio.run(run_episode(env, make_agent("reference")))
    result = info["result"]
    assert result["status"] == "succeeded" and result["source"] == "measured" and result["eval_n"] == 200
    assert (result["pre"], result["post"]) == (0.5, 0.75)
    assert info["reward_breakdown"]["validated"] and info["reward_breakdown"]["post"] == 0.75
    assert local.queue.counts() == {"done": 1}
    env.close()
    local.close()


def test_failures_and_dedupe_and_cancel(backend, tmp_path, task, reference_files):
    local = backend("oom")
    write_job(tmp_path / "ws", reference_files)
    job, _ = parse_job(reference_files["job.toml"])
    bundle = build_bundle(tmp_path / "ws", tmp_path / "bundle", job, task)

    async def go():
        handle = await local.submit(bundle, task)
        assert (await local.submit(bundle, task)).job_id == handle.job_id  # deduped by content hash
        result = await local.result(handle, timeout=60)
        assert result.status == "failed" and result.failure_reason == "out of memory" and "OutOfMemoryError" in result.log_tail
        assert local.queue.get(handle.job_id).attempts == 1  # a job's own failure is not retried
        local.queue.enqueue("other-hash", task.id, bundle.root, family=task.family, base_model=job.job.base_model)
        other = local.queue.jobs("queued")[0]
        from trainergym.backends import JobHandle

        h = JobHandle(job_id=other.id, content_hash="other-hash", backend="local")
        await local.cancel(h)
        await local.cancel(h)
        assert (await local.result(h, timeout=5)).status == "cancelled"

    asyncio.run(go())
    local.close()


# --- from the command line ---------------------------------------------------------------------
@pytest.fixture
def gpu_host(tmp_path, monkeypatch):
    """The environment of a CLI run on a fake GPU host: two A40s by nvidia-smi, the data directory
    in tmp, FAKE_TRAIN and FAKE_SCORE as the phase commands, the trainer unconfined (it runs under
    this checkout's Python). Yields (env, the local backend's default work directory), which is
    removed afterwards (as root it lies outside tmp, under /var/lib/trainergym)."""
    (tmp_path / "bin").mkdir()
    fake_nvidia_smi(tmp_path / "bin")
    (tmp_path / "fakes").mkdir()
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    env.update(PATH=f"{tmp_path / 'bin'}:{os.environ['PATH']}", TRAINERGYM_DATA_DIR=str(tmp_path / "data"),
               TRAINERGYM_HOST_COMMANDS=json.dumps(fake_commands(tmp_path / "fakes")),
               TRAINERGYM_TRAINER_CONFINEMENT="none", TRAINERGYM_ALLOW_UNCONFINED="1")
    monkeypatch.setenv("TRAINERGYM_DATA_DIR", env["TRAINERGYM_DATA_DIR"])
    workdir = default_workdir()
    yield env, workdir
    shutil.rmtree(workdir, ignore_errors=True)


def cli(env, *argv, runs=None, timeout=300):
    """`trainergym *argv` in a subprocess (runs in `runs`); returns the completed process."""
    more = ["--runs-dir", str(runs)] if runs else []
    return subprocess.run([str(BIN), *argv, *more], capture_output=True, text=True, env=env, cwd=ROOT, timeout=timeout)


def measured(result):
    """A result the fake host trained and scored: the fake scorer's 0.5 before, 0.75 after."""
    assert result["status"] == "succeeded" and result["source"] == "measured", result
    assert (result["pre"], result["post"], result["eval_n"]) == (0.5, 0.75, 200)
    assert (result["gpu"], result["gpu_count"]) == ("NVIDIA A40", 2)


def test_episode_from_the_cli(gpu_host, tmp_path):
    env, workdir = gpu_host
    out = cli(env, "episode", "--backend", "local", "--json", runs=tmp_path / "runs")
    assert out.returncode == 0, out.stderr
    episode = json.loads(out.stdout)
    measured(episode["result"])
    assert episode["result"]["details"]["train_confinement"].startswith("UNCONFINED")
    assert episode["reward"]["post"] == 0.75 and episode["reward"]["validated"]
    assert (tmp_path / "fakes" / "s.log").read_text().splitlines()[-1].startswith(str(workdir))  # the trained weights
    assert not workdir.is_relative_to(data_dir()) if os.geteuid() == 0 else workdir == data_dir() / "worker"
    # The table, for the same bundle: answered from the queue, which has it done.
    table = cli(env, "episode", "--backend", "local", runs=tmp_path / "runs")
    assert table.returncode == 0, table.stderr
    assert "measured" in table.stdout and "0.750" in table.stdout and "surrogate" not in table.stdout


@pytest.mark.slow
def test_batch_from_the_cli(gpu_host, tmp_path):
    env, _ = gpu_host
    out = cli(env, "batch", "--backend", "local", "--n", "2", "--json", runs=tmp_path / "runs")
    assert out.returncode == 0, out.stderr
    batch = json.loads(out.stdout)
    assert batch["sources"] == ["measured"] and len(batch["episodes_detail"]) == 2
    assert all(e["job_succeeded"] and e["validated"] and e["error"] is None and e["source"] == "measured"
               for e in batch["episodes_detail"])
    for episode in batch["episodes_detail"]:
        measured(json.loads((Path(batch["batch_dir"]) / episode["episode_id"] / "result.json").read_text()))


def test_worker_drains_a_queued_bundle(gpu_host, tmp_path, task, reference_files):
    env, _ = gpu_host
    write_job(tmp_path / "ws", reference_files)
    job, _ = parse_job(reference_files["job.toml"])
    bundle = build_bundle(tmp_path / "ws", tmp_path / "bundle", job, task)
    queued = JobQueue(data_dir() / "jobs.db").enqueue(bundle.manifest.content_hash, task.id, bundle.root,
                                                      family=task.family, base_model=job.job.base_model)
    out = cli(env, "worker", "--backend", "local", "--once")
    assert out.returncode == 0, out.stderr
    assert "'done': 1" in out.stdout
    shown = cli(env, "jobs", "--json")
    assert shown.returncode == 0, shown.stderr
    (row,) = json.loads(shown.stdout)["jobs"]
    assert row["id"] == queued.id and row["state"] == "done"
    measured(row["result"])


def test_episode_with_the_trainer_confined_by_bubblewrap(gpu_host, tmp_path):
    """The default work directory works as root with the trainer under a uid of its own: the
    trainer (a shell script: this checkout's Python lies under /root) reaches it, and still cannot
    read the data directory, which stays 0700."""
    env, workdir = gpu_host
    confinement = Confinement.choose("bwrap")
    if confinement.kind != "bwrap":
        pytest.skip(f"bubblewrap cannot confine here: {confinement.why_not}")
    scripts = Path(tempfile.mkdtemp(prefix="tg-fake-trainer-"))  # where the trainer's uid can reach it
    try:
        scripts.chmod(0o755)
        train = scripts / "train.sh"
        train.write_text(FAKE_TRAIN_SH.replace("@SECRET@", shlex.quote(str(data_dir() / "hidden-seed"))))
        train.chmod(0o755)
        commands = {**fake_commands(tmp_path / "fakes"), "train": ["/bin/sh", str(train), "ok", "{run_dir}"]}
        env = {**env, "TRAINERGYM_HOST_COMMANDS": json.dumps(commands), "TRAINERGYM_TRAINER_CONFINEMENT": "bwrap"}
        del env["TRAINERGYM_ALLOW_UNCONFINED"]
        out = cli(env, "episode", "--backend", "local", "--json", runs=tmp_path / "runs")
        assert out.returncode == 0, out.stderr
        result = json.loads(out.stdout)["result"]
        measured(result)
        assert result["details"]["train_confinement"].startswith("bubblewrap")
        (outputs,) = workdir.glob("runs/*/outputs")
        assert (outputs / "seed").read_text().strip() == "refused"
        if os.geteuid() == 0:
            assert int((outputs / "uid").read_text()) in TRAIN_UID_RANGE  # not root: a uid of its own
            assert (data_dir().stat().st_mode & 0o777) == 0o700
    finally:
        shutil.rmtree(scripts, ignore_errors=True)


@pytest.mark.parametrize("smi", ["absent", "failing"])
@pytest.mark.parametrize("argv", [["episode"], ["batch", "--n", "2"], ["worker", "--once"]])
def test_no_gpu_is_refused_in_one_line(tmp_path, smi, argv):
    (tmp_path / "bin").mkdir()
    if smi == "failing":  # a host whose driver is gone: nvidia-smi exits 9
        fake_nvidia_smi(tmp_path / "bin", status=9)
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    env.update(PATH=f"{tmp_path / 'bin'}:/usr/bin:/bin", TRAINERGYM_DATA_DIR=str(tmp_path / "data"))
    out = cli(env, *argv, "--backend", "local", runs=None if argv[0] == "worker" else tmp_path / "runs", timeout=120)
    assert out.returncode == 2, out.stdout + out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "nvidia-smi finds none" in out.stderr
    assert "Traceback" not in out.stderr + out.stdout


def test_bad_host_commands_and_the_default_workdir(tmp_path, monkeypatch):
    fake_nvidia_smi(tmp_path)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("TRAINERGYM_HOST_COMMANDS", '{"train": "rm -rf /"}')
    with pytest.raises(BackendUnavailable, match="TRAINERGYM_HOST_COMMANDS must be") as bad:
        make_backend("local", workdir=tmp_path / "work", queue=tmp_path / "jobs.db")
    assert "\n" not in str(bad.value)
    monkeypatch.setenv("TRAINERGYM_HOST_COMMANDS", json.dumps({"setup": ["true"]}))
    local = make_backend("local", workdir=tmp_path / "work", queue=tmp_path / "jobs.db")
    assert local.commands.setup == ["true"] and local.commands.train == Commands().train
    assert (local.gpu, local.gpu_count) == ("NVIDIA A40", 2)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert default_workdir() == data_dir() / "worker"  # the trainer keeps our uid
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    chosen = default_workdir()
    assert chosen.parent == Path("/var/lib/trainergym") and not chosen.is_relative_to(data_dir())
    monkeypatch.setenv("TRAINERGYM_DATA_DIR", str(tmp_path / "other"))
    assert default_workdir() != chosen  # one per data directory: its pre-score cache is that one's hidden eval's
