"""The runner's orchestration with fake train and score executables: phases, heartbeats,
timeouts, failure capture, and the hidden eval kept off the host until training is over."""

import json
import time
from pathlib import Path

import pytest

from trainergym.host.runner import Commands, Runner, Timeouts
from trainergym.job.result import FailureReason, RunResult

from tests.fakes.gpu_host import FAKE_SCORE, FAKE_TRAIN, ITEMS, PY


@pytest.fixture
def fakes(tmp_path):
    (tmp_path / "train.py").write_text(FAKE_TRAIN)
    (tmp_path / "score.py").write_text(FAKE_SCORE)
    bundle = tmp_path / "bundle"
    (bundle / "package").mkdir(parents=True)
    (bundle / "rl.toml").write_text("max_steps = 3\n")

    def make(train_mode="ok", score_mode="ok", setup=("true",), timeouts=None, fetches=None):
        commands = Commands(
            setup=list(setup),
            train=[PY, str(tmp_path / "train.py"), train_mode],
            score=[PY, str(tmp_path / "score.py"), "--weights", "{weights}", "--items", "{eval_file}", "--out",
                   "{score_file}", "--mode", score_mode, "--log", str(tmp_path / "scored.log")])

        def fetch():
            if fetches is not None:
                fetches.append(time.time())
            return ITEMS

        return Runner(bundle, tmp_path / "job", fetch, "calc_chain", "Qwen/Qwen3-1.7B", gpu="NVIDIA A40", gpu_count=2,
                      usd_per_hour=0.44, commands=commands, timeouts=timeouts, pre_cache=tmp_path / "pre-cache",
                      heartbeat_seconds=0.1)
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
    assert json.loads((tmp_path / "job" / "train-saw.json").read_text()) == []  # no hidden eval during training
    assert not list((tmp_path / "job").rglob("items.jsonl"))  # and none left after scoring
    assert fetches and fetches[0] > (tmp_path / "job" / "train-saw.json").stat().st_mtime
    fakes().run()
    scored = (tmp_path / "scored.log").read_text().splitlines()
    assert scored.count("Qwen/Qwen3-1.7B") == 1  # pre is cached per model and family


@pytest.mark.parametrize("train_mode, setup, reason, text, transient", [
    ("oom", ("true",), FailureReason.OUT_OF_MEMORY, "out of memory", False),
    ("crash", ("true",), FailureReason.TRAINER_CRASHED, "trainer crashed (exit status 2)", False),
    ("no-checkpoint", ("true",), FailureReason.NO_CHECKPOINT, "no checkpoint", False),
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
    pid = int((tmp_path / "job" / "grandchild.pid").read_text())
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
