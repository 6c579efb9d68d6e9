"""The Tinker adapter's overhead per turn, offline (no hub download, no API key).

    uv run python bench/adapter_overhead.py [--episodes 3] [--task calc_chain]

Needs the `tinker` extra (`uv sync --extra tinker`). What the adapter adds to a turn: the
token-level step (parse the sampled tokens, map the message to an action and the results to
messages, re-render the whole conversation) minus the time spent awaiting the core env (its
tools, the probe, the mock job), which `TrainerMessageEnv.env_seconds` counts. Reference
episodes, one at a time, played by the tests' scripted policy over their byte-level toy
tokenizer (tests/adapters/test_tinker.py: a token per byte, so tokenization costs more than
with Qwen's). Prints the turns, the overhead per turn (p50, mean, max) and the env's share of
each step; no pass/fail. Moved out of the test suite, where it took ~20-30 s.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for tests.*


def turn_overhead(task: str, episodes: int) -> dict:
    """Per turn: the step's wall time and the part of it spent in the core env, in seconds."""
    from tinker_cookbook.rl.rollout_runner import run_rollout

    from tests.adapters.test_tinker import ScriptedPolicy, builder  # registers the toy tokenizer

    steps: list[float] = []
    in_env: list[float] = []

    async def one() -> None:
        group = builder(task, group_size=1)
        (env,) = await group.make_envs()
        step = env.step

        async def timed(action, *, extra=None):
            before, started = env.message_env.env_seconds, time.perf_counter()
            try:
                return await step(action, extra=extra)
            finally:
                steps.append(time.perf_counter() - started)
                in_env.append(env.message_env.env_seconds - before)

        env.step = timed
        await run_rollout(ScriptedPolicy("calc_chain", scripts=("reference",)), env)
        await group.cleanup()

    for _ in range(episodes):
        asyncio.run(one())
    return {"steps": steps, "in_env": in_env}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=3)
    parser.add_argument("--task", default="calc_chain", help="a family id or task file (the policy plays calc_chain)")
    args = parser.parse_args()
    if importlib.util.find_spec("tinker_cookbook") is None:
        print("tinker adapter: skipped (the tinker extra is not installed: uv sync --extra tinker)")
        return
    started = time.perf_counter()
    m = turn_overhead(args.task, args.episodes)
    wall = time.perf_counter() - started
    overhead = [s - e for s, e in zip(m["steps"], m["in_env"])]
    ms = [x * 1e3 for x in overhead]
    print(f"tinker adapter, {args.episodes} reference episodes, {len(ms)} turns, {wall:.1f} s wall")
    print(f"  overhead per turn: p50 {statistics.median(ms):.2f} ms, mean {statistics.fmean(ms):.2f} ms, "
          f"max {max(ms):.2f} ms")
    print(f"  step p50 {statistics.median(m['steps']) * 1e3:.2f} ms, of which in the core env "
          f"{sum(m['in_env']) / sum(m['steps']):.0%} over all turns (the submit_job turns hold the probe)")


if __name__ == "__main__":
    main()
