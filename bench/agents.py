"""Episodes per minute on the mock backend, and the LLM agent's overhead per turn.

    uv run python bench/agents.py [--episodes 16] [--rounds 2]

(1) The reference agent through `trainergym.agents.batch.run_many` at concurrency 1 and 8 (the GPU cap
    is not the bottleneck: 8 jobs in flight). The first episodes of a process pay the sandbox
    workers' start: the probe's pool is started (`checks.prestart`) and a warm-up episode runs
    before timing. Concurrency 1 and 8 alternate for `--rounds` rounds (the host's load drifts
    into both alike); each prints its median. Every reference episode submits the same job, so
    the probe reads its data once and reuses that reading (`checks._READINGS`; the sandbox work
    is done again each time); the same at concurrency 8 with fresh data in each episode (the
    reference job with its generator's seed changed) shows the rate when nothing is reused.
    Target: >= 150 episodes per minute at concurrency 8, and more than at concurrency 1.
(2) The LLM agent driving a reference episode against the fake OpenAI server on 127.0.0.1
    (tests/fakes/openai_server.py, answering at once): per turn, the agent's `act` (building the request,
    the HTTP round trip through the openai SDK, parsing, metering into the ledger) beside a bare
    SDK call with the same messages, measured in the same run; the difference is the overhead.
The Tinker adapter's overhead per turn is `bench/adapter_overhead.py`.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import itertools
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for tests.*

from openai import AsyncOpenAI  # noqa: E402

from tests.fakes.openai_server import FakeOpenAI, reference_policy  # noqa: E402

from trainergym.agents import run_episode  # noqa: E402
from trainergym.agents.llm import LLMAgent, LLMConfig  # noqa: E402
from trainergym.agents.reference import ReferenceAgent  # noqa: E402
from trainergym.backends import make_backend  # noqa: E402
from trainergym.agents.batch import run_many  # noqa: E402
from trainergym.env.core import AsyncTrainerEnv  # noqa: E402
from trainergym.infra.costs import Ledger  # noqa: E402
from trainergym.probe import checks  # noqa: E402


class FreshDataAgent(ReferenceAgent):
    """The reference agent, with its job's generator seeded anew each episode: new data."""

    seeds = itertools.count(10_000)

    def _actions(self, family: str):
        seed = next(self.seeds)
        for action in super()._actions(family):
            if action["name"] == "write_file":
                content = re.sub(r"(\bseed: int = )\d+", rf"\g<1>{seed}", action["arguments"]["content"])
                action = {**action, "arguments": {**action["arguments"], "content": content}}
            yield action


def episodes_per_minute(n: int, concurrency: int, runs: Path, agent=ReferenceAgent) -> float:
    backend = make_backend("mock", reuse=False)
    started = time.perf_counter()
    summaries = asyncio.run(run_many(agent, backend, n, {"family": "calc_chain"}, concurrency=concurrency,
                                     max_gpu_jobs=8, runs_dir=runs))
    assert all(s.validated for s in summaries), [s.note for s in summaries if not s.validated]
    return n / ((time.perf_counter() - started) / 60)


def llm_overhead(tmp: Path) -> dict:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

    with FakeOpenAI(reference_policy()) as fake:
        client = AsyncOpenAI(base_url=fake.url, api_key="k", max_retries=0)
        prices = tmp / "prices.toml"
        prices.write_text('["fake-model"]\ninput = 1.0\noutput = 2.0\n')
        agent = LLMAgent(LLMConfig(model="fake-model", base_url=fake.url, prices=prices), Ledger(tmp / "ledger.db"),
                         client=client)
        acts, bare = [], []
        original = agent.act

        async def timed(observation, info):
            t = time.perf_counter()
            action = await original(observation, info)
            acts.append(time.perf_counter() - t)
            messages = agent.messages[:-1]  # what that call sent
            t = time.perf_counter()
            await client.chat.completions.create(model="fake-model", messages=messages, tools=agent.tools, max_tokens=512)
            bare.append(time.perf_counter() - t)
            return action

        agent.act = timed
        env = AsyncTrainerEnv(backend=make_backend("mock"))

        async def go():
            for _ in range(3):
                await run_episode(env, agent, options={"family": "calc_chain"})

        asyncio.run(go())
        env.close()
    return {"turns": len(acts), "act_p50_ms": statistics.median(acts) * 1e3, "bare_p50_ms": statistics.median(bare) * 1e3}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="tg-bench-agents-"))
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)
    workers = checks.prestart()  # the probe's pool, started outside the timings
    episodes_per_minute(1, 1, tmp / "warm")  # and the first episode's one-off costs
    rates: dict[int, list[float]] = {1: [], 8: []}
    for r in range(args.rounds):
        for c in (1, 8):
            rates[c].append(episodes_per_minute(args.episodes, c, tmp / f"c{c}-{r}"))
    for c, xs in rates.items():
        print(f"reference agent, mock backend, concurrency {c}: {statistics.median(xs):.1f} episodes/minute "
              f"(median of {len(xs)} rounds of {args.episodes} episodes: {', '.join(f'{x:.0f}' for x in xs)}; "
              f"{workers} probe workers)")
    fresh = episodes_per_minute(args.episodes, 8, tmp / "fresh", FreshDataAgent)
    print(f"reference job with fresh data each episode, concurrency 8: {fresh:.1f} episodes/minute ({args.episodes} "
          "episodes; nothing of the probe reused)")
    c1, c8 = statistics.median(rates[1]), statistics.median(rates[8])
    print(f"target >= 150 episodes/minute at concurrency 8 and more than at 1: {c8:.1f} vs {c1:.1f} "
          f"({'met' if c8 >= 150 and c8 > c1 else 'NOT met'})")
    o = llm_overhead(tmp)
    print(f"llm agent vs fake server, {o['turns']} turns: act p50 {o['act_p50_ms']:.2f} ms, bare SDK call p50 "
          f"{o['bare_p50_ms']:.2f} ms, overhead {o['act_p50_ms'] - o['bare_p50_ms']:.2f} ms per turn")


if __name__ == "__main__":
    main()
