"""The agent's tools: typed specs (pydantic arguments -> OpenAI function schema) and the
execution of the workspace and baseline tools. `submit_job` is specified here and executed
by the env, which owns the attempt budget, the probe and the backend.
"""

from __future__ import annotations

import copy
import functools
import json
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from trainergym.task import baselines
from trainergym.task.spec import TaskSpec
from trainergym.env.workspace import Workspace, WorkspaceError, utf8_problem


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


# The tools' argument models (`NoArgs` for the tools that take none). No docstrings on purpose:
# pydantic would put a class docstring into the JSON schema the model reads.
class ReadFile(_Args):
    path: str = Field(description="file path relative to the workspace root, e.g. 'INSTRUCTIONS.md'")


class WriteFile(_Args):
    path: str = Field(description="file path relative to the workspace root; parent directories are created")
    content: str = Field(description="the complete new file content")


class EditFile(_Args):
    path: str = Field(description="file path relative to the workspace root")
    old_string: str = Field(description="exact text to replace; must occur exactly once in the file")
    new_string: str = Field(description="replacement text")


class ListFiles(_Args):
    path: str = Field(".", description="directory relative to the workspace root")


class NoArgs(_Args):
    pass


@dataclass(frozen=True)
class ToolSpec:
    """One agent tool: its name, its description and the pydantic model of its arguments."""

    name: str
    description: str
    args: type[_Args]

    @property
    def schema(self) -> dict:
        """The tool in OpenAI function-calling format: the argument model's JSON schema without
        titles and with no other properties allowed (a fresh copy: the schema is made once)."""
        return copy.deepcopy(_schema(self.name, self.description, self.args))


@functools.cache
def _schema(name: str, description: str, args: type[BaseModel]) -> dict:
    params = args.model_json_schema()
    params.pop("title", None)
    for prop in params.get("properties", {}).values():
        prop.pop("title", None)
    params.setdefault("properties", {})
    params["additionalProperties"] = False
    return {"type": "function", "function": {"name": name, "description": description, "parameters": params}}


TOOLS = {
    spec.name: spec
    for spec in (
        ToolSpec("read_file", "Read a text file from the workspace.", ReadFile),
        ToolSpec("write_file", "Create or overwrite a file in the workspace.", WriteFile),
        ToolSpec("edit_file", "Replace one exact occurrence of old_string with new_string in a workspace file.", EditFile),
        ToolSpec("list_files", "List the files in the workspace (or under a directory of it), with sizes.", ListFiles),
        ToolSpec("get_baseline_scores", "Untrained base models' scores on this task's hidden eval, with provenance. "
                 "Your uplift is measured against the best of them.", NoArgs),
        ToolSpec("submit_job", "Validate the job in the workspace (job.toml + taskset/) and, if it is valid, train and "
                 "score it. Failed validations use up one of a limited number of attempts.", NoArgs),
    )
}


class ToolOutcome(BaseModel):
    """What a tool call shows the agent: `ok` is False for a refusal, `content` is the text."""

    ok: bool
    content: str


MAX_ARG_DEPTH = 32  # no tool takes arguments nested deeper; an agent's dict could nest without end


def _unencodable(arguments) -> str | None:
    """The first argument (dotted path) holding text that is not valid UTF-8, or nested past
    MAX_ARG_DEPTH, described. Iterative: the agent chooses the depth."""
    todo = [(arguments, "", 0)]
    while todo:
        value, where, depth = todo.pop()
        if depth > MAX_ARG_DEPTH:
            return f"argument {where!r} is nested more than {MAX_ARG_DEPTH} levels deep"
        if isinstance(value, str):
            problem = utf8_problem(value)
            if problem:
                return f"argument {where or 'arguments'!r} holds text that is not valid UTF-8 ({problem})"
        elif isinstance(value, dict):
            for key, item in reversed(list(value.items())):
                if isinstance(key, str) and utf8_problem(key):
                    return f"an argument name holds text that is not valid UTF-8 ({utf8_problem(key)})"
                todo.append((item, f"{where}.{key}" if where else str(key), depth + 1))
        elif isinstance(value, (list, tuple)):
            todo.extend((item, f"{where}.{i}" if where else str(i), depth + 1) for i, item in reversed(list(enumerate(value))))
    return None


def validate_args(name: str, arguments: dict) -> _Args | str:
    """The parsed arguments, or an error message naming what was wrong. Text that cannot be
    encoded as UTF-8 (a lone surrogate such as "\\ud800") is refused here, naming the argument."""
    spec = TOOLS.get(name)
    if spec is None:
        return f"unknown tool {name!r}; available tools: {', '.join(TOOLS)}"
    bad = _unencodable(arguments)
    if bad:
        return f"bad arguments for {name}: {bad}; send plain UTF-8 text"
    try:
        return spec.args.model_validate(arguments)
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(map(str, err['loc'])) or 'arguments'}: {err['msg']}" for err in e.errors())
        return f"bad arguments for {name}: {problems}"


def run_workspace_tool(ws: Workspace, task: TaskSpec, name: str, args: _Args) -> ToolOutcome:
    """Execute every tool but submit_job."""
    try:
        if isinstance(args, ReadFile):
            return ToolOutcome(ok=True, content=ws.read(args.path))
        if isinstance(args, WriteFile):
            rel = ws.write(args.path, args.content)
            return ToolOutcome(ok=True, content=f"wrote {rel} ({len(args.content.encode())} bytes)")
        if isinstance(args, EditFile):
            rel = ws.edit(args.path, args.old_string, args.new_string)
            return ToolOutcome(ok=True, content=f"edited {rel}")
        if isinstance(args, ListFiles):
            return ToolOutcome(ok=True, content=ws.listing(args.path))
    except WorkspaceError as e:
        return ToolOutcome(ok=False, content=f"refused: {e}")
    except OSError as e:  # e.g. a disk error; the episode goes on
        return ToolOutcome(ok=False, content=f"refused: {type(e).__name__}: {e.strerror or e}")
    except UnicodeError as e:  # validate_args and the workspace refuse such text first; never raise
        return ToolOutcome(ok=False, content=f"refused: text that is not valid UTF-8 ({e.reason})")
    if name == "get_baseline_scores":
        rows = baselines.for_family(task.family)
        best = max(rows, key=lambda b: b.score) if rows else None
        payload = {
            "family": task.family,
            "best_pre": best.score if best else None,
            "best_model": best.model if best else None,
            "scores": [b.model_dump(exclude_none=True) for b in rows],
        }
        return ToolOutcome(ok=True, content=json.dumps(payload, indent=2))
    raise ValueError(f"{name} is not a workspace tool")
