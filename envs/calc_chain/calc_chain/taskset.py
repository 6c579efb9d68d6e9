"""calc_chain as a verifiers v1 taskset: the family's own tasks, tools and checker.

This is what `vf-eval calc_chain` runs and what the hidden-eval scorer uses on a GPU host.
"""

import json
from pathlib import Path

import verifiers.v1 as vf

from calc_chain import items
from calc_chain.toolset import CalcChainToolset

SYSTEM_PROMPT = (
    "You solve chained arithmetic with calculator tools. Call one tool per step, feeding "
    "each result into the next step. " + items.ANSWER_FORMAT
)


class CalcChainData(vf.TaskData):
    answer: str
    skill_tags: list[str] = []
    difficulty: int = 1


class CalcChainTaskConfig(vf.TaskConfig):
    tools: vf.ToolsetConfig = vf.ToolsetConfig()


class CalcChainTask(vf.Task[CalcChainData, vf.State, CalcChainTaskConfig]):
    @classmethod
    def toolsets(cls, config: CalcChainTaskConfig) -> list[vf.Toolset]:
        return [CalcChainToolset(config.tools)]

    @vf.reward(weight=1.0)
    async def correct(self, trace: vf.Trace) -> float:
        return float(items.check(trace.last_reply, self.data.answer))

    async def validate(self, runtime) -> bool:
        return items.check(items.solve({"prompt": self.data.prompt_text})["reply"], self.data.answer)


class CalcChainConfig(vf.TasksetConfig):
    seed: int = 0
    num_tasks: int = 200
    items_file: str | None = None  # JSONL item rows to load instead (how the hidden eval is scored)
    difficulty: int | None = None
    task: CalcChainTaskConfig = CalcChainTaskConfig()


class CalcChainTaskset(vf.Taskset[CalcChainTask, CalcChainConfig]):
    def load(self) -> list[CalcChainTask]:
        if self.config.items_file:
            rows = [json.loads(line) for line in Path(self.config.items_file).read_text().splitlines() if line.strip()]
        else:
            rows = items.generate(self.config.seed, self.config.num_tasks, difficulty=self.config.difficulty)
        return [
            CalcChainTask(
                CalcChainData(
                    id=row["id"],
                    prompt=row["prompt"],
                    system_prompt=SYSTEM_PROMPT,
                    answer=row["answer"],
                    difficulty=row["difficulty"],
                    skill_tags=row["skills"],
                ),
                self.config.task,
            )
            for row in rows
        ]
