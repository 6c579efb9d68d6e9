"""The runner's orchestration with fake train and score executables: phases, heartbeats,
timeouts, failure capture, the GPU split, and the hidden eval kept off the host until training
is over. The fake trainer runs unconfined here (tests/host/test_trust.py confines it)."""

import json
import os
import time
import tomllib
from pathlib import Path

import pytest

from trainergym.host.confinement import Confinement
from trainergym.host.runner import Commands, Runner, Timeouts, _last_step
from trainergym.job.result import FailureReason, RunResult

from tests.fakes.gpu_host import FAKE_SCORE, FAKE_TRAIN, ITEMS, PY


@pytest.fixture
def fakes(tmp_path):
    (tmp_path / "train.py").write_text(FAKE_TRAIN)
    (tmp_path / "score.py").write_text(FAKE_SCORE)
    bundle = tmp_path / "bundle"
    (bundle / "package").mkdir(parents=True)
    (bundle / "rl.toml").write_text("max_steps = 3\n")

    def make(train_mode="ok", score_mode="ok", setup=("true",), timeouts=None, fetches=None, gpus=2,
             confinement=Confinement.unconfined()):
        commands = Commands(
            setup=list(setup),
            train=[PY, str(tmp_path / "train.py"), train_mode, "{run_dir}"],
            score=[PY, str(tmp_path / "score.py"), "--weights", "{weights}", "--items", "{eval_file}", "--out",
                   "{score_file}", "--mode", score_mode, "--log", str(tmp_path / "scored.log")])

        def fetch():
            if fetches is not None:
                fetches.append(time.time())
            return ITEMS

        return Runner(bundle, tmp_path / "job", fetch, "calc_chain", "Qwen/Qwen3-1.7B", gpu="NVIDIA A40",
                      gpu_count=gpus, usd_per_hour=0.44, commands=commands, timeouts=timeouts, host=tmp_path / "host",
                      heartbeat_seconds=0.1, confinement=confinement)
    return make


def test_success_writes_result_and_caches_pre(fakes, tmp_path):
    fetches = []
    runner = fakes(fetches=fetches)
    result = runner.run()
    assert result.status == "succeeded" and (result.pre, result.post) == (0.5, 0.75) and result.failure is None
    assert result.eval_n == 20 and result.source == "measured" and result.stack.prime_rl_commit
    assert result.train_seconds > 0.5 and result.cost_usd > 0
    assert RunResult.model_validate_json((tmp_path / "job" / "result.json").read_text()) == result
    status = json.loads((tmp_path / "job" / "status.json").read_text())
    assert status["phase"] == "done" and status["progress"]["step"] == 2
    saw = tmp_path / "job" / "outputs" / "train-saw.json"
    assert json.loads(saw.read_text()) == []  # no hidden eval during training
    assert not list((tmp_path / "job").rglob("items.jsonl"))  # and none left after scoring
    assert fetches and fetches[0] > saw.stat().st_mtime
    assert result.details["train_confinement"].startswith("UNCONFINED")
    fakes().run()
    scored = (tmp_path / "scored.log").read_text().splitlines()
    assert scored.count("Qwen/Qwen3-1.7B") == 1  # pre is cached per model and family


@pytest.mark.parametrize("train_mode, setup, reason, text, transient", [
    ("oom", ("true",), FailureReason.OUT_OF_MEMORY, "out of memory", False),
    ("crash", ("true",), FailureReason.TRAINER_CRASHED, "trainer crashed (exit status 2)", False),
    ("no-checkpoint", ("true",), FailureReason.NO_CHECKPOINT, "no checkpoint", False),
    ("swap", ("true",), FailureReason.CHECKPOINT_REFUSED, "checkpoint not the one published (step_3 changed after", False),
    ("link", ("true",), FailureReason.CHECKPOINT_REFUSED, "checkpoint not the one published (step_3 holds", False),
    ("ok", ("false",), FailureReason.INSTALL_FAILED, "install failed (exit status 1)", True),
    ("ok", ("/nonexistent/bootstrap",), FailureReason.INSTALL_FAILED, "install failed ([Errno 2]", True),
])
def test_failures_are_named(fakes, train_mode, setup, reason, text, transient):
    result = fakes(train_mode=train_mode, setup=setup).run()
    assert result.status == "failed" and result.failure is reason and result.failure_reason.startswith(text), result
    assert result.transient is transient and result.post is None and result.log_tail


