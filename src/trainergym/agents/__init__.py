"""Policies that drive the env. An agent sees what a model would see (the observation and
`info`) and returns an action (or an awaitable of one); `run_episode` is the loop every caller
shares. An agent that returns `Stop(reason)` ends the episode early, truncated with that reason;
`Stop(reason, crashed=True)` says the agent could not go on through no fault of its policy (its
model endpoint is down): the episode is still ended and scored, but `info["crashed"]` carries
the reason, so callers count it apart from the agent's failures."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Protocol

from trainergym.env.core import AsyncTrainerEnv


@dataclass
class Stop:
    """What an agent returns instead of an action when it must not go on: a spent budget, or
    (`crashed`) a failure that is not the policy's, such as a model endpoint that stays down."""

    reason: str
    crashed: bool = False


class Agent(Protocol):
    """A policy: `reset` once per episode, then `act` once per turn."""

    def reset(self, observation: str, info: dict) -> None:
        """Start an episode from the task observation and the reset `info` (episode id, family,
        tool schemas, budgets)."""

    def act(self, observation: str, info: dict) -> Any:
        """The next action, given the last observation and `info`: anything `parse_action`
        accepts (or an awaitable of it), or `Stop(reason)` to end the episode truncated."""


def make_agent(name: str, **llm) -> Agent:
    """`reference`, `naive`, or `llm` (keyword arguments are `LLMConfig` fields)."""
    if name == "reference":
        from trainergym.agents.reference import ReferenceAgent

        return ReferenceAgent()
    if name == "naive":
        from trainergym.agents.naive import NaiveAgent

        return NaiveAgent()
    if name == "llm":
        from trainergym.agents.llm import LLMAgent, LLMConfig

        return LLMAgent(LLMConfig(**{k: v for k, v in llm.items() if v is not None}))
    raise ValueError(f"unknown agent {name!r}; available: reference, naive, llm")


async def run_episode(env: AsyncTrainerEnv, agent: Agent, seed: int | None = None, options: dict | None = None) -> dict:
    """Run one episode to its end; returns the final info (with `reward_breakdown`)."""
    obs, info = await env.reset(seed=seed, options=options)
    agent.reset(obs, info)
    while True:
        action = agent.act(obs, info)
        if inspect.isawaitable(action):
            action = await action
        if isinstance(action, Stop):
            info = await env.end(action.reason)
            return {**info, "crashed": action.reason} if action.crashed else info
        obs, reward, terminated, truncated, info = await env.step(action)
        if terminated or truncated:
            return info
