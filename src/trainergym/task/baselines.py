"""Untrained baselines with provenance (src/trainergym/data/baselines.toml).

`best_pre` for a family is the best untrained model's score: the bar a trained model's
uplift is measured against.
"""

from __future__ import annotations

import functools
import math
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, model_validator

from trainergym.paths import PACKAGE_DATA

BASELINES_FILE = PACKAGE_DATA / "baselines.toml"


class Baseline(BaseModel):
    """One untrained model's hidden-eval score. `measured` rows also record when, on which
    stack and with which backend; `ci95` defaults to the Wilson interval of a k/n score."""

    family: str
    model: str
    score: float
    n: int
    source: Literal["reported", "measured", "surrogate"]
    note: str = ""
    date: str | None = None
    stack: str | None = None
    backend: str | None = None
    ci95: tuple[float, float] | None = None

    @model_validator(mode="after")
    def _provenance(self) -> Baseline:
        if self.source == "measured" and not (self.date and self.stack and self.backend):
            raise ValueError(f"measured baseline {self.family}/{self.model} needs date, stack and backend")
        if self.ci95 is None and self.n > 0 and self.source != "surrogate":
            self.ci95 = wilson_interval(self.score, self.n)
        return self


def wilson_interval(p: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a proportion p observed on n items."""
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4)


@functools.cache
def load_baselines(path: Path = BASELINES_FILE) -> tuple[Baseline, ...]:
    """Every baseline row of `path` (the packaged baselines.toml), validated; read once per path."""
    data = tomllib.loads(path.read_text())
    return tuple(Baseline.model_validate(row) for row in data["baseline"])


def for_family(family: str) -> list[Baseline]:
    """The family's baselines in file order (none for an unknown family)."""
    return [b for b in load_baselines() if b.family == family]


def score(family: str, model: str) -> Baseline:
    """The baseline of `model` on `family`; KeyError when there is none."""
    for b in for_family(family):
        if b.model == model:
            return b
    raise KeyError(f"no baseline for {model} on {family}")


def best_pre(family: str) -> Baseline:
    """The family's best untrained baseline (the highest score): the bar uplift is measured against.
    KeyError for a family with none."""
    rows = for_family(family)
    if not rows:
        raise KeyError(f"no baselines for family {family!r}")
    return max(rows, key=lambda b: b.score)
