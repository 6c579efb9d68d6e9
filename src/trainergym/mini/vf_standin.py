"""A stand-in for the slice of verifiers' v1 API that the families' eval toolsets use.

Why: the families' toolsets subclass `verifiers.v1.Toolset`, and verifiers brings an MCP server,
two LLM SDKs and prime's clients with it. The GPU machine lent for measurements has none of them
and no network, while a rollout needs only what a toolset is: methods marked `@vf.tool`, a
`TOOL_PREFIX` giving the advertised `<prefix>_<name>`, and the `setup` / `setup_task` hooks. So
where `import verifiers` fails, `install()` registers this module's copies of exactly those
(the same code as verifiers 0.4.0's `mark`, `tool`, `discover_decorated` and
`ServerBase.server_name`) under verifiers' module names. Where verifiers is installed it is never
used; tests/mini/test_vf_standin.py holds every family's tools' answers under it equal to theirs
under verifiers.
"""

from __future__ import annotations

import sys
import types
from typing import Any, ClassVar


def mark(attr: str, **extra: Any):
    def decorator(f):
        setattr(f, attr, True)
        for key, value in extra.items():
            setattr(f, key, value)
        return f

    return decorator


def tool(func=None, name: str | None = None):
    """Mark a Toolset method as a tool (its name defaults to the method's)."""
    decorator = mark("tool", tool_name=name)
    return decorator if func is None else decorator(func)


def discover_decorated(obj: object, attr: str) -> list:
    """Bound methods on `obj` tagged with `attr`, sorted by priority then name (verifiers' rule)."""
    names = {name for klass in type(obj).__mro__ for name, fn in vars(klass).items() if callable(fn) and hasattr(fn, attr)}
    methods = [method for name in names if hasattr(method := getattr(obj, name), attr)]
    methods.sort(key=lambda m: (-getattr(m, f"{attr}_priority", 0), m.__name__))
    return methods


class ToolsetConfig:
    def __init__(self, **kwargs: Any):
        self.__dict__.update(kwargs)


class Toolset:
    """A toolset's shape: config, tool prefix, setup hooks."""

    TOOL_PREFIX: ClassVar[str | None] = ""

    def __init__(self, config: ToolsetConfig | None = None):
        self.config = config or ToolsetConfig()

    def __class_getitem__(cls, _params):
        return cls

    @property
    def server_name(self) -> str:
        if self.TOOL_PREFIX is None:
            return ""
        return self.TOOL_PREFIX or "".join(
            ("_" + c.lower() if c.isupper() else c) for c in type(self).__name__).lstrip("_")

    async def setup(self) -> None:
        """Task-agnostic state (none here)."""

    async def setup_task(self, task) -> None:
        """Per-task state (subclasses read the task's world)."""

    @classmethod
    def run(cls) -> None:
        raise RuntimeError("the verifiers stand-in cannot serve a toolset")


def install() -> bool:
    """Register the stand-in as `verifiers`, `verifiers.v1` and `verifiers.v1.utils.decorators` if
    verifiers cannot be imported; True if it did."""
    try:
        import verifiers.v1  # noqa: F401

        return False
    except ImportError:
        pass
    root, v1, utils, decorators = (types.ModuleType(n) for n in (
        "verifiers", "verifiers.v1", "verifiers.v1.utils", "verifiers.v1.utils.decorators"))
    v1.Toolset, v1.ToolsetConfig, v1.tool = Toolset, ToolsetConfig, tool
    decorators.discover_decorated, decorators.tool, decorators.mark = discover_decorated, tool, mark
    root.v1, v1.utils, utils.decorators = v1, utils, decorators
    root.__path__ = v1.__path__ = utils.__path__ = []  # packages, so submodule imports resolve to these
    root.STANDIN = True
    sys.modules.update({"verifiers": root, "verifiers.v1": v1, "verifiers.v1.utils": utils,
                        "verifiers.v1.utils.decorators": decorators})
    return True
