"""Task specs and the family registry.

A `TaskSpec` is everything the agent is told about one training task: what to teach, the
hard bounds its job must respect, the tools the trained model will have at eval time and a
few dev examples. Families are discovered through the `trainergym.families` entry-point
group, so a third-party package can add one; a task file names a family and overrides any
of its defaults.
"""

from __future__ import annotations

import functools
import tomllib
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

ALLOWED_BASE_MODELS = ("Qwen/Qwen3-0.6B", "Qwen/Qwen3-1.7B")


class Family(Protocol):
    """What a family module provides (see envs/calc_chain/trainergym_calc_chain/family.py).

    Items are plain dicts `{id, prompt, answer, skills, difficulty, world}` so families need
    not depend on trainergym. `world` is the per-item state the eval tools answer from (a JSON
    object; empty when the tools are stateless); a job's TaskData carries it in a `world`
    field, from which the eval Toolset's `setup_task` reads it. Trajectories are
    `{calls: [{tool, arguments, result}], reply}`.

    Job code runs in a sandbox that exposes only the family's `PUBLIC_MODULES` (the eval
    toolset and the tool semantics it needs); the generator, solver, checker and reference job
    stay out of reach. `solve` and `skills` read an item (prompt, and world where the family has
    one) in `READ_FORM` only, and raise ValueError on anything else.
    """

    ID: str
    TITLE: str
    HELD_OUT: bool
    TEACH: str
    ANSWER: str
    WORLD: str | None  # what an item's `world` holds, for the agent; None if tools are stateless
    EVAL_TOOLS: list[dict]
    EVAL_TOOLSET: str
    SKILL_TAGS: tuple[str, ...]
    DIFFICULTY_LEVELS: tuple[int, ...]  # easiest first; the hardest needs >= 3 dependent tool calls
    REFERENCE_JOB: Path  # the job the reference agent writes; outside the package, never importable by jobs
    PUBLIC_MODULES: tuple[str, ...]  # file names in the package dir job code may import (e.g. "toolset.py")
    PUBLIC_DEPENDENCIES: tuple[str, ...]  # optional: packages whose own PUBLIC_MODULES job code may import too
    READ_FORM: str  # the form of prompt (and world) `solve` and `skills` can read, for job authors

    def generate(self, seed: int | str, n: int, namespace: str = "public", difficulty: int | None = None) -> list[dict]:
        """`n` items for `seed` in `namespace` ("public", "dev", "hidden", "probe", ...), all of one
        `difficulty` level or mixed. The same arguments give the same items; each namespace draws
        from a stream of its own."""

    def check(self, reply: str, answer: str) -> bool:
        """Whether a model's final `reply` gives `answer`: the eval's own judgment."""

    def solve(self, item: dict) -> dict:
        """The reference solver's trajectory on `item` (`{calls, reply}`); ValueError when the item
        is not in READ_FORM."""

    def distractors(self, item: dict) -> list[dict]:
        """Plausible wrong replies to `item` in its answer format, each `{kind, reply}`, `kind`
        naming the mistake that produces it."""

    def skills(self, row: dict) -> set[str]:
        """The item's skill tags, read as `solve` reads it; ValueError likewise."""

    def dev_examples(self) -> list[dict]:
        """The few public items the task shows the agent."""


@functools.cache
def families() -> dict[str, Family]:
    """Installed families by id."""
    return {ep.name: ep.load() for ep in entry_points(group="trainergym.families")}


def get_family(family_id: str) -> Family:
    """The installed family `family_id`; KeyError naming the installed ones otherwise."""
    found = families()
    if family_id not in found:
        raise KeyError(f"unknown family {family_id!r}; installed: {', '.join(sorted(found)) or 'none'}")
    return found[family_id]


class Range(BaseModel):
    """A closed interval: `value in r` tests it, `str(r)` shows it as `[min, max]`."""

    model_config = ConfigDict(frozen=True)
    min: float
    max: float

    def __contains__(self, value: float) -> bool:
        return self.min <= value <= self.max

    def __str__(self) -> str:
        return f"[{self.min:g}, {self.max:g}]"


class Bounds(BaseModel):
    """Hard constraints a job must respect; `submit_job` refuses anything outside them."""

    model_config = ConfigDict(frozen=True)
    base_models: list[str] = list(ALLOWED_BASE_MODELS)
    max_steps: Range = Range(min=1, max=300)
    seq_len: Range = Range(min=512, max=8192)
    batch_size: Range = Range(min=16, max=512)
    group_size: Range = Range(min=2, max=32)
    max_tokens: Range = Range(min=64, max=4096)
    max_turns: Range = Range(min=1, max=16)
    max_items: int = Field(10_000, ge=32, le=100_000, description="most tasks a finite taskset may yield (all are read)")
    gpu: str = Field("A40", description="GPU class the job is budgeted and memory-checked for")
    gpu_count: int = Field(2, description="GPUs of one job: at least one trains and one serves rollouts")
    gpu_hours: float = Field(2.0, description="GPU-hour budget of one job (train only)")

    @field_validator("gpu_count")
    @classmethod
    def _two_gpus(cls, count: int) -> int:
        # prime-rl trains on some GPUs while vLLM samples on others; one GPU cannot hold both roles.
        if count < 2:
            raise ValueError(f"bounds.gpu_count = {count}: a job needs at least 2 GPUs, one to train and one for "
                             "inference")
        return count


