"""Comparing agents from their batches: bootstrap intervals, crashes apart, significance."""

import json
import random
import statistics

from typer.testing import CliRunner

from trainergym.agents.batch import EpisodeSummary, write_summary
from trainergym.agents.compare import bootstrap_ci, compare, difference_ci
from trainergym.cli import app


def batch(tmp_path, name, rewards, family="calc_chain", crashed=0, agent="a"):
    rows = [EpisodeSummary(f"{name}-{i}", family, i, r, r > 0.3, True, 5, None, 1.0, family=family)
            for i, r in enumerate(rewards)]
    rows += [EpisodeSummary(f"{name}-x{i}", family, 99, 0.0, False, False, 0, None, 1.0, error="endpoint down",
                            family=family) for i in range(crashed)]
    folder = tmp_path / name
    folder.mkdir()
    write_summary(folder, rows, {"agent": agent})
    return folder


def test_the_bootstrap_interval_holds_the_mean_and_narrows_with_n():
    rng = random.Random(1)
    small = [rng.gauss(0.5, 0.1) for _ in range(10)]
    large = [rng.gauss(0.5, 0.1) for _ in range(400)]
    lo, hi = bootstrap_ci(small)
    assert lo < statistics.fmean(small) < hi
    assert (bootstrap_ci(large)[1] - bootstrap_ci(large)[0]) < (hi - lo) / 3  # ~ 1/sqrt(n)
    assert bootstrap_ci(small) == bootstrap_ci(small)  # seeded: the same batches, the same intervals
    assert bootstrap_ci([0.7]) == (0.7, 0.7)


def test_a_real_difference_is_significant_and_noise_is_not():
    rng = random.Random(2)
    a = [rng.gauss(0.5, 0.1) for _ in range(40)]
    diff, lo, hi = difference_ci(a, [x + 0.2 for x in a])
    assert abs(diff - 0.2) < 1e-9 and 0 < lo < 0.2 < hi
    _, lo, hi = difference_ci(a, [rng.gauss(0.5, 0.1) for _ in range(40)])
    assert lo < 0 < hi


def test_compare_counts_crashes_apart_and_marks_significance(tmp_path):
    first = batch(tmp_path, "ref", [0.6, 0.65, 0.7, 0.62, 0.68], agent="reference")
    second = batch(tmp_path, "naive", [0.1, 0.0, 0.05, 0.12], crashed=2, agent="naive")
    out = CliRunner().invoke(app, ["compare", str(first), str(second / "summary.json"), "--json"])
    assert out.exit_code == 0, out.output
    result = json.loads(out.stdout)
    assert result["batches"][0].startswith("reference (ref)")
    ref, naive = result["families"]["all"]
    assert ref["n"] == 5 and naive["n"] == 4 and naive["crashed"] == 2  # crashes are not in n, the mean or the share
    assert naive["mean"] == statistics.fmean([0.1, 0.0, 0.05, 0.12]) and naive["validated"] == 0.0
    assert naive["diff"][0] < 0 and naive["significant"] and ref["diff"] is None
    table = CliRunner().invoke(app, ["compare", str(first), str(second)])
    assert "diff" in table.stdout and "*" in table.stdout


def test_compare_per_family(tmp_path):
    mixed = batch(tmp_path, "m", [0.5, 0.6])
    other = batch(tmp_path, "o", [0.2, 0.3], family="triage")
    table = compare([json.loads((mixed / "summary.json").read_text()), json.loads((other / "summary.json").read_text())])
    assert set(table) == {"calc_chain", "triage", "all"}
    assert table["triage"][0].mean is None and table["triage"][1].n == 2  # a family a batch never ran


def test_compare_refuses_what_is_not_a_batch(tmp_path):
    out = CliRunner().invoke(app, ["compare", str(tmp_path)])
    assert out.exit_code == 2 and "no readable batch summary" in out.stderr
