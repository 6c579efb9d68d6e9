"""What one job produced, in one type from the GPU host to the reward.

The runner writes a `RunResult` as `result.json`; the pod service returns it; the queue keeps
it in the job's row; every backend hands it to the env. A failure is a `FailureReason`, not
free text, and whether it is worth another attempt (`transient`) is decided here, once, for
every dispatcher: a broken install or a dead pod may be the host's fault, a crashed trainer or
an out-of-memory job is the job's own.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, computed_field

from trainergym.job.stack import PIN, StackPin


class FailureReason(StrEnum):
    """Why a job did not produce a score. The value is the text users read."""

    INSTALL_FAILED = "install failed"
    SETUP_TIMEOUT = "setup timed out"
    TRAINER_CRASHED = "trainer crashed"
    OUT_OF_MEMORY = "out of memory"
    TRAIN_TIMEOUT = "training timed out"
    NO_CHECKPOINT = "no checkpoint"
    EVAL_FAILED = "eval failed"
    EVAL_TIMEOUT = "eval timed out"
    RUNNER_ERROR = "runner error"
    CANCELLED = "cancelled"
    LEASE_LOST = "lease lost"
    POD_DIED = "the pod died mid-job"
    NO_POD = "no GPU pod available"
    PROVIDER_REFUSED = "provider refused"
    JOB_TIMEOUT = "the job ran too long"
    NO_GPU = "no GPU on this host"
    TOO_FEW_GPUS = "too few GPUs on this host"  # prime-rl needs one to train and one to serve
    # The scorer's family package (or the kit) differs from the hash recorded when the scorer was
    # installed, or was imported from elsewhere: nothing it would score can be trusted. Not
    # transient: the likeliest author is the job that just trained there.
    FAMILY_TAMPERED = "family package failed its hash check"
    # The checkpoint to score is not the one the run was seen to publish (host/checkpoints.py): it
    # changed after publication, or holds a link. The job's own doing.
    CHECKPOINT_REFUSED = "checkpoint not the one published"


# Failures that may be the host's or the provider's fault rather than the job's: another
# attempt (up to the queue's max_attempts) may succeed.
TRANSIENT = frozenset({FailureReason.INSTALL_FAILED, FailureReason.SETUP_TIMEOUT, FailureReason.RUNNER_ERROR,
                       FailureReason.LEASE_LOST, FailureReason.POD_DIED, FailureReason.NO_POD,
                       FailureReason.TOO_FEW_GPUS})


def source_label(source: str | None, scale: str | None = None) -> str | None:
    """How a result's source is shown: a mini-scale measurement says so ("measured (mini scale)")."""
    return f"{source} (mini scale)" if source and scale == "mini" else source


class RunResult(BaseModel):
    """`result.json`: one job's outcome. `source` says whether the figures were measured by
    real training or computed by a surrogate (the mock backend); a surrogate never claims to be
    a measurement. `pre` and `post` are hidden-eval scores in [0, 1] over `eval_n` items."""

    status: Literal["succeeded", "failed", "cancelled"]
    failure: FailureReason | None = None
    failure_detail: str = ""  # e.g. "exit status 3" or the provider's message
    failed_phase: str | None = None
    job_id: str = ""  # set by the queue or backend that ran it
    content_hash: str = ""
    base_model: str = ""
    pre: float | None = None
    post: float | None = None
    eval_n: int = 0
    train_seconds: float | None = None
    wall_seconds: float | None = None
    steps_done: int = 0
    gpu: str = ""
    gpu_count: int = 0
    cost_usd: float = 0.0
    log_tail: str = ""
    stack: StackPin = PIN
    source: Literal["measured", "surrogate"] = "measured"
    # "mini": measured by real training of a tiny model (the mini backend), never a full-scale
    # measurement; every figure of such a result is shown as `measured (mini scale)`.
    scale: Literal["full", "mini"] = "full"
    details: dict[str, Any] = {}

    @property
    def source_label(self) -> str:
        """`source` as users read it: "measured (mini scale)" for a mini result."""
        return source_label(self.source, self.scale)

    @classmethod
    def failed(cls, failure: FailureReason, detail: str = "", **fields: Any) -> RunResult:
        """A failed (or, for `CANCELLED`, cancelled) result."""
        status = "cancelled" if failure is FailureReason.CANCELLED else "failed"
        return cls(status=status, failure=failure, failure_detail=detail, **fields)

    @computed_field
    @property
    def transient(self) -> bool:
        """True when another attempt may succeed (the failure may not be the job's own)."""
        return self.failure in TRANSIENT

    @property
    def failure_reason(self) -> str | None:
        """The failure as one line, e.g. "trainer crashed (exit status 1)"."""
        if self.failure is None:
            return None
        return f"{self.failure.value} ({self.failure_detail})" if self.failure_detail else self.failure.value
