"""The family's eval tools for one rollout, as the hidden-eval scorer gives them.

`trainergym.host.scorer` plays a task with fresh tool servers per rollout: the family's Toolset
(`EVAL_TOOLSET`), set up with the task's data (its `world`; a toolset that changes the world gets
its own deep copy), tools advertised as `<prefix>_<name>`; an unknown tool or a failing call is
answered `error: ...` and the rollout goes on. `Toolbox` does the same without a server, so a
model trained here meets exactly the tools, world and error texts it is scored with.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import inspect
import json
from types import SimpleNamespace

from trainergym.mini import vf_standin


@functools.cache
def toolset_class(spec: str) -> type:
    """`module:Class` (a family's `EVAL_TOOLSET`) as the class."""
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


class Toolbox:
    """One rollout's tools: advertised name -> callable, over its own setup of the task's world."""

    def __init__(self, family, world: dict | None, enabled: bool = True):
        self.tools = {}
        if not enabled:  # a job without tools: the model may still call, and hears what an unknown tool gets
            return
        vf_standin.install()  # verifiers where it is installed; its toolset slice where it is not
        import verifiers.v1 as vf
        from verifiers.v1.utils.decorators import discover_decorated

        server = toolset_class(family.EVAL_TOOLSET)(vf.ToolsetConfig())
        _run(server.setup())
        _run(server.setup_task(SimpleNamespace(world=world or {})))
        for fn in discover_decorated(server, "tool"):
            raw = getattr(fn, "tool_name", None) or fn.__name__
            self.tools[f"{server.server_name}_{raw}" if server.server_name else raw] = fn

    def call(self, name: str, arguments: str | dict) -> str:
        """The tool's answer, or the scorer's `error: ...` text (never raises)."""
        if name not in self.tools:
            return f"error: unknown tool {name!r}"
        try:
            kwargs = json.loads(arguments or "{}") if isinstance(arguments, str) else dict(arguments)
            result = self.tools[name](**kwargs)
            if inspect.isawaitable(result):
                result = _run(result)
            return str(result)
        except Exception as e:  # noqa: BLE001 - the model sees the error, as under the scorer
            return f"error: {type(e).__name__}: {e}"


def _run(result):
    """Await a coroutine from sync code (the toolsets' setup hooks are async but do no I/O)."""
    if not inspect.isawaitable(result):
        return result
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(result)
    finally:
        loop.close()
