"""`trainergym report`: figures of a real batch, single episodes and training logs, checked against
the numbers they were drawn from (the JSON written beside each PNG, and the Figure objects)."""

import base64
import json
import statistics
import sys

import pytest
from typer.testing import CliRunner

from tests.marks import import_extra
from tests.pages import external_resources
from trainergym.agents import report as R
from trainergym.agents.batch import EpisodeSummary, read_summary, write_summary
from trainergym.agents.compare import bootstrap_ci
from trainergym.cli import app

import_extra("matplotlib", "trainergym report", "report")
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def batch_dir(tmp_path_factory):
    """A real batch from the CLI: 4 reference episodes of calc_chain on the mock backend."""
    runs = tmp_path_factory.mktemp("runs")
    out = CliRunner().invoke(app, ["batch", "--n", "4", "--family", "calc_chain", "--runs-dir", str(runs)])
    assert out.exit_code == 0, out.output
    (folder,) = runs.glob("batch-*")
    return folder


def tinker_log(folder):
    """metrics.jsonl as tinker-cookbook 0.6.1 writes it: training rows (env/all, per-tag) and the
    evaluation loop's rows (test/... plus its eval/by_step aliases), a torn last line."""
    folder.mkdir()
    rows = []
    for step in range(6):
        rows.append({"step": step, "env/all/reward/total": 0.1 * step, "env/calc_chain/reward/total": 0.1 * step + 0.05,
                     "env/ledger/reward/total": 0.1 * step - 0.05, "env/trainergym/reward/total": 0.1 * step,
                     "optim/lr": 4e-5})
        if step % 2 == 0:
            rows.append({"step": step, "test/env/all/reward/total": 0.05 * step, "eval/by_step/test/env/all/reward/total":
                         0.05 * step, "eval/snapshot/training_step": step})
    (folder / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + '\n{"step": 6, "env/all/rew')
    (folder / "config.json").write_text(json.dumps({"dataset_builder": {"backend": "mock", "families": ["calc_chain"]}}))
    return folder / "metrics.jsonl"


def trl_output(folder):
    """A GRPOTrainer output dir: two checkpoints' trainer_state.json, the later with more history."""
    def state(last):
        history = [{"loss": 0.0, "reward": 0.2 + 0.05 * s, "reward_std": 0.1, "rewards/get_reward/mean": 0.2 + 0.05 * s,
                    "step": s, "epoch": s / 10} for s in range(1, last + 1)]
        history += [{"eval_reward": 0.1 + 0.02 * s, "eval_loss": 0.0, "step": s} for s in range(2, last + 1, 2)]
        return {"global_step": last, "log_history": history}
    for last in (4, 10):
        (folder / f"checkpoint-{last}").mkdir(parents=True)
        (folder / f"checkpoint-{last}" / "trainer_state.json").write_text(json.dumps(state(last)))
    return folder


