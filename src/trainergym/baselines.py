"""Untrained baselines with provenance (src/trainergym/data/baselines.toml).

`best_pre` for a family is the best untrained model's score: the bar a trained model's
uplift is measured against.
"""

from __future__ import annotations

import functools
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

BASELINES_FILE = Path(__file__).parent / "data" / "baselines.toml"


class Baseline(BaseModel):
    family: str
    model: str
    score: float
    n: int
    source: Literal["reported", "measured", "surrogate"]
    note: str = ""
    date: str | None = None
    ci95: tuple[float, float] | None = None


@functools.cache
def load_baselines(path: Path = BASELINES_FILE) -> tuple[Baseline, ...]:
    data = tomllib.loads(path.read_text())
    return tuple(Baseline.model_validate(row) for row in data["baseline"])


def for_family(family: str) -> list[Baseline]:
    return [b for b in load_baselines() if b.family == family]


def score(family: str, model: str) -> Baseline:
    for b in for_family(family):
        if b.model == model:
            return b
    raise KeyError(f"no baseline for {model} on {family}")


def best_pre(family: str) -> Baseline:
    rows = for_family(family)
    if not rows:
        raise KeyError(f"no baselines for family {family!r}")
    return max(rows, key=lambda b: b.score)
