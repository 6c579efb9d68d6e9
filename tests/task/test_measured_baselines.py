"""Measured baselines: `trainergym baselines measure` through the local backend on a fake GPU host
(a fake nvidia-smi, the fake scorer as TRAINERGYM_HOST_COMMANDS' score phase), the file it
writes (0600, measured rows with Wilson intervals, date, stack, backend, n, a MAC), the precedence
`for_family`/`best_pre` give it over the packaged rows, refusals in one line, and an env episode
whose reward is paid against the measured bar. Every test has a data directory of its own: the
session's is shared, and a measured file there would move every other test's best_pre."""

import asyncio
import datetime
import hashlib
import json
import os
import shutil
import tomllib

import pytest
from typer.testing import CliRunner

from tests.fakes.gpu_host import fake_commands, fake_nvidia_smi
from trainergym.backends.measure import baselines_app, short_stack
from trainergym.job.stack import PIN
from trainergym.paths import data_dir, default_workdir
from trainergym.task import baselines, hidden
from trainergym.task.baselines import Baseline, BaselineFileError, wilson_interval

MODELS = ["Qwen/Qwen3-1.7B", "Qwen/Qwen3-0.6B"]


@pytest.fixture
def data(tmp_path, monkeypatch):
    """A data directory of the test's own (0700, as the library creates it)."""
    monkeypatch.setenv("TRAINERGYM_DATA_DIR", str(tmp_path / "data"))
    return data_dir()


@pytest.fixture
def gpu_host(tmp_path, monkeypatch, data):
    """This process as a fake GPU host: two A40s by nvidia-smi, FAKE_SCORE (0.5 for a base
    model, its scored weights logged to fakes/s.log) as the score phase, setup a no-op. Yields
    the log; the local worker's work directory (outside tmp as root) is removed afterwards."""
    (tmp_path / "bin").mkdir()
    fake_nvidia_smi(tmp_path / "bin")
    (tmp_path / "fakes").mkdir()
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("TRAINERGYM_HOST_COMMANDS", json.dumps(fake_commands(tmp_path / "fakes")))
    workdir = default_workdir()
    yield tmp_path / "fakes" / "s.log"
    shutil.rmtree(workdir, ignore_errors=True)


def invoke(*argv):
    return CliRunner().invoke(baselines_app, list(argv), catch_exceptions=False)


def one_line_error(out, *words):
    assert out.exit_code == 2, (out.stdout, out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), out.stderr
    assert "Traceback" not in out.stdout + out.stderr
    for word in words:
        assert word in lines[0], lines[0]


def packaged_digest():
    return hashlib.sha256(baselines.BASELINES_FILE.read_bytes()).hexdigest()