def test_a_batch_and_two_training_logs_make_every_figure_from_the_summarys_numbers(batch_dir, tmp_path):
    metrics, trl = tinker_log(tmp_path / "tinker"), trl_output(tmp_path / "trl")
    out = tmp_path / "report"
    written = R.report([batch_dir, metrics, trl], out)
    html = (out / "report.html").read_text()
    assert written[-1] == out / "report.html" and external_resources(html) == []  # opens offline
    pngs = [p for p in written if p.suffix == ".png"]
    assert {p.stem.split("_")[0] for p in pngs} >= {"reward", "post", "cost", "training"} and len(pngs) == 6
    for png in pngs:
        data = png.read_bytes()
        assert data.startswith(PNG) and len(data) > 5000
        assert base64.b64encode(data).decode() in html  # self-contained: the very image, inlined
        assert png.with_suffix(".json").is_file()

    rows = read_summary(batch_dir)["episodes"]
    load = lambda name: json.loads((out / f"{name}.json").read_text())  # noqa: E731
    decomposition = load("reward_decomposition")
    assert decomposition["episode_id"] == [r["episode_id"] for r in rows]
    for i, r in enumerate(rows):
        assert decomposition["validation"][i] == pytest.approx(0.35 * r["r_validation"])
        assert decomposition["quality"][i] == pytest.approx(0.60 * r["r_job_quality"])
        assert decomposition["speed"][i] == pytest.approx(0.05 * r["r_speed"])
        assert decomposition["total"][i] == pytest.approx(r["reward"]) and decomposition["other"][i] == 0.0
    assert "surrogate" in decomposition["title"]

    (family,) = load("reward_by_family")["families"]
    rewards = [r["reward"] for r in rows]
    assert family["family"] == "calc_chain" and family["n"] == 4 and family["mean"] == pytest.approx(statistics.fmean(rewards))
    assert (family["ci95_low"], family["ci95_high"]) == pytest.approx(bootstrap_ci(rewards))  # trainergym compare's interval
    assert family["ci95_low"] <= family["mean"] <= family["ci95_high"]

    (post,) = load("post_vs_pre")["families"]
    assert post["best_pre"] == pytest.approx(rows[0]["r_best_pre"]) and post["n_post"] == 4
    assert post["post"] == pytest.approx(statistics.fmean(r["r_post"] for r in rows))
    assert post["pre"] is not None  # the mock's result records its base model's pre
    assert "surrogate" in load("post_vs_pre")["title"]

    cost = load("cost")
    assert cost["gpu_surrogate_usd"] == pytest.approx([r["gpu_usd"] for r in rows]) and not any(cost["gpu_measured_usd"])
    assert "SURROGATE" in cost["title"] and "SURROGATE" in html

    (tinker_json,) = [load(p.stem) for p in pngs if "tinker" in p.stem]
    assert tinker_json["train"]["values"] == pytest.approx([0.1 * s for s in range(6)])
    assert list(tinker_json["held_out"]) == ["test/env/all/reward/total"]  # not its eval/by_step alias too
    assert tinker_json["held_out"]["test/env/all/reward/total"]["steps"] == [0, 2, 4]
    assert set(tinker_json["per_tag"]) == {"calc_chain", "ledger"}
    assert "surrogate" in tinker_json["title"]  # config.json names the mock backend
    (trl_json,) = [load(p.stem) for p in pngs if "trl" in p.stem]
    assert trl_json["train"]["steps"] == list(range(1, 11))  # the latest checkpoint's history
    assert trl_json["held_out"]["eval_reward"]["values"] == pytest.approx([0.1 + 0.02 * s for s in range(2, 11, 2)])
    assert "not recorded" in trl_json["title"]


def test_the_figures_hold_the_plotted_data_and_are_reproducible(batch_dir, tmp_path):
    metrics = tinker_log(tmp_path / "tinker")
    plots = R.build(R.load([batch_dir, metrics]), seed=0)
    by_name = {p.name: p for p in plots}
    rows = read_summary(batch_dir)["episodes"]
    ax = by_name["reward_decomposition"].figure.axes[0]
    first = ax.containers[0]  # the 0.35·validation bars
    assert [b.get_height() for b in first] == pytest.approx([0.35 * r["r_validation"] for r in rows])
    (training,) = [p for p in plots if p.name.startswith("training")]
    line = training.figure.axes[0].get_lines()[0]
    assert list(line.get_ydata()) == pytest.approx([0.1 * s for s in range(6)])
    one, two = R.report([batch_dir], tmp_path / "a"), R.report([batch_dir], tmp_path / "b")
    assert [p.read_bytes() for p in one[:-1]] == [p.read_bytes() for p in two[:-1]]  # seeded, no timestamps


def test_an_episode_folder_is_a_one_row_summary_and_counts_once(batch_dir, tmp_path):
    rows = read_summary(batch_dir)["episodes"]
    row = R.episode_row(batch_dir / rows[0]["episode_id"])
    for key in ("episode_id", "task", "family", "seed", "reward", "validated", "job_succeeded", "turns", "source",
                "gpu_usd", *(f"r_{k}" for k in R.TERMS)):
        assert row[key] == rows[0][key], key
    data = R.load([batch_dir, batch_dir / rows[0]["episode_id"], batch_dir / rows[1]["episode_id"] / "reward.json"])
    assert len(data.rows) == 4
    alone = R.load([batch_dir / rows[2]["episode_id"]])
    assert [r["episode_id"] for r in alone.rows] == [rows[2]["episode_id"]]


