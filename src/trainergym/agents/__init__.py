"""Policies that drive the env. An agent sees what a model would see (the observation and
`info`) and returns an action; `run_episode` is the loop every caller shares."""

from __future__ import annotations

from typing import Any, Protocol

from trainergym.env import AsyncTrainerEnv


class Agent(Protocol):
    def reset(self, observation: str, info: dict) -> None: ...

    def act(self, observation: str, info: dict) -> Any: ...


def make_agent(name: str) -> Agent:
    if name == "reference":
        from trainergym.agents.reference import ReferenceAgent

        return ReferenceAgent()
    if name == "naive":
        from trainergym.agents.naive import NaiveAgent

        return NaiveAgent()
    raise ValueError(f"unknown agent {name!r}; available: reference, naive")


async def run_episode(env: AsyncTrainerEnv, agent: Agent, seed: int | None = None, options: dict | None = None) -> dict:
    """Run one episode to its end; returns the final info (with `reward_breakdown`)."""
    obs, info = await env.reset(seed=seed, options=options)
    agent.reset(obs, info)
    while True:
        obs, reward, terminated, truncated, info = await env.step(agent.act(obs, info))
        if terminated or truncated:
            return info
