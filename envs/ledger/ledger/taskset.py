"""ledger as a verifiers v1 taskset: the family's own tasks, tools and checker.

This is what `vf-eval ledger` runs and what the hidden-eval scorer uses on a GPU host.
"""

import json
from pathlib import Path

import verifiers.v1 as vf

from ledger import items
from ledger.toolset import LedgerToolset

SYSTEM_PROMPT = (
    "You keep a bank's books with the ledger tools. The balances, fees and overdraft limit are "
    "only on the ledger: post every operation with a tool call, in order, then read the balance "
    "you are asked for. " + items.ANSWER_FORMAT
)


class LedgerData(vf.TaskData):
    answer: str
    world: dict = {}
    skill_tags: list[str] = []
    difficulty: int = 1


class LedgerTaskConfig(vf.TaskConfig):
    tools: vf.ToolsetConfig = vf.ToolsetConfig()


class LedgerTask(vf.Task[LedgerData, vf.State, LedgerTaskConfig]):
    @classmethod
    def toolsets(cls, config: LedgerTaskConfig) -> list[vf.Toolset]:
        return [LedgerToolset(config.tools)]

    @vf.reward(weight=1.0)
    async def correct(self, trace: vf.Trace) -> float:
        return float(items.check(trace.last_reply, self.data.answer))

    async def validate(self, runtime) -> bool:
        row = {"prompt": self.data.prompt_text, "world": self.data.world}
        return items.check(items.solve(row)["reply"], self.data.answer)


class LedgerConfig(vf.TasksetConfig):
    seed: int = 0
    num_tasks: int = 200
    items_file: str | None = None  # JSONL item rows to load instead (how the hidden eval is scored)
    difficulty: int | None = None
    task: LedgerTaskConfig = LedgerTaskConfig()


class LedgerTaskset(vf.Taskset[LedgerTask, LedgerConfig]):
    def load(self) -> list[LedgerTask]:
        if self.config.items_file:
            rows = [json.loads(line) for line in Path(self.config.items_file).read_text().splitlines() if line.strip()]
        else:
            rows = items.generate(self.config.seed, self.config.num_tasks, difficulty=self.config.difficulty)
        return [
            LedgerTask(
                LedgerData(
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
