"""string_pipeline as a verifiers v1 taskset: the family's own tasks, tools and checker.

This is what `vf-eval string_pipeline` runs and what the hidden-eval scorer uses on a GPU host.
"""

import json
from pathlib import Path

import verifiers.v1 as vf

from string_pipeline import items
from string_pipeline.toolset import StringPipelineToolset

SYSTEM_PROMPT = (
    "You transform strings with text tools. Call one tool per step, passing the previous "
    "step's output as `text`. " + items.ANSWER_FORMAT
)


class StringPipelineData(vf.TaskData):
    answer: str
    world: dict = {}
    skill_tags: list[str] = []
    difficulty: int = 1


class StringPipelineTaskConfig(vf.TaskConfig):
    tools: vf.ToolsetConfig = vf.ToolsetConfig()


class StringPipelineTask(vf.Task[StringPipelineData, vf.State, StringPipelineTaskConfig]):
    @classmethod
    def toolsets(cls, config: StringPipelineTaskConfig) -> list[vf.Toolset]:
        return [StringPipelineToolset(config.tools)]

    @vf.reward(weight=1.0)
    async def correct(self, trace: vf.Trace) -> float:
        return float(items.check(trace.last_reply, self.data.answer))

    async def validate(self, runtime) -> bool:
        row = {"prompt": self.data.prompt_text, "answer": self.data.answer, "world": self.data.world}
        return items.check(items.solve(row)["reply"], self.data.answer)


class StringPipelineConfig(vf.TasksetConfig):
    seed: int = 0
    num_tasks: int = 200
    items_file: str | None = None  # JSONL item rows to load instead (how the hidden eval is scored)
    difficulty: int | None = None
    task: StringPipelineTaskConfig = StringPipelineTaskConfig()


class StringPipelineTaskset(vf.Taskset[StringPipelineTask, StringPipelineConfig]):
    def load(self) -> list[StringPipelineTask]:
        if self.config.items_file:
            rows = [json.loads(line) for line in Path(self.config.items_file).read_text().splitlines() if line.strip()]
        else:
            rows = items.generate(self.config.seed, self.config.num_tasks, difficulty=self.config.difficulty)
        return [
            StringPipelineTask(
                StringPipelineData(
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
