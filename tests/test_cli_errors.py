"""Every subcommand given bad input fails in one line: exit status 2, no traceback, a message that
names the bad value and what to do, and nothing created or changed."""

import json

import pytest
from typer.testing import CliRunner

from tests.pages import external_resources
from trainergym.cli import app


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad")
    (root / "bad.toml").write_text('id = "x"\n[bounds\n')
    (root / "nofamily.toml").write_text('id = "x"\n')
    (root / "job").mkdir()
    return root


def _mini(says: str) -> str:
    """What a mini command says: `says` where the mini extra is installed, else that it is needed."""
    import importlib.util

    return says if importlib.util.find_spec("trl") else "the mini backend needs the mini extra: uv sync --extra mini"


CASES = [  # (arguments, what the message must say)
    (["episode", "--family", "nosuch"], "unknown family 'nosuch'; installed: calc_chain"),
    (["episode", "--task", "{root}/missing.toml"], "missing.toml does not exist"),
    (["episode", "--task", "{root}/bad.toml"], "bad.toml is not valid TOML"),
    (["episode", "--task", "{root}/nofamily.toml"], "names no `family`"),
    (["episode", "--family", "calc_chain", "--task", "{root}/bad.toml"], "give --task or --family, not both"),
    (["episode", "--agent", "nosuch"], "nosuch"),
    (["episode", "--backend", "nosuch"], "unknown backend 'nosuch'"),
    (["episode", "--base-model", "{root}/job"], "--base-model is the mini backend's (--backend mini), not mock's"),
    (["episode", "--backend", "mini", "--base-model", "{root}/job"], _mini("is not a Hugging Face model directory")),
    (["mini", "build-base", "--family", "nosuch"], _mini("unknown family 'nosuch'")),
    (["mini", "build-base", "--family", "calc_chain", "--scale", "huge"], _mini("unknown mini scale 'huge'")),
    (["episode", "--runs-dir", "/proc/runs"], "--runs-dir /proc/runs cannot be created"),
    (["episode", "--agent", "llm", "--prices", "{root}/missing.toml"], "--prices {root}/missing.toml cannot be read"),
    (["episode", "--agent", "llm", "--budget-usd", "-1"], "--budget-usd"),
    (["batch", "--n", "-3"], "--n"),
    (["batch", "--concurrency", "0"], "--concurrency"),
    (["batch", "--max-gpu-jobs", "0"], "--max-gpu-jobs"),
    (["eval-agent", "--family", "nosuch"], "unknown family 'nosuch'"),
    (["eval-agent", "--n", "-1"], "--n"),
    (["probe", "{root}/job", "--family", "nosuch"], "unknown family 'nosuch'"),
    (["probe", "{root}/job", "--task", "{root}/missing.toml"], "missing.toml does not exist"),
    (["probe", "{root}/missing", "--family", "calc_chain"], "missing is not a directory"),
    (["submit", "{root}/job"], "--family"),
    (["submit", "{root}/missing", "--family", "calc_chain"], "missing is not a directory"),
    (["jobs", "--db", "{root}/nowhere/jobs.db"], "nowhere does not exist"),
    (["jobs", "--state", "bogus", "--db", "{root}/jobs.db"], "--state 'bogus' is not a job state; use one of queued"),
    (["jobs", "nosuchjob", "--db", "{root}/jobs.db"], "no job 'nosuchjob'"),
    (["worker", "--backend", "nosuch"], "unknown worker backend 'nosuch'"),
    (["worker", "--ladder", "{root}/missing.toml", "--db", "{root}/jobs.db"], "not a ladder of [[rung]] tables"),
    (["worker", "--db", "{root}/nowhere/jobs.db"], "nowhere does not exist"),
    (["costs", "--episode", "nope"], "no entries for episode 'nope'"),
    # The option parser's own errors, in the same one line (they once came as a usage banner and a box).
    (["episode", "--famly", "calc_chain"], "No such option: --famly"),
    (["show"], "Missing argument 'run'; `trainergym show --help`"),
    (["batch", "--n", "many"], "Invalid value for '--n': Input should be a valid integer"),
    (["baselines", "measure", "--bogus"], "trainergym baselines measure: No such option: --bogus"),
]


@pytest.mark.parametrize("args, says", CASES, ids=[" ".join(a) for a, _ in CASES])
def test_bad_input_fails_in_one_line(files, monkeypatch, args, says):
    monkeypatch.delenv("RUNPOD_API_KEY", raising=False)
    args = [a.format(root=files) for a in args]
    result = CliRunner().invoke(app, args, prog_name="trainergym")
    assert result.exit_code == 2, (result.stdout, result.stderr, result.exception)
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.stderr and says.format(root=files) in " ".join(result.stderr.split()), result.stderr
    assert result.stderr.startswith("error: ") and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not (files / "nowhere").exists()  # a typo creates nothing


def test_a_dead_model_endpoint_is_a_crash_not_a_bad_agent(tmp_path, monkeypatch):
    # Once: "total -0.100, no parseable submission", exit 0; the cause only in --json.
    monkeypatch.setenv("OPENROUTER_API_KEY", "k")
    dead = ["--agent", "llm", "--base-url", "http://127.0.0.1:9/v1", "--runs-dir", str(tmp_path)]  # nothing listens on 9
    result = CliRunner().invoke(app, ["episode", *dead, "--json"])
    assert result.exit_code == 1, (result.stdout, result.stderr)
    out = json.loads(result.stdout)
    assert out["crashed"].startswith("the model endpoint failed after 5 retries: APIConnectionError")


def test_show_prints_an_episode_and_writes_html(tmp_path):
    result = CliRunner().invoke(app, ["episode", "--json", "--runs-dir", str(tmp_path)])
    run = json.loads(result.stdout)["run_dir"]
    shown = CliRunner().invoke(app, ["show", run, "--html", str(tmp_path / "ep.html")])
    assert shown.exit_code == 0, shown.stderr
    text = shown.stdout
    for part in ("TASK calc_chain", "call submit_job", "the job (workspace/job.toml)", "the job's result (surrogate)",
                 "best_pre_source: reported", "total:"):
        assert part in text, part
    page = (tmp_path / "ep.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "call submit_job" in page
    assert external_resources(page) == []  # self-contained: opens offline, fetches nothing
    missing = CliRunner().invoke(app, ["show", str(tmp_path / "nope")])
    assert missing.exit_code == 2 and "not an episode's run folder" in missing.stderr


def test_reset_refuses_an_unknown_option():
    import asyncio

    from trainergym import AsyncTrainerEnv

    env = AsyncTrainerEnv()
    with pytest.raises(ValueError, match="unknown reset option.*'famly'"):
        asyncio.run(env.reset(options={"famly": "ledger"}))
    env.close()
