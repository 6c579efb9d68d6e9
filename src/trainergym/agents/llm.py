"""A model as the trainer: any OpenAI-compatible chat-completions endpoint with tool calling.

OpenRouter by default (`OPENROUTER_API_KEY`); `base_url`, `api_key_env` and `model` point it
anywhere else (vLLM, a local server). The openai SDK retries 429, 5xx, timeouts and dropped
connections with exponential backoff (honouring `retry-after`). Each tool call the model makes is
answered with its own tool message; a malformed call (arguments that are not JSON, an unknown
tool) comes back as an error observation, as the env reports it, and costs the turn.

Metering: every call's tokens and dollars go to the ledger (`trainergym.infra.costs`). Before each
call the agent bounds what it could cost: prompt tokens at most the last call's prompt and
completion tokens plus one token per byte added since (plus template overhead), completion at
most `max_tokens`. If that bound would pass the episode's budget the agent stops instead, and
the episode ends truncated with the reason: nothing is billed past the budget.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from openai import APIError, APIStatusError, AsyncOpenAI, RateLimitError

from trainergym.agents import Stop
from trainergym.agents.prompt import SYSTEM_PROMPT
from trainergym.infra.costs import Ledger, Price, load_prices


TEMPLATE_TOKENS_PER_MESSAGE = 16  # role markers and separators the chat template adds


@dataclass
class LLMConfig:
    """The endpoint, sampling, retries and budget of an `LLMAgent`. `budget_usd` (per episode) needs
    a price for `model`."""

    model: str = "openai/gpt-4.1-mini"
    base_url: str = "https://openrouter.ai/api/v1"
    api_key_env: str = "OPENROUTER_API_KEY"
    max_tokens: int = 4096  # per call: also what bounds a call's cost
    temperature: float = 0.7
    stream: bool = False
    timeout: float = 120.0
    max_retries: int = 5
    budget_usd: float | None = None  # per episode
    prices: Path | None = None  # overrides of the packaged price table


@dataclass
class Usage:
    """One episode's metered model calls: tokens, dollars and where the dollar figures came from."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    usd: float = 0.0
    sources: set[str] = field(default_factory=set)


