"""The episode reward, as pure functions (the weights are the original system's).

    total = 0.35 * validation + 0.60 * job_quality + 0.05 * speed

- validation: 1.0 for a job valid on the first submission, times VALIDATION_DECAY for each
  extra attempt; 0 if the episode never validates.
- job_quality: 0.25 * post + 0.75 * uplift_term, where uplift = post - best_pre (best_pre is
  the frozen hidden-eval score of the best *untrained* base model for the family). A job
  that dies on the GPU scores 0 here and the episode keeps its validation term.
- speed: a tie-breaker in [0, 1] for faster training, only when the job succeeded, and in
  proportion to the gain it made (`speed_term * max(0, uplift_term)`; our choice: the original
  says only "a small tie-breaker for faster jobs". Paid in full, it paid most to a valid job that
  trains nothing, 1 step at lr 1e-12, for finishing at once).
- An episode with no parseable submission at all scores NO_SUBMISSION_TOTAL in total.

Normalisation of the uplift term (our choice; the original reports only "signed gain"):
the raw gain is divided by the room there was to move, `1 - best_pre` for a gain and
`best_pre` for a loss, so uplift_term is in [-1, 1]. Families differ a lot in headroom
(calc_chain's best_pre is 0.742, ledger's 0.242); normalised gain makes "closed a third of
the remaining gap" worth the same everywhere instead of paying easy-headroom families more.
"""

from __future__ import annotations

from pydantic import BaseModel

W_VALIDATION = 0.35
W_QUALITY = 0.60
W_SPEED = 0.05
QUALITY_POST_WEIGHT = 0.25
QUALITY_UPLIFT_WEIGHT = 0.75
VALIDATION_DECAY = 0.5  # per extra submission: 1.0, 0.5, 0.25, ...
NO_SUBMISSION_TOTAL = -0.1


class RewardBreakdown(BaseModel):
    """Every term of an episode's reward; `total` is what the outer RL loop sees."""

    validation: float = 0.0
    post: float | None = None  # the hidden-eval score the reward used
    post_expected: float | None = None  # a surrogate's noise-free post (None when measured)
    source: str | None = None  # where post came from: "measured" (trained and scored) or "surrogate"
    reward_noise: bool = True  # False: post is the surrogate's expected value, without eval noise
    best_pre: float | None = None
    best_pre_source: str | None = None  # where best_pre came from: reported, measured (here) or surrogate
    best_pre_model: str | None = None
    uplift: float | None = None
    uplift_term: float | None = None
    job_quality: float = 0.0
    speed: float = 0.0
    total: float = 0.0
    attempts: int = 0
    validated: bool = False
    job_status: str | None = None
    note: str = ""


def validation_term(valid_on_attempt: int | None) -> float:
    """1.0 for a job valid on the first submission, times VALIDATION_DECAY for each extra one; 0.0
    when none was valid. `valid_on_attempt` is the 1-based attempt of the first valid submission
    (ValueError below 1)."""
    if valid_on_attempt is None:
        return 0.0
    if valid_on_attempt < 1:
        raise ValueError("attempts are counted from 1")
    return VALIDATION_DECAY ** (valid_on_attempt - 1)


def uplift_term(post: float, best_pre: float) -> float:
    """The gain `post - best_pre` as a share of the room there was (`1 - best_pre` for a gain,
    `best_pre` for a loss), clipped to [-1, 1]; 0.0 when there was no room."""
    gain = post - best_pre
    room = (1.0 - best_pre) if gain >= 0 else best_pre
    return 0.0 if room <= 0 else max(-1.0, min(1.0, gain / room))


def job_quality(post: float, best_pre: float) -> float:
    """`QUALITY_POST_WEIGHT * post + QUALITY_UPLIFT_WEIGHT * uplift_term`, in [-0.75, 1] for `post`
    in [0, 1]."""
    return QUALITY_POST_WEIGHT * post + QUALITY_UPLIFT_WEIGHT * uplift_term(post, best_pre)


def speed_term(train_seconds: float, budget_seconds: float) -> float:
    """1 for an instant job, 0 at (or past) the task's GPU budget, linear between."""
    if budget_seconds <= 0:
        return 0.0
    return max(0.0, min(1.0, 1.0 - train_seconds / budget_seconds))


def episode_reward(
    *,
    attempts: int,
    parseable: bool,
    valid_on_attempt: int | None,
    job_succeeded: bool | None,
    post: float | None,
    best_pre: float,
    train_seconds: float | None = None,
    budget_seconds: float = 0.0,
    job_status: str | None = None,
) -> RewardBreakdown:
    """The reward of one episode from what happened in it."""
    if not parseable:
        return RewardBreakdown(total=NO_SUBMISSION_TOTAL, attempts=attempts, best_pre=best_pre,
                               note="no parseable submission")
    r = RewardBreakdown(validation=validation_term(valid_on_attempt), attempts=attempts, best_pre=best_pre,
                        validated=valid_on_attempt is not None, job_status=job_status)
    if job_succeeded and post is not None:
        r.post = post
        r.uplift = post - best_pre
        r.uplift_term = uplift_term(post, best_pre)
        r.job_quality = job_quality(post, best_pre)
        r.speed = speed_term(train_seconds or 0.0, budget_seconds) * max(0.0, r.uplift_term)
    elif r.validated:
        r.note = "the job did not produce a trained model: job quality 0, validation kept"
    r.total = W_VALIDATION * r.validation + W_QUALITY * r.job_quality + W_SPEED * r.speed
    return r
