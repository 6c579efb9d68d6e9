"""Comparing agents from their batches: mean reward with 95% bootstrap intervals per family and
overall, the validated share, crashes, and whether a difference from the first batch is
significant (its bootstrap interval excludes zero).

Crashed episodes (an endpoint that stayed down, an episode that raised) say nothing of the agent:
they are counted apart and left out of the means and shares, as in the held-out table. The
bootstrap is seeded, so the same batches always give the same intervals.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

RESAMPLES = 10_000


def bootstrap_ci(values: Sequence[float], resamples: int = RESAMPLES, seed: int = 0) -> tuple[float, float]:
    """The 95% percentile-bootstrap interval of the mean of `values` (a point for one value)."""
    if len(values) < 2:
        return (values[0], values[0]) if values else (float("nan"), float("nan"))
    rng, n = random.Random(seed), len(values)
    means = sorted(sum(rng.choices(values, k=n)) / n for _ in range(resamples))
    return means[int(0.025 * resamples)], means[int(0.975 * resamples) - 1]


def difference_ci(a: Sequence[float], b: Sequence[float], resamples: int = RESAMPLES,
                  seed: int = 0) -> tuple[float, float, float]:
    """mean(b) - mean(a) and its 95% bootstrap interval (each sample resampled on its own)."""
    if not a or not b:
        return float("nan"), float("nan"), float("nan")
    rng = random.Random(seed)
    diffs = sorted(sum(rng.choices(b, k=len(b))) / len(b) - sum(rng.choices(a, k=len(a))) / len(a)
                   for _ in range(resamples))
    return statistics.fmean(b) - statistics.fmean(a), diffs[int(0.025 * resamples)], diffs[int(0.975 * resamples) - 1]


@dataclass
class Cell:
    """One batch on one family (or all of them): what `trainergym compare` prints."""

    n: int  # episodes that did not crash
    crashed: int
    mean: float | None
    ci: tuple[float, float] | None
    validated: float | None  # share of the episodes that did not crash
    diff: tuple[float, float, float] | None = None  # vs the first batch: (difference, low, high)

    @property
    def significant(self) -> bool:
        """The difference's 95% interval excludes zero."""
        return self.diff is not None and (self.diff[1] > 0 or self.diff[2] < 0)


def _rewards(rows: list[dict]) -> list[float]:
    return [float(r["reward"]) for r in rows if not r.get("error")]


def _cell(rows: list[dict], baseline: list[dict] | None) -> Cell:
    ok = [r for r in rows if not r.get("error")]
    rewards = _rewards(rows)
    cell = Cell(len(ok), len(rows) - len(ok), statistics.fmean(rewards) if rewards else None,
                bootstrap_ci(rewards) if rewards else None,
                sum(bool(r["validated"]) for r in ok) / len(ok) if ok else None)
    if baseline is not None and rewards and _rewards(baseline):
        cell.diff = difference_ci(_rewards(baseline), rewards)
    return cell


def compare(records: list[dict]) -> dict[str, list[Cell]]:
    """Family (and "all") -> one `Cell` per batch record (`agents.batch.read_summary`), in order;
    every batch after the first carries its difference from the first."""
    families = sorted({r["family"] for rec in records for r in rec["episodes"]})
    table = {}
    for family in [*families, "all"]:
        pick = [[r for r in rec["episodes"] if family == "all" or r["family"] == family] for rec in records]
        table[family] = [_cell(rows, pick[0] if i else None) for i, rows in enumerate(pick)]
    return table