class LLMAgent:
    """An `Agent` over an OpenAI-compatible chat endpoint: one completion per turn, each metered
    into the ledger. Raises ValueError when the API key is unset, or when a budget is set for a
    model with no price."""

    def __init__(self, config: LLMConfig | None = None, ledger: Ledger | None = None, client=None):
        self.config = config or LLMConfig()
        self.price: Price | None = load_prices(self.config.prices).get(self.config.model)
        if self.config.budget_usd is not None and self.price is None:
            raise ValueError(f"no price for model {self.config.model!r}, so a budget cannot be enforced: add it to a "
                             "prices file (--prices, TRAINERGYM_PRICES; see trainergym/data/prices.toml)")
        self.ledger = ledger or Ledger()
        key = os.environ.get(self.config.api_key_env)
        if client is None and not key:
            raise ValueError(f"set {self.config.api_key_env} (the API key of {self.config.base_url})")
        self.client = client or AsyncOpenAI(base_url=self.config.base_url, api_key=key, timeout=self.config.timeout,
                                            max_retries=self.config.max_retries)
        self.usage = Usage()

    # --- the Agent protocol ------------------------------------------------------------------
    def reset(self, observation: str, info: dict) -> None:
        """Start the conversation (system prompt, task observation) and the episode's usage."""
        self.episode = info.get("episode_id")
        self.tools = info["tool_schemas"]
        self.messages: list[dict] = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": observation}]
        self.usage = Usage()
        self._last_prompt = None  # (prompt + completion tokens of the last call, messages it saw)
        self._open_calls: list[str] = []  # tool_call ids of the last assistant message

    async def act(self, observation: str, info: dict):
        """Add the last step's results to the conversation (each tool call answered from
        `info["calls"]`), then call the model. Returns its message (with `tool_calls`) or its text;
        `Stop` when the next call could pass the budget or the endpoint still fails after its
        retries."""
        if len(self.messages) > 2 or self._open_calls:
            self._observe(observation, info)
        bound = self._cost_bound()
        if self.config.budget_usd is not None and self.usage.usd + bound > self.config.budget_usd:
            return Stop(f"budget: the next call could cost up to ${bound:.4f} and ${self.config.budget_usd - self.usage.usd:.4f}"
                        f" of the episode's ${self.config.budget_usd:.4f} is left")
        try:
            message, usage, reported = await (self._streamed() if self.config.stream else self._plain())
        except APIError as e:  # still failing after the SDK's retries
            return await self._failed(e)
        self._meter(usage, reported)
        self._last_prompt = (usage["prompt_tokens"] + usage["completion_tokens"], len(self.messages) + 1)
        self.messages.append(_replayable(message))
        self._open_calls = [c["id"] for c in message.get("tool_calls") or []]
        return message if message.get("tool_calls") else (message.get("content") or "")

    async def _failed(self, e: APIError) -> Stop:
        """End the episode on an endpoint that keeps failing, saying why. A crash (counted apart
        from the agent's failures) only when the endpoint is at fault: once the agent has spoken, a
        refusal of the conversation it built (too long, flagged by moderation, a server choking
        on it) is the agent's failure if the endpoint still answers the bare task. Otherwise an
        agent could escape a bad score by making its own conversation unservable."""
        why = f"{type(e).__name__}: {e}"
        if isinstance(e, APIStatusError) and not isinstance(e, RateLimitError) and len(self.messages) > 2 \
                and await self._answers_the_task():
            return Stop(f"the model endpoint refused the conversation (HTTP {e.status_code}; the bare task is still "
                        f"answered): {why}"[:500])
        return Stop(f"the model endpoint failed after {self.config.max_retries} retries: {why}"[:500], crashed=True)

    async def _answers_the_task(self) -> bool:
        """Whether the endpoint answers the system prompt and the task alone (one token, metered)."""
        try:
            response = await self.client.chat.completions.create(
                model=self.config.model, messages=self.messages[:2], max_tokens=1, temperature=self.config.temperature)
        except APIError:
            return False
        if response.usage is not None:
            self._meter(_usage(response.usage), getattr(response.usage, "cost", None))
        return True

    # --- conversation ------------------------------------------------------------------------
    def _observe(self, observation: str, info: dict) -> None:
        """Answer every tool call of the last message (its own result, or the message's error)."""
        if not self._open_calls:
            self.messages.append({"role": "user", "content": observation})
            return
        by_id = {c["id"]: c["content"] for c in info.get("calls") or [] if c.get("id")}
        unparsed = next((c["content"] for c in info.get("calls") or [] if c.get("id") is None), None)
        for call_id in self._open_calls:
            content = by_id.get(call_id, unparsed or "not run: the episode ended before this call")
            self.messages.append({"role": "tool", "tool_call_id": call_id, "content": content})
        self._open_calls = []

    def _request(self) -> dict:
        extra = {"usage": {"include": True}} if "openrouter.ai" in self.config.base_url else None  # cost in the response
        return {"model": self.config.model, "messages": self.messages, "tools": self.tools, "max_tokens": self.config.max_tokens,
                "temperature": self.config.temperature, **({"extra_body": extra} if extra else {})}

    async def _plain(self) -> tuple[dict, dict, float | None]:
        response = await self.client.chat.completions.create(**self._request())
        msg = response.choices[0].message
        message = {"role": "assistant", "content": msg.content or ""}
        if msg.tool_calls:
            message["tool_calls"] = [{"id": c.id, "type": "function", "function": {"name": c.function.name,
                                                                                    "arguments": c.function.arguments}}
                                     for c in msg.tool_calls]
        return message, _usage(response.usage), getattr(response.usage, "cost", None)

    async def _streamed(self) -> tuple[dict, dict, float | None]:
        stream = await self.client.chat.completions.create(**self._request(), stream=True,
                                                           stream_options={"include_usage": True})
        content, calls, usage = [], {}, None
        async for chunk in stream:
            if chunk.usage is not None:
                usage = chunk.usage
            for choice in chunk.choices:
                delta = choice.delta
                content.append(delta.content or "")
                for tc in delta.tool_calls or []:
                    call = calls.setdefault(tc.index, {"id": "", "type": "function", "function": {"name": "", "arguments": ""}})
                    call["id"] = tc.id or call["id"]
                    if tc.function is not None:
                        call["function"]["name"] += tc.function.name or ""
                        call["function"]["arguments"] += tc.function.arguments or ""
        message = {"role": "assistant", "content": "".join(content)}
        if calls:
            message["tool_calls"] = [calls[i] for i in sorted(calls)]
        if usage is None:  # a server that ignores include_usage: we cannot meter what we cannot see
            raise RuntimeError("the streamed response reported no usage; use --no-stream with this server")
        return message, _usage(usage), getattr(usage, "cost", None)

    # --- metering ----------------------------------------------------------------------------
    def _cost_bound(self) -> float:
        if self.price is None:
            return 0.0
        if self._last_prompt is None:
            prompt = len(json.dumps([self.messages, self.tools]).encode()) + TEMPLATE_TOKENS_PER_MESSAGE * len(self.messages)
        else:
            tokens, seen = self._last_prompt
            added = self.messages[seen:]
            prompt = tokens + len(json.dumps(added).encode()) + TEMPLATE_TOKENS_PER_MESSAGE * (len(added) + 1)
        return self.price.cost(prompt, self.config.max_tokens)

    def _meter(self, usage: dict, reported: float | None) -> None:
        if reported is not None:
            usd, source = float(reported), "reported"
        elif self.price is not None:
            usd, source = self.price.cost(usage["prompt_tokens"], usage["completion_tokens"]), "price table"
        else:
            usd, source = 0.0, "unpriced"
        self.usage.calls += 1
        self.usage.prompt_tokens += usage["prompt_tokens"]
        self.usage.completion_tokens += usage["completion_tokens"]
        self.usage.usd += usd
        self.usage.sources.add(source)
        self.ledger.record("llm", usd, source, episode=self.episode, model=self.config.model, **usage)


def _replayable(message: dict) -> dict:
    """The assistant message as the conversation keeps it: tool-call arguments that are not a JSON
    object become "{}" (servers such as llama.cpp's refuse a history holding them, with a 500 on
    every retry); the env still sees, and answers, what the model actually sent."""
    calls = message.get("tool_calls")
    if not calls:
        return message
    kept = []
    for c in calls:
        try:
            ok = isinstance(json.loads(c["function"]["arguments"] or "{}"), dict)
        except (ValueError, RecursionError):
            ok = False
        kept.append(c if ok else {**c, "function": {**c["function"], "arguments": "{}"}})
    return {**message, "tool_calls": kept}


def _usage(usage) -> dict:
    if usage is None:
        raise RuntimeError("the response reported no token usage, so the call cannot be metered")
    return {"prompt_tokens": int(usage.prompt_tokens or 0), "completion_tokens": int(usage.completion_tokens or 0)}