def test_bad_score_is_an_eval_failure(fakes):
    result = fakes(score_mode="bad").run()
    assert result.failure is FailureReason.EVAL_FAILED and result.failed_phase == "pre"


def test_timeout_kills_the_whole_phase(fakes, tmp_path):
    result = fakes(train_mode="hang", timeouts=Timeouts(train=2)).run()
    assert result.failure is FailureReason.TRAIN_TIMEOUT and result.failure_reason == "training timed out (after 2 s)"
    pid = int((tmp_path / "job" / "outputs" / "grandchild.pid").read_text())
    assert _dead(pid), "a process the phase started outlived it"


def _dead(pid: int, wait: float = 3.0) -> bool:
    """Gone, or a zombie waiting to be reaped by init."""
    deadline = time.time() + wait
    while time.time() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state == "Z":
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("gpus, bundle_toml, split", [
    (2, "max_steps = 3\n", {"num_train_gpus": 1, "num_infer_gpus": 1}),
    (3, "max_steps = 3\n", {"num_train_gpus": 2, "num_infer_gpus": 1}),
    (4, "max_steps = 3\n[deployment]\nnum_train_gpus = 7\nnum_infer_gpus = 1\n",
     {"num_train_gpus": 2, "num_infer_gpus": 2}),
])
def test_the_runner_trains_on_its_own_gpu_split(fakes, tmp_path, gpus, bundle_toml, split):
    (tmp_path / "bundle" / "rl.toml").write_text(bundle_toml)
    runner = fakes(gpus=gpus)
    result = runner.run()
    written = tomllib.loads((tmp_path / "job" / "rl.toml").read_text())
    assert written == {"max_steps": 3, "deployment": split}  # the bundle's own section replaced
    assert result.status == "succeeded" and result.details["deployment"] == split and result.gpu_count == gpus
    assert f"== train: {PY} {tmp_path / 'train.py'} ok" in runner.log_tail(100_000)


@pytest.mark.parametrize("gpus", [0, 1])
def test_fewer_than_two_gpus_fail_before_setup(fakes, tmp_path, gpus):
    marker = tmp_path / "setup-ran"
    result = fakes(gpus=gpus, setup=("touch", str(marker))).run()
    assert result.failure is FailureReason.TOO_FEW_GPUS and result.failed_phase == "setup" and result.transient
    assert f"{gpus} GPU(s) here" in result.failure_detail and not marker.exists()


def test_no_confinement_fails_before_setup(fakes, tmp_path):
    marker = tmp_path / "setup-ran"
    result = fakes(setup=("touch", str(marker)), confinement=Confinement("unavailable", "bwrap: not installed")).run()
    assert result.failure is FailureReason.RUNNER_ERROR and "no confinement for the trainer" in result.failure_detail
    assert not marker.exists()


def test_a_refusing_scorer_is_a_tampered_family(fakes):
    result = fakes(score_mode="refuse").run()
    assert result.failure is FailureReason.FAMILY_TAMPERED and result.failed_phase == "pre" and not result.transient
    assert "differs from its recorded hash" in result.failure_reason


