import pytest

from trainergym.env import reward as R


def test_weights_sum_to_one():
    assert R.W_VALIDATION + R.W_QUALITY + R.W_SPEED == pytest.approx(1.0)
    assert R.QUALITY_POST_WEIGHT + R.QUALITY_UPLIFT_WEIGHT == pytest.approx(1.0)


def test_validation_decays_per_extra_attempt():
    assert R.validation_term(1) == 1.0
    assert R.validation_term(2) == R.VALIDATION_DECAY
    assert R.validation_term(3) == R.VALIDATION_DECAY**2
    assert R.validation_term(None) == 0.0
    with pytest.raises(ValueError):
        R.validation_term(0)


def test_uplift_term_is_normalised_gain_in_unit_range():
    assert R.uplift_term(0.742, 0.742) == 0.0
    assert R.uplift_term(1.0, 0.742) == pytest.approx(1.0)
    assert R.uplift_term(0.0, 0.742) == pytest.approx(-1.0)
    assert R.uplift_term(0.871, 0.742) == pytest.approx(0.5)  # half the remaining gap
    assert R.uplift_term(0.371, 0.742) == pytest.approx(-0.5)  # half the baseline lost
    assert R.uplift_term(0.5, 1.0) == pytest.approx(-0.5)
    assert R.uplift_term(1.0, 1.0) == 0.0  # no room at all


def test_no_parseable_submission_scores_minus_point_one():
    r = R.episode_reward(attempts=3, parseable=False, valid_on_attempt=None, job_succeeded=None, post=None, best_pre=0.7)
    assert r.total == R.NO_SUBMISSION_TOTAL == -0.1


def test_never_validated_scores_zero():
    r = R.episode_reward(attempts=3, parseable=True, valid_on_attempt=None, job_succeeded=None, post=None, best_pre=0.7)
    assert r.total == 0.0 and not r.validated


def test_crashed_job_keeps_validation_only():
    r = R.episode_reward(attempts=2, parseable=True, valid_on_attempt=2, job_succeeded=False, post=None,
                         best_pre=0.7, train_seconds=100, budget_seconds=1000)
    assert r.job_quality == 0.0 and r.speed == 0.0
    assert r.total == pytest.approx(R.W_VALIDATION * R.VALIDATION_DECAY)


def test_successful_job_full_formula():
    r = R.episode_reward(attempts=1, parseable=True, valid_on_attempt=1, job_succeeded=True, post=0.871,
                         best_pre=0.742, train_seconds=250, budget_seconds=1000)
    assert r.uplift == pytest.approx(0.129)
    assert r.job_quality == pytest.approx(0.25 * 0.871 + 0.75 * 0.5)
    assert r.speed == pytest.approx(0.75 * 0.5)  # in proportion to the gain (uplift_term 0.5)
    assert r.total == pytest.approx(0.35 * 1 + 0.60 * r.job_quality + 0.05 * 0.75 * 0.5)


def test_speed_pays_nothing_to_a_job_that_taught_nothing():
    # A valid job that trains nothing (1 step) finishes at once: once the largest speed bonus there was.
    for post in (0.742, 0.6):
        r = R.episode_reward(attempts=1, parseable=True, valid_on_attempt=1, job_succeeded=True, post=post,
                             best_pre=0.742, train_seconds=1, budget_seconds=1000)
        assert r.speed == 0.0


def test_regression_below_best_pre_is_penalised():
    worse = R.episode_reward(attempts=1, parseable=True, valid_on_attempt=1, job_succeeded=True, post=0.5,
                             best_pre=0.742, train_seconds=0, budget_seconds=1)
    assert worse.uplift_term < 0 and worse.job_quality < 0.25 * 0.5


def test_speed_only_on_success_and_clipped():
    assert R.speed_term(2000, 1000) == 0.0
    assert R.speed_term(0, 1000) == 1.0
    assert R.speed_term(10, 0) == 0.0