def test_measure_through_the_local_backend(gpu_host):
    before = packaged_digest()
    assert baselines.best_pre("calc_chain").source == "reported"
    out = invoke("measure", "--family", "calc_chain", "--model", MODELS[0], "--model", MODELS[1], "--backend", "local",
                 "--json")
    assert out.exit_code == 0, (out.stdout, out.stderr)
    shown = json.loads(out.stdout)
    assert shown["failed"] == {} and [r["model"] for r in shown["written"]] == MODELS
    # The family's own scorer scored each base model (not a bundle's weights), once each.
    assert gpu_host.read_text().splitlines() == MODELS

    path = data_dir() / "baselines.toml"
    assert shown["file"] == str(path)
    assert path.stat().st_mode & 0o777 == 0o600 and path.stat().st_uid == os.geteuid()
    file = tomllib.loads(path.read_text())
    assert file["version"] == 1 and len(file["mac"]) == 64
    for row, model in zip(file["baseline"], MODELS):
        assert (row["family"], row["model"], row["source"], row["backend"]) == ("calc_chain", model, "measured", "local")
        assert (row["score"], row["n"]) == (0.5, 200)  # FAKE_SCORE, over the whole hidden eval
        assert tuple(row["ci95"]) == wilson_interval(0.5, 200)
        assert row["stack"] == short_stack(PIN) and PIN.prime_rl_commit[:7] in row["stack"]
        when = datetime.datetime.strptime(row["date"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)
        assert abs((datetime.datetime.now(datetime.UTC) - when).total_seconds()) < 600
        assert "2x NVIDIA A40" in row["note"] and "cached" not in row["note"]

    # The lookups prefer them over the packaged rows; the packaged file is untouched.
    rows = baselines.for_family("calc_chain")
    assert [(b.model, b.source, b.score) for b in rows] == [(m, "measured", 0.5) for m in MODELS]
    best = baselines.best_pre("calc_chain")
    assert (best.score, best.source, best.backend) == (0.5, "measured", "local")
    assert baselines.score("calc_chain", MODELS[1]).source == "measured"
    assert baselines.best_pre("multi_hop").source == "reported"  # other families keep theirs
    assert packaged_digest() == before
    # The hidden eval went to the scorer only, and is gone.
    assert not list(default_workdir().rglob("items.jsonl"))

    # Again: the host's pre-score cache answers (as a job's pre would); --fresh scores again.
    again = invoke("measure", "--family", "calc_chain", "--model", MODELS[0], "--backend", "local")
    assert again.exit_code == 0, again.stderr
    assert "best_pre of calc_chain: 0.500" in again.stdout and "measured" in again.stdout
    assert gpu_host.read_text().splitlines() == MODELS
    assert "cached pre-score" in baselines.score("calc_chain", MODELS[0]).note
    fresh = invoke("measure", "--family", "calc_chain", "--model", MODELS[0], "--backend", "local", "--fresh")
    assert fresh.exit_code == 0, fresh.stderr
    assert gpu_host.read_text().splitlines() == [*MODELS, MODELS[0]]
    assert len(tomllib.loads(path.read_text())["baseline"]) == 2  # replaced, not duplicated

    listed = invoke("show", "--family", "calc_chain")
    assert listed.exit_code == 0 and listed.stdout.count("measured, local") == 2 and "<- best_pre" in listed.stdout


def test_a_failed_measurement_writes_nothing(gpu_host, tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINERGYM_HOST_COMMANDS", json.dumps(fake_commands(tmp_path / "fakes", score_mode="bad")))
    out = invoke("measure", "--family", "calc_chain", "--model", MODELS[0], "--backend", "local")
    assert out.exit_code == 1 and "eval failed" in out.stderr
    assert not (data_dir() / "baselines.toml").exists()
    assert baselines.best_pre("calc_chain").source == "reported"


@pytest.mark.parametrize("argv, words", [
    (["--family", "nope", "--backend", "local"], ["unknown family 'nope'"]),
    (["--family", "calc_chain", "--model", "Qwen/Qwen3-8B", "--backend", "local"], ["unknown model", "Qwen/Qwen3-8B"]),
    (["--family", "calc_chain", "--backend", "mock"], ["surrogates"]),
    (["--family", "calc_chain", "--backend", "tpu"], ["unknown backend"]),
])
def test_unknown_family_model_or_backend_is_refused_in_one_line(data, argv, words):
    one_line_error(invoke("measure", *argv), *words)


def test_a_backend_that_cannot_run_here_is_refused_in_one_line(data, tmp_path, monkeypatch):
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))  # no nvidia-smi
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    one_line_error(invoke("measure", "--family", "calc_chain", "--backend", "local"), "nvidia-smi finds none")
    fake_nvidia_smi(tmp_path / "bin", status=9)  # the driver is gone
    one_line_error(invoke("measure", "--family", "calc_chain", "--backend", "local"), "nvidia-smi finds none")
    monkeypatch.delenv("RUNPOD_API_KEY", raising=False)
    one_line_error(invoke("measure", "--family", "calc_chain", "--backend", "runpod"), "RUNPOD_API_KEY")
    assert not (data_dir() / "baselines.toml").exists()


# --- the file ------------------------------------------------------------------------------------
def measured(family="calc_chain", model="Qwen/Qwen3-1.7B", score=0.6, n=200, **kw):
    row = dict(family=family, model=model, score=score, n=n, source="measured", date="2026-08-22T00:00:00Z",
               stack=short_stack(), eval=hidden.eval_fingerprint(family), backend="local")
    return Baseline(**{**row, **kw})


