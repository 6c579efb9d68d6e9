"""The runner's orchestration with fake train and score executables: phases, heartbeats,
timeouts, failure capture, and the hidden eval kept off the host until training is over."""

import json
import sys
import time
from pathlib import Path

import pytest

from trainergym.host.runner import Commands, Runner, Timeouts

PY = sys.executable
ITEMS = [{"id": f"h{i}", "prompt": f"hidden prompt {i}", "answer": str(i)} for i in range(20)]

FAKE_TRAIN = r"""
import json, os, pathlib, sys, time
root = pathlib.Path.cwd()
mode = sys.argv[1]
# agent code would look for the hidden eval here: it must not exist yet
found = [str(p) for p in root.rglob("items.jsonl")]
(root / "train-saw.json").write_text(json.dumps(found))
run = root / "outputs" / "run"
run.mkdir(parents=True, exist_ok=True)
if mode == "oom":
    print("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"); sys.exit(1)
if mode == "crash":
    print("Traceback: trainer exploded"); sys.exit(2)
if mode == "hang":
    import subprocess
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    (root / "grandchild.pid").write_text(str(child.pid))
    time.sleep(600)
for step in range(3):
    with open(run / "metrics.jsonl", "a") as f:
        f.write(json.dumps({"step": step}) + "\n")
    time.sleep(0.2)
if mode != "no-checkpoint":
    (run / "broadcasts" / "step_3").mkdir(parents=True)
    (run / "broadcasts" / "step_3" / "STABLE").write_text("")
"""

FAKE_SCORE = r"""
import json, sys
args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
items = [json.loads(l) for l in open(args["--items"])]
if args["--mode"] == "bad":
    open(args["--out"], "w").write("{}"); sys.exit(0)
score = 0.5 if args["--weights"].startswith("Qwen/") else 0.75
with open(args["--out"], "w") as f:
    json.dump({"score": score, "n": len(items)}, f)
with open(args["--log"], "a") as f:
    f.write(args["--weights"] + "\n")
"""


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
    assert result["status"] == "succeeded" and (result["pre"], result["post"]) == (0.5, 0.75)
    assert result["eval_n"] == 20 and result["source"] == "measured" and result["stack"]["prime_rl_commit"]
    assert result["train_seconds"] > 0.5 and result["cost_usd"] > 0
    assert json.loads((tmp_path / "job" / "result.json").read_text()) == result
    status = json.loads((tmp_path / "job" / "status.json").read_text())
    assert status["phase"] == "done" and status["progress"]["step"] == 2
    assert json.loads((tmp_path / "job" / "train-saw.json").read_text()) == []  # no hidden eval during training
    assert not list((tmp_path / "job").rglob("items.jsonl"))  # and none left after scoring
    assert fetches and fetches[0] > (tmp_path / "job" / "train-saw.json").stat().st_mtime
    fakes().run()
    scored = (tmp_path / "scored.log").read_text().splitlines()
    assert scored.count("Qwen/Qwen3-1.7B") == 1  # pre is cached per model and family


@pytest.mark.parametrize("train_mode, setup, reason", [
    ("oom", ("true",), "out of memory"),
    ("crash", ("true",), "trainer crashed (exit status 2)"),
    ("no-checkpoint", ("true",), "no checkpoint"),
    ("ok", ("false",), "install failed"),
    ("ok", ("/nonexistent/bootstrap",), "install failed"),
])
def test_failures_are_named(fakes, train_mode, setup, reason):
    result = fakes(train_mode=train_mode, setup=setup).run()
    assert result["status"] == "failed" and reason in result["failure_reason"], result
    assert result["post"] is None and result["log_tail"]


def test_bad_score_is_an_eval_failure(fakes):
    result = fakes(score_mode="bad").run()
    assert result["status"] == "failed" and result["failure_reason"].startswith("eval failed")


def test_timeout_kills_the_whole_phase(fakes, tmp_path):
    result = fakes(train_mode="hang", timeouts=Timeouts(train=2)).run()
    assert result["failure_reason"] == "train timed out after 2 s"
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
