import pytest

from trainergym.task import baselines


def test_baselines_carry_provenance_and_intervals():
    b = baselines.best_pre("calc_chain")
    assert (b.score, b.n, b.source) == (0.742, 200, "reported")
    lo, hi = b.ci95
    assert lo < 0.742 < hi and hi - lo == pytest.approx(0.12, abs=0.01)
    assert baselines.score("calc_chain", "Qwen/Qwen3-0.6B").ci95 is None  # a surrogate has no sampling interval
    with pytest.raises(ValueError, match="date, stack and backend"):
        baselines.Baseline(family="x", model="m", score=0.5, n=10, source="measured")