@pytest.mark.parametrize("why", ["another stack", "another hidden eval", "no eval recorded"])
def test_a_stale_row_is_not_the_bar_and_is_shown_as_stale(data, monkeypatch, why):
    # A row measured under another scorer or eval (an upgrade, a regenerated hidden seed, an older
    # release's file) would otherwise keep paying rewards against its figure.
    low = {"another stack": measured(score=0.3, stack="prime-rl 0000000, verifiers 0.0.1 (0000000), python 3.10"),
           "another hidden eval": measured(score=0.3),
           "no eval recorded": measured(score=0.3, eval=None)}[why]
    baselines.write_measured([low])
    if why == "another hidden eval":
        assert baselines.score("calc_chain", "Qwen/Qwen3-1.7B").score == 0.3  # in effect while the eval is the same
        monkeypatch.setenv("TRAINERGYM_HIDDEN_SEED", "a regenerated hidden eval, 32 chars or more")
    assert baselines.score("calc_chain", "Qwen/Qwen3-1.7B").source == "reported"
    assert baselines.best_pre("calc_chain").score == 0.742
    shown = invoke("show", "--family", "calc_chain")
    assert shown.exit_code == 0 and "stale, not used" in shown.stdout, shown.stdout
    (row,) = json.loads(invoke("show", "--family", "calc_chain", "--json").stdout)["stale"]["calc_chain"]
    assert row["score"] == 0.3 and row["why"]


def test_precedence_replaces_in_place_and_adds_what_the_package_lacks(data, monkeypatch):
    real = hidden.eval_fingerprint  # "seventh" stands for a family installed later, with an eval of its own
    monkeypatch.setattr(hidden, "eval_fingerprint", lambda f: "0123456789abcdef" if f == "seventh" else real(f))
    baselines.write_measured([measured(model="Qwen/Qwen3-0.6B", score=0.31)])
    rows = baselines.for_family("calc_chain")
    assert [(b.model, b.source) for b in rows] == [("Qwen/Qwen3-1.7B", "reported"), ("Qwen/Qwen3-0.6B", "measured")]
    assert baselines.best_pre("calc_chain").source == "reported"  # the reported 0.742 is still the best
    # A family the package has no baselines for (one installed later): the measured rows are its baselines.
    with pytest.raises(KeyError):
        baselines.best_pre("seventh")
    baselines.write_measured([measured(family="seventh", score=0.4), measured(family="seventh", model="Qwen/Qwen3-0.6B",
                                                                           score=0.2)])
    assert [b.model for b in baselines.for_family("seventh")] == ["Qwen/Qwen3-1.7B", "Qwen/Qwen3-0.6B"]
    assert baselines.best_pre("seventh").score == 0.4
    assert len(baselines.load_measured()) == 3  # merged, the calc_chain row kept


def test_the_writer_accepts_only_measured_rows_of_allowed_models(data):
    with pytest.raises(ValueError, match="only measured rows"):
        baselines.write_measured([Baseline(family="calc_chain", model="Qwen/Qwen3-1.7B", score=0.9, n=200,
                                           source="reported")])
    with pytest.raises(ValueError, match="not an allowed base model"):
        baselines.write_measured([measured(model="Qwen/Qwen3-8B")])
    assert not baselines.measured_path().exists()


def tamper(path, old, new):
    path.write_text(path.read_text().replace(old, new, 1))


