"""triage as a verifiers v1 taskset: the family's own tasks, tools and checker.

This is what `vf-eval triage` runs and what the hidden-eval scorer uses on a GPU host.
"""

import json
from pathlib import Path

import verifiers.v1 as vf

from triage import items
from triage.toolset import TriageToolset

SYSTEM_PROMPT = (
    "You are an on-call engineer triaging incidents with the ops tools. Look facts up with the tools; "
    "never guess deploy ids, times or owners. " + items.ANSWER_FORMAT
)


class TriageData(vf.TaskData):
    answer: str
    world: dict = {}
    skill_tags: list[str] = []
    difficulty: int = 1


class TriageTaskConfig(vf.TaskConfig):
    tools: vf.ToolsetConfig = vf.ToolsetConfig()


class TriageTask(vf.Task[TriageData, vf.State, TriageTaskConfig]):
    @classmethod
    def toolsets(cls, config: TriageTaskConfig) -> list[vf.Toolset]:
        return [TriageToolset(config.tools)]

    @vf.reward(weight=1.0)
    async def correct(self, trace: vf.Trace) -> float:
        return float(items.check(trace.last_reply, self.data.answer))

    async def validate(self, runtime) -> bool:
        item = {"prompt": self.data.prompt_text, "world": self.data.world, "answer": self.data.answer}
        return items.check(items.solve(item)["reply"], self.data.answer)


class TriageConfig(vf.TasksetConfig):
    seed: int = 0
    num_tasks: int = 200
    items_file: str | None = None  # JSONL item rows to load instead (how the hidden eval is scored)
    difficulty: int | None = None
    task: TriageTaskConfig = TriageTaskConfig()


class TriageTaskset(vf.Taskset[TriageTask, TriageConfig]):
    def load(self) -> list[TriageTask]:
        if self.config.items_file:
            rows = [json.loads(line) for line in Path(self.config.items_file).read_text().splitlines() if line.strip()]
        else:
            rows = items.generate(self.config.seed, self.config.num_tasks, difficulty=self.config.difficulty)
        return [
            TriageTask(
                TriageData(
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
