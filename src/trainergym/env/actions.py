"""Turning what a policy emits into tool calls.

Accepted, in any mix: a dict `{"name", "arguments"}`; an OpenAI-style assistant message (or
any object with `tool_calls`, such as the openai SDK's message); a list of either; JSON text
of any of these; Qwen/Hermes `<tool_call>{...}</tool_call>` markup (several blocks run in
order). Nothing here raises on bad input: it returns an `ActionError` the env shows the agent.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

MAX_ACTION_CHARS = 2_000_000
MAX_CALLS = 32  # tool calls in one message (each still costs its turn)
_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)


@dataclass
class ToolCall:
    """One tool call: the tool's `name`, its `arguments` (a JSON object) and the caller's call `id`
    ("" when the format carries none)."""

    name: str
    arguments: dict[str, Any]
    id: str = ""


@dataclass
class ActionError:
    """An action that holds no runnable tool call; `message` says why, for the agent."""

    message: str
    calls: list[ToolCall] = field(default_factory=list)


def _arguments(raw: Any) -> dict[str, Any]:
    if raw is None or raw == "":
        return {}
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as e:
            raise ValueError(f"arguments are not valid JSON ({e.msg} at position {e.pos})") from None
    if not isinstance(raw, dict):
        raise ValueError(f"arguments must be a JSON object, got {type(raw).__name__}")
    return raw


def _from_obj(obj: Any) -> list[ToolCall]:
    if hasattr(obj, "model_dump") and not isinstance(obj, dict):  # openai SDK objects
        obj = obj.model_dump()
    if isinstance(obj, list):
        return [call for entry in obj for call in _from_obj(entry)]
    if not isinstance(obj, dict):
        raise ValueError(f"expected a tool call object, got {type(obj).__name__}")
    if obj.get("tool_calls"):
        return [call for entry in obj["tool_calls"] for call in _from_obj(entry)]
    if "function" in obj and isinstance(obj["function"], dict):  # one OpenAI tool_calls entry
        fn = obj["function"]
        return [ToolCall(str(fn.get("name", "")), _arguments(fn.get("arguments")), str(obj.get("id") or ""))]
    if "name" in obj:
        args = obj.get("arguments", obj.get("parameters", obj.get("args")))
        return [ToolCall(str(obj["name"]), _arguments(args), str(obj.get("id") or ""))]
    if "content" in obj and isinstance(obj["content"], str):  # an assistant message with markup
        return _from_text(obj["content"])
    raise ValueError("no tool call found: give {\"name\": ..., \"arguments\": {...}}")


def _from_text(text: str) -> list[ToolCall]:
    blocks = _TOOL_CALL.findall(text)
    if blocks:
        return [call for block in blocks for call in _from_obj(json.loads(_strip(block)))]
    stripped = _strip(text)
    if stripped.startswith(("{", "[")):
        return _from_obj(json.loads(stripped))
    raise ValueError("no tool call found: reply with <tool_call>{\"name\": ..., \"arguments\": {...}}</tool_call>")


def _dumped(obj: Any) -> Any:
    if hasattr(obj, "model_dump"):  # openai SDK objects
        return obj.model_dump()
    raise TypeError(f"a tool call cannot hold a {type(obj).__name__}")


def _strip(text: str) -> str:
    text = text.strip()
    m = _FENCE.match(text)
    return m.group(1) if m else text


def parse_action(action: Any) -> list[ToolCall] | ActionError:
    """Tool calls in `action`, or an ActionError saying what was wrong."""
    try:
        if isinstance(action, (str, bytes)):
            if isinstance(action, bytes):
                action = action.decode("utf-8", errors="replace")
            if len(action) > MAX_ACTION_CHARS:
                return ActionError(f"the action is {len(action)} characters; the limit is {MAX_ACTION_CHARS}")
            calls = _from_text(action)
        else:  # an object: held to the same limits as text, and recordable (json raises past any sane depth)
            size = len(json.dumps(action, default=_dumped))
            if size > MAX_ACTION_CHARS:
                return ActionError(f"the action is {size} characters as JSON; the limit is {MAX_ACTION_CHARS}")
            calls = _from_obj(action)
    except json.JSONDecodeError as e:
        return ActionError(f"malformed JSON in tool call: {e.msg} (line {e.lineno}, column {e.colno})")
    except (ValueError, TypeError, RecursionError) as e:
        return ActionError(str(e) or type(e).__name__)
    if not calls:
        return ActionError("no tool call found")
    if len(calls) > MAX_CALLS:  # one message must not hold the event loop every session shares
        return ActionError(f"the action holds {len(calls)} tool calls; the limit is {MAX_CALLS} per message")
    for call in calls:
        if not call.name:
            return ActionError("a tool call has no name")
    return calls