def test_progress_is_read_only_from_regular_files(tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text('{"step": 1}\n' + "x" * 100_000 + '\n{"step": 7}\n')
    assert _last_step(metrics) == 7
    (tmp_path / "secret").write_text('{"step": 42}\n')
    (tmp_path / "link.jsonl").symlink_to(tmp_path / "secret")
    os.mkfifo(tmp_path / "fifo.jsonl")  # opening it for reading must not block
    for path in ("link.jsonl", "fifo.jsonl"):
        assert _last_step(tmp_path / path) is None
    for text in ("[1]", '{"step": "3"}', "", '{"step": true}'):
        metrics.write_text(text)
        assert _last_step(metrics) is None


def test_our_own_phases_keep_temporary_files_off_the_shared_tmp(fakes, tmp_path):
    """A trainer of any uid may write /tmp; setup and the scorer, run as the runner, never read it."""
    result = fakes(setup=("sh", "-c", 'echo "$TMPDIR" > {root}/setup-tmp')).run()
    private = tmp_path / "host" / "tmp"
    assert result.status == "succeeded" and (tmp_path / "job" / "setup-tmp").read_text().strip() == str(private)
    assert private.stat().st_mode & 0o777 == 0o700


def test_a_work_directory_the_trainer_cannot_reach_fails_before_setup(fakes, tmp_path):
    """As root the trainer's own uid must traverse to the job and the host's installs: a host
    directory behind a closed one (the 0700 data directory, pytest's tmp) fails at once."""
    confinement = Confinement.choose("setpriv")
    if confinement.kind != "setpriv":
        pytest.skip(f"no uid of its own for the trainer here: {confinement.why_not}")
    marker = tmp_path / "setup-ran"
    os.chmod(tmp_path, 0o700)
    result = fakes(setup=("touch", str(marker)), confinement=confinement).run()
    assert result.failure is FailureReason.RUNNER_ERROR and result.failed_phase == "setup"
    assert "the trainer's uid cannot reach" in result.failure_detail and not marker.exists()


def test_the_log_and_result_are_the_runners_alone(fakes, tmp_path):
    """A later job's trainer may traverse the job's directory: the scorer's output is not for it."""
    assert fakes().run().status == "succeeded"
    for name in ("runner.log", "result.json"):
        assert (tmp_path / "job" / name).stat().st_mode & 0o777 == 0o600


def test_the_hosts_owner_replaces_the_commands_through_the_environment():
    fake = {"setup": ["true"], "score": ["/bin/echo", "{score_file}"]}
    assert Commands.from_env({}) is None
    for name in ("TRAINERGYM_HOST_COMMANDS", "TRAINERGYM_POD_COMMANDS"):  # the pod's older name still works
        commands = Commands.from_env({name: json.dumps(fake)})
        assert (commands.setup, commands.score, commands.train) == (["true"], fake["score"], Commands().train)
    both = {"TRAINERGYM_HOST_COMMANDS": json.dumps(fake), "TRAINERGYM_POD_COMMANDS": '{"setup": ["false"]}'}
    assert Commands.from_env(both).setup == ["true"]
    for bad in ("[", '["true"]', '{"setup": "true"}', '{"setup": []}', '{"install": ["true"]}', '{"setup": [1]}'):
        with pytest.raises(ValueError, match="TRAINERGYM_HOST_COMMANDS") as e:
            Commands.from_env({"TRAINERGYM_HOST_COMMANDS": bad})
        assert "\n" not in str(e.value)


def test_a_large_shard_swapped_after_publication_is_refused(tmp_path, monkeypatch):
    """Shards past WHOLE_BYTES are read in blocks at secret offsets: a swap still shows."""
    from trainergym.host import checkpoints

    monkeypatch.setattr(checkpoints, "WHOLE_BYTES", 64 << 10)
    step = tmp_path / "run" / "broadcasts" / "step_2"
    step.mkdir(parents=True)
    (step / "model.safetensors").write_bytes(os.urandom(4 << 20))
    (step / "STABLE").write_text("")
    ledger = checkpoints.Ledger(tmp_path, max_steps=2)
    ledger.watch()
    assert ledger.verified() == step  # unchanged: scored
    (step / "model.safetensors").write_bytes(os.urandom(4 << 20))
    with pytest.raises(checkpoints.CheckpointRefused, match="changed after it was published"):
        ledger.verified()
