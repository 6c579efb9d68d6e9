"""multi_hop as a verifiers v1 taskset: the family's own tasks, tools and checker.

This is what `vf-eval multi_hop` runs and what the hidden-eval scorer uses on a GPU host.
"""

import json
from pathlib import Path

import verifiers.v1 as vf

from multi_hop import items
from multi_hop.toolset import MultiHopToolset

SYSTEM_PROMPT = (
    "You answer questions about people in a directory you can only reach through the people "
    "tools. Follow the chain of relations one tool call at a time, passing the full name each "
    "call returns to the next call, then look up the attribute. " + items.ANSWER_FORMAT
)


class MultiHopData(vf.TaskData):
    answer: str
    world: dict = {}
    skill_tags: list[str] = []
    difficulty: int = 1


class MultiHopTaskConfig(vf.TaskConfig):
    tools: vf.ToolsetConfig = vf.ToolsetConfig()


class MultiHopTask(vf.Task[MultiHopData, vf.State, MultiHopTaskConfig]):
    @classmethod
    def toolsets(cls, config: MultiHopTaskConfig) -> list[vf.Toolset]:
        return [MultiHopToolset(config.tools)]

    @vf.reward(weight=1.0)
    async def correct(self, trace: vf.Trace) -> float:
        return float(items.check(trace.last_reply, self.data.answer))

    async def validate(self, runtime) -> bool:
        row = {"prompt": self.data.prompt_text, "world": self.data.world}
        return items.check(items.solve(row)["reply"], self.data.answer)


class MultiHopConfig(vf.TasksetConfig):
    seed: int = 0
    num_tasks: int = 200
    items_file: str | None = None  # JSONL item rows to load instead (how the hidden eval is scored)
    difficulty: int | None = None
    task: MultiHopTaskConfig = MultiHopTaskConfig()


class MultiHopTaskset(vf.Taskset[MultiHopTask, MultiHopConfig]):
    def load(self) -> list[MultiHopTask]:
        if self.config.items_file:
            rows = [json.loads(line) for line in Path(self.config.items_file).read_text().splitlines() if line.strip()]
        else:
            rows = items.generate(self.config.seed, self.config.num_tasks, difficulty=self.config.difficulty)
        return [
            MultiHopTask(
                MultiHopData(
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
