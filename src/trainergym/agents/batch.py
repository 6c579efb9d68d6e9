"""Many episodes at once: N episodes with at most `concurrency` running and at most
`max_gpu_jobs` training jobs in flight (the expensive part), and the held-out table of the
original system (mean reward, validated, inner jobs succeeded, worst episode).

Episodes share one backend, so a byte-identical job is trained once (the mock reuses results,
the queue dedupes by content hash) and the GPU cap holds across all of them.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
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
    source: str | None = None  # where the job's post score came from: measured | surrogate (None: no job ran)
    error: str | None = None  # the episode crashed (the agent's endpoint failed for good, ...)


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
                summary = EpisodeSummary(ep.id, ep.task.id, seed + i, r["total"], ep.valid_on_attempt is not None,
                                         ep.result is not None and ep.result.status == "succeeded", ep.turns, r.get("note"),
                                         time.perf_counter() - started, getattr(getattr(agent, "usage", None), "usd", None),
                                         ep.result.source if ep.result else None, error=info.get("crashed"))
            except Exception as e:  # noqa: BLE001 - one broken episode must not sink the batch
                ep = env.episode
                summary = EpisodeSummary(ep.id if ep else "-", ep.task.id if ep else "-", seed + i, float("nan"), False, False,
                                         ep.turns if ep else 0, None, time.perf_counter() - started,
                                         error=f"{type(e).__name__}: {e}")
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
