"""The runner's measurement modes (`pre`, `pre-fresh`): setup without a job package, nothing
trained, the hidden eval fetched and the base model scored through the same scorer and pre-score
cache as a job's pre; one GPU suffices."""

import json

import pytest

from tests.fakes.gpu_host import FAKE_SCORE, FAKE_TRAIN, ITEMS, PY
from trainergym.host.confinement import Confinement
from trainergym.host.runner import Commands, Runner
from trainergym.job.result import FailureReason


@pytest.fixture
def make(tmp_path):
    (tmp_path / "train.py").write_text(FAKE_TRAIN)
    (tmp_path / "score.py").write_text(FAKE_SCORE)
    commands = Commands(
        setup=[PY, "-c", "import sys, json; open(sys.argv[1], 'a').write(json.dumps(sys.argv[2:]) + '\\n')",
               str(tmp_path / "setup.log"), "{package}", "{model}"],
        train=[PY, str(tmp_path / "train.py"), "ok", "{run_dir}"],
        score=[PY, str(tmp_path / "score.py"), "--weights", "{weights}", "--items", "{eval_file}", "--out",
               "{score_file}", "--mode", "ok", "--log", str(tmp_path / "scored.log")])

    def runner(mode, gpus=1, name="job"):
        return Runner(tmp_path / "nothing", tmp_path / name, lambda: ITEMS, "calc_chain", "Qwen/Qwen3-0.6B",
                      gpu="NVIDIA A40", gpu_count=gpus, commands=commands, host=tmp_path / "host", heartbeat_seconds=0.1,
                      confinement=Confinement.unconfined(), mode=mode)
    return runner


def test_pre_scores_the_base_model_only_and_shares_the_cache(make, tmp_path):
    result = make("pre").run()
    assert result.status == "succeeded" and (result.pre, result.post, result.eval_n) == (0.5, None, 20)
    assert result.details == {"mode": "pre", "pre_cached": False} and result.train_seconds is None
    assert json.loads((tmp_path / "setup.log").read_text()) == ["", "Qwen/Qwen3-0.6B"]  # no job package installed
    assert not (tmp_path / "job" / "outputs").exists() and not (tmp_path / "job" / "rl.toml").exists()  # nothing trained
    cache = tmp_path / "host" / "pre-cache" / "calc_chain--Qwen--Qwen3-0.6B.json"
    assert json.loads(cache.read_text()) == {"score": 0.5, "n": 20}  # what a training job's pre then reuses
    again = make("pre", name="again").run()
    assert again.pre == 0.5 and again.details["pre_cached"]
    fresh = make("pre-fresh", name="fresh").run()
    assert fresh.pre == 0.5 and not fresh.details["pre_cached"]
    assert (tmp_path / "scored.log").read_text().splitlines() == ["Qwen/Qwen3-0.6B"] * 2
    assert not list(tmp_path.rglob("items.jsonl"))


def test_a_measurement_needs_a_gpu_and_a_known_mode(make):
    result = make("pre", gpus=0).run()
    assert result.status == "failed" and result.failure is FailureReason.NO_GPU and result.failed_phase == "setup"
    with pytest.raises(ValueError, match="runner mode"):
        make("post")