@pytest.mark.parametrize("how, words", [
    ("edited", ["do not match the MAC"]),
    ("readable", ["must be yours and 0600"]),
    ("symlink", ["symbolic link"]),
    ("not toml", ["not valid TOML"]),
    ("no mac", ["not a measured-baselines file"]),
    ("other installation", ["do not match the MAC"]),
    ("signed reported row", ["only measured rows"]),
])
def test_a_malformed_or_tampered_file_is_refused_in_one_line(data, tmp_path, monkeypatch, how, words):
    path = baselines.write_measured([measured(score=0.2)])
    if how == "edited":  # a lower bar pays every job more uplift
        tamper(path, "score = 0.2", "score = 0.05")
    elif how == "readable":
        path.chmod(0o644)
    elif how == "symlink":
        elsewhere = tmp_path / "elsewhere.toml"
        path.rename(elsewhere)
        path.symlink_to(elsewhere)
    elif how == "not toml":
        path.write_text("[[baseline\n")
    elif how == "no mac":
        tamper(path, "mac = ", "signature = ")
    elif how == "other installation":  # a file signed elsewhere, copied here
        monkeypatch.setenv("TRAINERGYM_INSTALL_SECRET", "0" * 64)
        other = baselines.write_measured([measured(score=0.05)], tmp_path / "other.toml")
        monkeypatch.undo()
        monkeypatch.setenv("TRAINERGYM_DATA_DIR", str(data))
        shutil.copy(other, path)
    elif how == "signed reported row":  # even with a valid MAC, only measured rows are read
        row = {**measured().model_dump(mode="json", exclude_none=True), "source": "reported"}
        import tomli_w

        path.write_text(tomli_w.dumps({"version": 1, "mac": baselines._mac([row]), "baseline": [row]}))
    for lookup in (baselines.best_pre, baselines.for_family):
        with pytest.raises(BaselineFileError) as refused:
            lookup("calc_chain")
        message = str(refused.value)
        assert "\n" not in message and str(path) in message and all(w in message for w in words), message
    one_line_error(invoke("show"), *words)
    if how == "symlink":  # never written through: measure says so before spending GPU time
        one_line_error(invoke("measure", "--family", "calc_chain", "--backend", "local"), *words)


def test_a_new_measurement_replaces_a_refused_file(gpu_host):
    path = baselines.write_measured([measured(score=0.2), measured(model="Qwen/Qwen3-0.6B", score=0.1)])
    tamper(path, "score = 0.2", "score = 0.01")
    with pytest.raises(BaselineFileError):
        baselines.load_measured()
    out = invoke("measure", "--family", "calc_chain", "--model", MODELS[0], "--backend", "local")
    assert out.exit_code == 0, out.stderr
    assert "is refused (its rows do not match the MAC" in out.stderr and "replace it" in out.stderr
    # The fresh row alone: nothing of the refused file is trusted.
    assert [(b.model, b.score) for b in baselines.load_measured()] == [(MODELS[0], 0.5)]
    assert path.stat().st_mode & 0o777 == 0o600


# --- the reward ----------------------------------------------------------------------------------
def test_an_episode_pays_against_the_measured_bar(data, tmp_path):
    from trainergym import AsyncTrainerEnv
    from trainergym.agents import make_agent, run_episode
    from trainergym.backends import make_backend

    baselines.write_measured([measured(score=0.6), measured(model="Qwen/Qwen3-0.6B", score=0.4)])
    env = AsyncTrainerEnv(backend=make_backend("mock", seed=0), runs_dir=tmp_path / "runs")
    info = asyncio.run(run_episode(env, make_agent("reference"), seed=0))
    r = info["reward_breakdown"]
    assert r["best_pre"] == 0.6 and r["uplift"] == pytest.approx(r["post"] - 0.6)  # not the reported 0.742
    assert info["result"]["pre"] == 0.6  # the mock's untrained score of the job's model is the measured one too
    # The agent's lookup shows each row's source.
    seen = [row for row in env.episode.trajectory if "get_baseline_scores" in json.dumps(row, default=str)]
    shown = json.dumps(seen, default=str)
    assert seen and '\\"source\\": \\"measured\\"' in shown and '\\"best_pre\\": 0.6' in shown
    env.close()
    assert r["best_pre_source"] == "measured"


def test_the_cli_mounts_the_sub_app(data):
    """`trainergym baselines ...` is the CLI's."""
    from trainergym.cli import app

    out = CliRunner().invoke(app, ["baselines", "show", "--family", "calc_chain", "--json"])
    assert out.exit_code == 0, out.stderr
    assert {b["source"] for b in json.loads(out.stdout)["baselines"]["calc_chain"]} == {"reported", "surrogate"}