class Example(BaseModel):
    """One task item: id, prompt, expected answer, skill tags, difficulty and the `world` its eval
    tools answer from."""

    model_config = ConfigDict(frozen=True)
    id: str
    prompt: str
    answer: str
    skills: list[str] = []
    difficulty: int = 1
    world: dict = {}


class TaskSpec(BaseModel):
    """Everything the agent is told about one task: what to teach, the answer format, the bounds its
    job must respect, the eval tools and toolset, dev examples, and its turn and submit budgets.
    Frozen; a base model outside `ALLOWED_BASE_MODELS` is refused (ValueError)."""

    model_config = ConfigDict(frozen=True)

    id: str
    family: str
    title: str
    teach: str
    answer_format: str
    world: str | None = Field(None, description="what each task's `world` field holds, when the eval tools need one")
    bounds: Bounds = Bounds()
    eval_tools: list[dict] = Field(description="OpenAI function schemas of the eval tool interface")
    eval_toolset: str = Field(description="import path of the eval Toolset (module:Class)")
    dev_examples: list[Example]
    max_turns: int = 40
    max_submit_attempts: int = 3
    held_out: bool = False

    @model_validator(mode="after")
    def _known_models(self) -> TaskSpec:
        unknown = set(self.bounds.base_models) - set(ALLOWED_BASE_MODELS)
        if unknown:
            raise ValueError(f"base models {sorted(unknown)} are not supported; choose from {ALLOWED_BASE_MODELS}")
        return self

    @property
    def eval_tool_names(self) -> list[str]:
        """The eval tools' names, in order."""
        return [tool["function"]["name"] for tool in self.eval_tools]

    def brief(self) -> str:
        """The task as an agent first reads it (the env's first observation): what to teach,
        the bounds, the eval tools, the answer format and three dev examples."""
        b = self.bounds
        examples = "\n\n".join(f"Example {i + 1}:\n{ex.prompt}\nExpected answer: {ex.answer}"
                               for i, ex in enumerate(self.dev_examples[:3]))
        tools = ", ".join(self.eval_tool_names)
        return (
            f"TASK {self.id}: {self.title}\n\n{self.teach}\n\n"
            f"Constraints: base model one of {', '.join(b.base_models)}; max_steps {b.max_steps}; seq_len {b.seq_len}; "
            f"batch_size {b.batch_size}; group_size {b.group_size}; {b.gpu_count}x {b.gpu}, {b.gpu_hours} GPU-hours.\n"
            f"Eval tools the trained model will have: {tools} (see eval_tools.json).\n"
            f"Answer format: {self.answer_format}\n\n{examples}\n\n"
            f"Your workspace holds INSTRUCTIONS.md (read it first), job.toml and eval_tools.json. "
            f"Write the job, then call submit_job. You have {self.max_submit_attempts} submit attempts and "
            f"{self.max_turns} turns."
        )


def family_task(family_id: str) -> dict[str, Any]:
    """A family's default task, as a dict a task file can override."""
    fam = get_family(family_id)
    return {
        "id": fam.ID,
        "family": fam.ID,
        "title": fam.TITLE,
        "teach": fam.TEACH,
        "answer_format": fam.ANSWER,
        "world": getattr(fam, "WORLD", None),
        "eval_tools": fam.EVAL_TOOLS,
        "eval_toolset": fam.EVAL_TOOLSET,
        "dev_examples": fam.dev_examples(),
        "held_out": fam.HELD_OUT,
    }


def _merge(base: dict, override: dict) -> dict:
    out = dict(base)
    for key, value in override.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def load_task(ref: str | Path | TaskSpec) -> TaskSpec:
    """A task by family id (`calc_chain`) or by task file path (`examples/tasks/x.toml`)."""
    if isinstance(ref, TaskSpec):
        return ref
    path = Path(ref)
    if path.suffix == ".toml" or path.exists():
        if not path.is_file():
            raise FileNotFoundError(f"task file {path} does not exist")
        data = tomllib.loads(path.read_text())
        if "family" not in data:
            raise ValueError(f"task file {path} names no `family`")
        return TaskSpec.model_validate(_merge(family_task(data["family"]), data))
    return TaskSpec.model_validate(family_task(str(ref)))
