"""The LLM agent against a fake OpenAI-compatible server on 127.0.0.1: a full metered episode on
the mock backend, with injected faults; the ledger matches what the server reported; a budget
stops an episode before it would be passed."""

import asyncio

import pytest
from tests.fakes.openai_server import FakeOpenAI, reference_policy

from trainergym.agents import run_episode
from trainergym.agents.llm import LLMAgent, LLMConfig
from trainergym.backends import make_backend
from trainergym.env.core import AsyncTrainerEnv
from trainergym.infra.costs import Ledger, Price

PRICE = Price(input=2.0, output=8.0)





@pytest.fixture
def prices(tmp_path):
    path = tmp_path / "prices.toml"
    path.write_text(f'["fake-model"]\ninput = {PRICE.input}\noutput = {PRICE.output}\n')
    return path


def play(fake, tmp_path, prices, **config):
    ledger = Ledger(tmp_path / "ledger.db")
    cfg = LLMConfig(model="fake-model", base_url=fake.url, api_key_env="FAKE_KEY", prices=prices, timeout=1.0,
                    max_tokens=2048, **config)
    from openai import AsyncOpenAI

    agent = LLMAgent(cfg, ledger, client=AsyncOpenAI(base_url=fake.url, api_key="k", timeout=1.0, max_retries=5))
    env = AsyncTrainerEnv(backend=make_backend("mock"), runs_dir=tmp_path / "runs")
    try:
        info = asyncio.run(run_episode(env, agent, seed=1))
    finally:
        env.close()
    return info, agent, ledger, env


@pytest.mark.parametrize("stream", [False, True])
def test_a_full_metered_episode_through_faults(tmp_path, prices, stream):
    faults = ["429", None, "malformed", "timeout", "500"]
    with FakeOpenAI(reference_policy(), faults=faults, slow_seconds=2.0) as fake:
        info, agent, ledger, env = play(fake, tmp_path, prices, stream=stream)
        reported = list(fake.usage)
    r = info["reward_breakdown"]
    assert r["validation"] > 0 and r["total"] > 0.5  # the reference job, validated and trained
    assert env.episode.turns == agent.usage.calls  # one call per turn, retries included in the call
    malformed = [row for row in env.episode.trajectory if row.get("event") == "step" and not row["info"]["ok"]]
    assert malformed and "not valid JSON" in malformed[0]["observation"]  # answered as an error observation
    totals = ledger.totals(episode=env.episode.id)
    assert totals["entries"] == len(reported) == agent.usage.calls
    assert totals["prompt_tokens"] == sum(u["prompt_tokens"] for u in reported)
    assert totals["completion_tokens"] == sum(u["completion_tokens"] for u in reported)
    assert totals["usd"] == pytest.approx(sum(PRICE.cost(u["prompt_tokens"], u["completion_tokens"]) for u in reported))
    assert {row["source"] for row in ledger.rows(env.episode.id)} == {"price table"}


def test_a_budget_below_one_episode_stops_it_with_the_reason(tmp_path, prices):
    with FakeOpenAI(reference_policy()) as fake:
        info, agent, ledger, env = play(fake, tmp_path, prices, budget_usd=0.03)
        served = len(fake.requests)
    assert info["truncated_reason"].startswith("budget: the next call could cost")
    assert info["reward_breakdown"]["total"] <= 0  # no job was submitted
    totals = ledger.totals(episode=env.episode.id)
    assert 0 < totals["usd"] <= 0.03  # nothing billed past the budget
    assert served == totals["entries"]  # no call was made after the stop
    assert (env.run_path / "reward.json").exists()


def test_a_budget_needs_a_price(tmp_path):
    with pytest.raises(ValueError, match="no price for model"):
        LLMAgent(LLMConfig(model="nobody/unknown", budget_usd=1.0), Ledger(tmp_path / "l.db"), client=object())


def test_an_endpoint_that_keeps_failing_ends_the_episode_with_the_reason(tmp_path, prices):
    with FakeOpenAI(reference_policy(), faults=["500"] * 20) as fake:
        ledger = Ledger(tmp_path / "ledger.db")
        from openai import AsyncOpenAI

        agent = LLMAgent(LLMConfig(model="fake-model", base_url=fake.url, prices=prices, max_retries=2), ledger,
                         client=AsyncOpenAI(base_url=fake.url, api_key="k", max_retries=2))
        env = AsyncTrainerEnv(backend=make_backend("mock"), runs_dir=tmp_path / "runs")
        info = asyncio.run(run_episode(env, agent, seed=1))
        env.close()
        assert len(fake.requests) == 3  # the first try and two retries
    assert "endpoint failed after 2 retries" in info["truncated_reason"] and "InternalServerError" in info["truncated_reason"]
    assert info["crashed"] == info["truncated_reason"]  # not the agent's failure: counted apart
    assert ledger.totals()["entries"] == 0


@pytest.mark.parametrize("first", [False, True])
def test_a_conversation_refused_as_too_long_is_the_agents_failure_not_a_crash(tmp_path, prices, first):
    # Counted as crashed, an agent could escape a bad score by overflowing its context; a refusal of
    # the very first request (the task and our tool schemas) is not the agent's doing, so it is a crash.
    with FakeOpenAI(reference_policy(), faults=[None] * (0 if first else 2) + ["context"]) as fake:
        info, agent, ledger, env = play(fake, tmp_path, prices)
    assert "HTTP 400" in info["truncated_reason"] or "BadRequestError" in info["truncated_reason"]
    assert bool(info.get("crashed")) is first