def test_crashes_no_submissions_and_measured_jobs_are_drawn_as_what_they_are(tmp_path):
    terms = {"validation": 1.0, "post": 0.8, "best_pre": 0.742, "job_quality": 0.3, "speed": 0.5, "total": 0.4}
    rows = [EpisodeSummary("m-0", "calc_chain", 0, 0.35 + 0.18 + 0.025, True, True, 7, None, 1.0, usd=0.12,
                           source="measured", family="calc_chain", terms=terms, gpu_usd=3.5),
            EpisodeSummary("s-1", "ledger", 1, 0.35, True, True, 7, None, 1.0, source="surrogate", family="ledger",
                           terms={**terms, "job_quality": 0.0, "speed": 0.0}, gpu_usd=0.9),
            EpisodeSummary("n-2", "ledger", 2, -0.1, False, False, 40, "no parseable submission", 1.0, family="ledger"),
            EpisodeSummary("x-3", "ledger", 3, float("nan"), False, False, 2, None, 1.0, error="endpoint down",
                           family="ledger")]
    folder = tmp_path / "batch-x"
    folder.mkdir()
    write_summary(folder, rows, {"agent": "llm", "backend": "mixed"})
    out = tmp_path / "report"
    R.report([folder / "summary.json"], out)
    d = json.loads((out / "reward_decomposition.json").read_text())
    assert d["crashed"] == [False, False, False, True] and d["total"][3] is None
    assert d["other"][2] == pytest.approx(-0.1) and d["total"][2] == pytest.approx(-0.1)
    assert "mixed" in d["title"] and "1 measured" in d["title"]
    fam = {f["family"]: f for f in json.loads((out / "reward_by_family.json").read_text())["families"]}
    assert fam["ledger"]["n"] == 2 and fam["ledger"]["crashed"] == 1  # the crash is apart, not a zero
    cost = json.loads((out / "cost.json").read_text())
    assert cost["gpu_measured_usd"] == [3.5, 0, 0, 0] and cost["gpu_surrogate_usd"] == [0, 0.9, 0, 0]
    assert cost["llm_usd"][0] == 0.12 and "measured" in cost["title"] and "SURROGATE" in cost["title"]
    assert "endpoint down" in (out / "report.html").read_text()


@pytest.mark.parametrize("make, says", [
    (lambda p: p / "missing", "no such file"),
    (lambda p: (p / "empty").mkdir() or p / "empty", "not a batch"),
    (lambda p: (p / "x.txt").write_text("hi") and p / "x.txt", "not a batch"),
    (lambda p: (p / "x.json").write_text("{}") and p / "x.json", "neither a batch"),
    (lambda p: (p / "m.jsonl").write_text('{"step": 1, "loss": 2}') and p / "m.jsonl", "not a tinker-cookbook"),
    (lambda p: (p / "trainer_state.json").write_text('{"log_history": [{"loss": 1, "step": 1}]}') and p, "not a GRPOTrainer"),
])
def test_anything_else_is_refused_in_one_line(tmp_path, make, says):
    with pytest.raises(R.ReportError) as e:
        R.report([make(tmp_path)], tmp_path / "out")
    assert says in str(e.value) and "\n" not in str(e.value)


def test_without_matplotlib_it_says_what_to_install(monkeypatch, tmp_path, batch_dir):
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.setitem(sys.modules, name, None)  # as if never installed: every import of it fails
    with pytest.raises(R.ReportError) as e:
        R.report([batch_dir], tmp_path / "out")
    assert "pip install 'trainergym[report]'" in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "out").exists()


def test_the_cli_writes_the_report(batch_dir, tmp_path):
    metrics = tinker_log(tmp_path / "tinker")
    out = CliRunner().invoke(app, ["report", str(batch_dir), str(metrics), "--out", str(tmp_path / "r")])
    assert out.exit_code == 0, out.output
    assert (tmp_path / "r" / "report.html").is_file() and len(list((tmp_path / "r").glob("*.png"))) == 5
    bad = CliRunner().invoke(app, ["report", str(tmp_path / "missing"), "--out", str(tmp_path / "r2")])
    assert bad.exit_code != 0 and "no such file" in bad.output
