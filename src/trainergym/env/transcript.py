"""An episode as a readable transcript, from its trajectory records.

The records are what `AsyncTrainerEnv` keeps per episode and writes to
`runs/<episode-id>/trajectory.jsonl`: a `reset` (the task observation), one `step` per agent
message (the action as sent, the observation, reward and end flags, the info) and possibly an
`end` (an episode ended early by its caller). `render` takes those records, live or read back
with `load`, so the env's `render_mode="ansi"` and a command showing a saved run print the same
text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

TRAJECTORY_FILE = "trajectory.jsonl"
_INLINE = 80  # a string argument longer than this, or spanning lines, is shown as a block
# Control characters but newline and tab: the agent's text must not drive the reader's terminal
# (ESC sequences move the cursor over lines already shown, OSC 52 writes the clipboard).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def load(path: str | Path) -> list[dict]:
    """The trajectory records of a run: `path` is a run directory or its trajectory.jsonl."""
    path = Path(path)
    if path.is_dir():
        path = path / TRAJECTORY_FILE
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def render(records: Iterable[Mapping[str, Any]], max_chars: int | None = None) -> str:
    """The transcript of an episode so far: the task, then each turn's calls and results, then how
    it ended and its reward. `max_chars` clips every text block (None: whole)."""
    out: list[str] = []
    for rec in records:
        event = rec.get("event")
        if event == "reset":
            seed = rec.get("seed")
            out.append(f"=== task {rec.get('task')}" + (f", seed {seed}" if seed is not None else "") + " ===")
            out.append(_block(rec.get("observation", ""), max_chars))
        elif event == "step":
            out.append(f"\n--- turn {rec.get('turn')} ---")
            out += _action(rec.get("action"), max_chars)
            out.append("tool:")
            out.append(_block(rec.get("observation", ""), max_chars))
            if rec.get("terminated") or rec.get("truncated"):
                how = "terminated" if rec.get("terminated") else "truncated"
                out.append(f"\n=== episode over ({how}): reward {float(rec.get('reward', 0.0)):.3f} ===")
        elif event == "end":
            out.append(f"\n=== ended early ({rec.get('reason')}): reward {float(rec.get('reward', 0.0)):.3f} ===")
            if rec.get("cancelled_jobs"):
                out.append(f"cancelled job(s): {', '.join(rec['cancelled_jobs'])}")
        else:
            out.append(f"[{event}] {_json(rec)}")
    return printable("\n".join(out) + "\n")


def printable(text: str) -> str:
    """`text` with its control characters (but newline and tab) shown as escapes (`\\x1b`), so
    that it prints as the text it is on any terminal."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def _json(value: Any) -> str:
    """One value as JSON, or a note when it cannot be (nested past the recursion limit)."""
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (ValueError, RecursionError):
        return f"<a {type(value).__name__} too deeply nested to show>"


def _decoded(text: str) -> Any:
    """JSON text decoded, or None when it is not JSON (or nests, or numbers, beyond what Python reads)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _action(action: Any, max_chars: int | None) -> list[str]:
    """The agent's message: its text, then each tool call."""
    if isinstance(action, str):
        decoded = _decoded(action)  # a call sent as JSON text reads better as the call
        if isinstance(decoded, Mapping) and ("name" in decoded or "tool_calls" in decoded):
            return _action(decoded, max_chars)
        return ["agent:", _block(action, max_chars)]
    if isinstance(action, list):
        return [line for item in action for line in _action(item, max_chars)]
    if not isinstance(action, Mapping):
        return ["agent:", _block(_json(action), max_chars)]
    lines: list[str] = []
    content = action.get("content")
    if isinstance(content, str) and content.strip():
        lines += ["agent:", _block(content, max_chars)]
    if "name" in action:
        lines += _call(action.get("name"), action.get("arguments"), max_chars)
    for call in action.get("tool_calls") or []:
        fn = call.get("function", call) if isinstance(call, Mapping) else {}
        lines += _call(fn.get("name"), fn.get("arguments"), max_chars)
    for raw in action.get("unparsed_tool_calls") or []:
        lines += ["agent (a call that did not parse):", _block(str(raw), max_chars)]
    return lines or ["agent:", _block(_json(action), max_chars)]


def _call(name: Any, arguments: Any, max_chars: int | None) -> list[str]:
    """`call NAME key=value ...`, long or multi-line strings as blocks below it."""
    if isinstance(arguments, str):
        decoded = _decoded(arguments or "{}")
        if decoded is None:
            return [f"call {name} (arguments that are not JSON, or nested too deep to read):", _block(arguments, max_chars)]
        arguments = decoded
    arguments = arguments if isinstance(arguments, Mapping) else {"arguments": arguments}
    inline, blocks = [], []
    for key, value in arguments.items():
        if isinstance(value, str) and (len(value) > _INLINE or "\n" in value):
            blocks += [f"  {key}:", _block(value, max_chars, indent="    ")]
        else:
            inline.append(f"{key}={_json(value)}")
    return [" ".join([f"call {name}", *inline]), *blocks]


def _block(text: Any, max_chars: int | None, indent: str = "  ") -> str:
    text = str(text)
    if max_chars is not None and len(text) > max_chars:
        text = f"{text[:max_chars]}... ({len(text) - max_chars} more characters)"
    return "\n".join(indent + line for line in text.split("\n"))
