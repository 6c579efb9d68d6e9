"""The verifiers v1 taskset shell every family shares: one task per item, the family's eval
toolset, an exact-match reward through the family's checker and validation through its solver.

A family's `taskset.py` names only what is its own:

    class CalcChainTask(ItemTask):
        ITEMS = items                  # the family's items module: generate, check, solve
        TOOLSET = CalcChainToolset

    class CalcChainTaskset(ItemTaskset):
        TASK = CalcChainTask
        SYSTEM_PROMPT = "You solve chained arithmetic ..."

This is what `vf-eval trainergym-calc-chain` runs and what trainergym's hidden-eval scorer
loads on a GPU host (over the hidden items, through `items_file`).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import ClassVar

import verifiers.v1 as vf


class ItemData(vf.TaskData):
    """One family item as task data: the expected answer (as the checker takes it), the world
    the eval tools answer from (`{}` for stateless tools), the item's skill tags and level."""

    answer: str
    world: dict = {}
    skill_tags: list[str] = []
    difficulty: int = 1


class ItemTaskConfig(vf.TaskConfig):
    """The task's config: that of the eval toolset each rollout starts."""

    tools: vf.ToolsetConfig = vf.ToolsetConfig()


class ItemTask(vf.Task[ItemData, vf.State, ItemTaskConfig]):
    """A task over one family item. Subclasses set `ITEMS` (the family's items module, with
    `check(reply, answer)` and `solve(row)`) and `TOOLSET` (its eval `vf.Toolset` class).

    Each rollout gets a fresh `TOOLSET`. The one reward, `correct` (weight 1), is 1.0 iff
    `ITEMS.check(last reply, answer)`, else 0.0. `validate` (verifiers' model-free check) is
    True iff the family's reference solver, reading the task's prompt and world, reaches an
    answer the checker accepts.
    """

    ITEMS: ClassVar[ModuleType]
    TOOLSET: ClassVar[type[vf.Toolset]]

    @classmethod
    def toolsets(cls, config: ItemTaskConfig) -> list[vf.Toolset]:
        return [cls.TOOLSET(config.tools)]

    @vf.reward(weight=1.0)
    async def correct(self, trace: vf.Trace) -> float:
        return float(self.ITEMS.check(trace.last_reply, self.data.answer))

    async def validate(self, runtime) -> bool:
        row = {"prompt": self.data.prompt_text, "answer": self.data.answer, "world": self.data.world}
        return self.ITEMS.check(self.ITEMS.solve(row)["reply"], self.data.answer)


class ItemTasksetConfig(vf.TasksetConfig):
    """Which items a family taskset loads: `num_tasks` generated items for `seed` (all levels
    mixed, or only `difficulty`), or the rows of `items_file` instead."""

    seed: int = 0
    num_tasks: int = 200
    items_file: str | None = None  # JSONL item rows to load instead (how the hidden eval is scored)
    difficulty: int | None = None
    task: ItemTaskConfig = ItemTaskConfig()


class ItemTaskset(vf.Taskset[ItemTask, ItemTasksetConfig]):
    """A family's taskset. Subclasses set `TASK` (their `ItemTask` subclass) and
    `SYSTEM_PROMPT` (given with every task).

    `load()` returns one `TASK` per item row, in order: the rows of `config.items_file` (JSON
    lines `{id, prompt, answer, skills, difficulty, world}`; blank lines skipped) when set, else
    `TASK.ITEMS.generate(config.seed, config.num_tasks, difficulty=config.difficulty)`. The
    tasks carry the row's id, prompt, answer, world (`{}` when the row has none), skills and
    level; loading is deterministic.
    """

    TASK: ClassVar[type[ItemTask]]
    SYSTEM_PROMPT: ClassVar[str]

    @classmethod
    def task_type(cls) -> type[ItemTask]:
        # verifiers reads the task class off the generic base, which names ItemTask itself.
        return cls.TASK

    def load(self) -> list[ItemTask]:
        if self.config.items_file:
            lines = Path(self.config.items_file).read_text().splitlines()
            rows = [json.loads(line) for line in lines if line.strip()]
        else:
            rows = self.TASK.ITEMS.generate(self.config.seed, self.config.num_tasks, difficulty=self.config.difficulty)
        return [self.TASK(self._data(row), self.config.task) for row in rows]

    def _data(self, row: dict) -> ItemData:
        return ItemData(id=row["id"], prompt=row["prompt"], system_prompt=self.SYSTEM_PROMPT, answer=row["answer"],
                        world=row.get("world") or {}, difficulty=row["difficulty"], skill_tags=row["skills"])
