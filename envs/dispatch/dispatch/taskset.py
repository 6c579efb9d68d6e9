"""dispatch as a verifiers v1 taskset: the family's own tasks, tools and checker.

This is what `vf-eval dispatch` runs and what the hidden-eval scorer uses on a GPU host.
"""

import json
from pathlib import Path

import verifiers.v1 as vf

from dispatch import items
from dispatch.toolset import DispatchToolset

SYSTEM_PROMPT = (
    "You route support tickets with the dispatch tools. Look up the ticket, then its category's "
    "routing rules (the first rule that matches wins), then, when capacity matters, the team "
    "and any overflow team in turn. " + items.ANSWER_FORMAT
)


class DispatchData(vf.TaskData):
    answer: str
    world: dict = {}
    skill_tags: list[str] = []
    difficulty: int = 1


class DispatchTaskConfig(vf.TaskConfig):
    tools: vf.ToolsetConfig = vf.ToolsetConfig()


class DispatchTask(vf.Task[DispatchData, vf.State, DispatchTaskConfig]):
    @classmethod
    def toolsets(cls, config: DispatchTaskConfig) -> list[vf.Toolset]:
        return [DispatchToolset(config.tools)]

    @vf.reward(weight=1.0)
    async def correct(self, trace: vf.Trace) -> float:
        return float(items.check(trace.last_reply, self.data.answer))

    async def validate(self, runtime) -> bool:
        row = {"prompt": self.data.prompt_text, "answer": self.data.answer, "world": self.data.world}
        return items.check(items.solve(row)["reply"], self.data.answer)


class DispatchConfig(vf.TasksetConfig):
    seed: int = 0
    num_tasks: int = 200
    items_file: str | None = None  # JSONL item rows to load instead (how the hidden eval is scored)
    difficulty: int | None = None
    task: DispatchTaskConfig = DispatchTaskConfig()


class DispatchTaskset(vf.Taskset[DispatchTask, DispatchConfig]):
    def load(self) -> list[DispatchTask]:
        if self.config.items_file:
            rows = [json.loads(line) for line in Path(self.config.items_file).read_text().splitlines() if line.strip()]
        else:
            rows = items.generate(self.config.seed, self.config.num_tasks, difficulty=self.config.difficulty)
        return [
            DispatchTask(
                DispatchData(
                    id=row["id"],
                    prompt=row["prompt"],
                    system_prompt=SYSTEM_PROMPT,
                    answer=row["answer"],
                    world=row["world"],
                    difficulty=row["difficulty"],
                    skill_tags=row["skills"],
                ),
                self.config.task,
            )
            for row in rows
        ]
