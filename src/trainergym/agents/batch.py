"""Many episodes at once: N episodes with at most `concurrency` running and at most
`max_gpu_jobs` training jobs in flight (the expensive part), the held-out table of the original
system (mean reward, validated, inner jobs succeeded, worst episode), and the batch's record.

Episodes share one backend, so a byte-identical job is trained once (the mock reuses results,
the queue dedupes by content hash) and the GPU cap holds across all of them. A batch lives in
`runs/batch-<id>/`: its episodes' run folders and `summary.json` / `summary.csv`, one row per
episode with every reward term, which `trainergym compare` and `trainergym report` read.
"""

from __future__ import annotations

import asyncio
import csv
import dataclasses
import datetime
import json
import statistics
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from trainergym.agents import Agent, run_episode
from trainergym.backends import Backend
from trainergym.backends.capped import CappedBackend
from trainergym.env.core import AsyncTrainerEnv


@dataclass
class EpisodeSummary:
    """One episode of a batch as `run_many` reports it; a crashed episode (it raised, or its agent
    stopped for a failure not its own) has `error` set, and its reward is NaN if it raised."""

    episode_id: str
    task: str
    seed: int
    reward: float
    validated: bool
    job_succeeded: bool
    turns: int
    note: str | None
    seconds: float
    usd: float | None = None  # the agent's metered spend, when it has one
    source: str | None = None  # where the job's post score came from: measured | measured (mini scale) | surrogate (None: no job ran)
    error: str | None = None  # the episode crashed (the agent's endpoint failed for good, ...)
    family: str = ""
    terms: dict = field(default_factory=dict)  # the reward's terms (validation, post, best_pre, uplift, ...)
    gpu_usd: float | None = None  # what the job's GPUs cost (the result's cost_usd: measured or surrogate)
    run_dir: str | None = None  # the episode's folder (trajectory, reward, result, workspace)


async def run_many(make_agent: Callable[[], Agent], backend: Backend, n: int, options: dict | None = None,
                   concurrency: int = 8, max_gpu_jobs: int = 8, seed: int = 0, runs_dir: Path | None = None,
                   on_done: Callable[[EpisodeSummary], None] | None = None,
                   reward_noise: bool = True) -> list[EpisodeSummary]:
    """Run `n` episodes of fresh `make_agent()` agents on `backend`, at most `concurrency` at once
    and at most `max_gpu_jobs` jobs in flight; episode i gets seed `seed + i`. Returns the summaries
    in episode order and calls `on_done` as each ends; an episode that raises is summarised with its
    `error`, never raised."""
    capped = CappedBackend(backend, max_gpu_jobs)
    gate = asyncio.Semaphore(concurrency)

    async def one(i: int) -> EpisodeSummary:
        async with gate:
            env, agent, started = AsyncTrainerEnv(backend=capped, runs_dir=runs_dir, reward_noise=reward_noise), make_agent(), time.perf_counter()
            try:
                info = await run_episode(env, agent, seed=seed + i, options=options)
                ep, r = env.episode, info["reward_breakdown"]
                stopped = None if info.get("crashed") else info.get("truncated_reason")  # why the agent stopped
                note = "; ".join(s for s in (r.get("note"), stopped and f"stopped: {stopped}") if s) or None
                summary = EpisodeSummary(ep.id, ep.task.id, seed + i, r["total"], ep.valid_on_attempt is not None,
                                         ep.result is not None and ep.result.status == "succeeded", ep.turns, note,
                                         time.perf_counter() - started, getattr(getattr(agent, "usage", None), "usd", None),
                                         ep.result.source_label if ep.result else None, error=info.get("crashed"),
                                         family=ep.task.family, terms={k: r.get(k) for k in TERMS},
                                         gpu_usd=ep.result.cost_usd if ep.result else None, run_dir=str(env.run_path))
            except Exception as e:  # noqa: BLE001 - one broken episode must not sink the batch
                ep = env.episode
                summary = EpisodeSummary(ep.id if ep else "-", ep.task.id if ep else "-", seed + i, float("nan"), False, False,
                                         ep.turns if ep else 0, None, time.perf_counter() - started,
                                         error=f"{type(e).__name__}: {e}", family=ep.task.family if ep else "")
            finally:
                env.close()
        if on_done:
            on_done(summary)
        return summary

    return list(await asyncio.gather(*(one(i) for i in range(n))))


def held_out_table(summaries: list[EpisodeSummary]) -> dict:
    """The original's held-out columns over the episodes that did not crash; `crashed` counts the
    others apart (an endpoint that is down says nothing of the agent)."""
    ok = [s for s in summaries if s.error is None]
    rewards = [s.reward for s in ok]
    return {
        "episodes": len(summaries),
        "crashed": len(summaries) - len(ok),
        "mean_reward": statistics.fmean(rewards) if rewards else None,
        "validated": sum(s.validated for s in ok) / len(ok) if ok else None,
        "inner_jobs_succeeded": sum(s.job_succeeded for s in ok) / len(ok) if ok else None,
        "worst_episode": min(rewards) if rewards else None,
        "sources": sorted({s.source for s in summaries if s.source}),  # of the post scores behind the rewards
    }


# The reward's terms a batch records per episode (env.reward.episode_reward's breakdown).
TERMS = ("validation", "post", "post_expected", "best_pre", "uplift", "uplift_term", "job_quality", "speed", "total")


def new_batch_dir(runs_dir: Path) -> Path:
    """A fresh `runs_dir/batch-<date>-<time>-<nonce>/` for one batch's episodes and summary."""
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    path = Path(runs_dir) / f"batch-{stamp}-{uuid.uuid4().hex[:6]}"
    path.mkdir(parents=True)
    return path


def _row(s: EpisodeSummary) -> dict:
    """One episode as a flat summary row: the summary's fields with the reward terms spread out."""
    row = {k: v for k, v in dataclasses.asdict(s).items() if k != "terms"}
    row.update({f"r_{k}": s.terms.get(k) for k in TERMS})
    return row


def write_summary(batch_dir: Path, summaries: list[EpisodeSummary], meta: dict) -> Path:
    """Write `summary.json` (`meta`, the held-out table and one row per episode) and
    `summary.csv` (the rows) into `batch_dir`; returns the JSON's path."""
    rows = [_row(s) for s in summaries]
    out = Path(batch_dir) / "summary.json"
    record = {"batch_id": Path(batch_dir).name, "created": datetime.datetime.now().isoformat(timespec="seconds"),
              **meta, "table": held_out_table(summaries), "episodes": rows}
    out.write_text(json.dumps(record, indent=1, default=str))
    with open(Path(batch_dir) / "summary.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["episode_id"])
        writer.writeheader()
        writer.writerows(rows)
    return out


def read_summary(path: Path) -> dict:
    """A batch's `summary.json`, given the file or its batch folder. Raises ValueError (one line)
    when there is none or it is not a batch summary."""
    path = Path(path)
    file = path / "summary.json" if path.is_dir() else path
    try:
        record = json.loads(file.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: no readable batch summary ({e}); give a runs/batch-<id>/ folder that "
                         "`trainergym batch` or `eval-agent` wrote") from None
    if not isinstance(record, dict) or not isinstance(record.get("episodes"), list):
        raise ValueError(f"{file}: not a batch summary (no episodes)")
    return record
