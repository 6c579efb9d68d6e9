"""Training data and reward for clock: the job's own generator (longer chains than the eval),
the family's public tools and the kit's answer reading."""

import random
import re

import verifiers.v1 as vf
from trainergym_clock.dial import add, show, sub
from trainergym_clock.toolset import ClockToolset
from trainergym_kit.answers import last_match

SYSTEM = "Use the clock tools for every step, passing the previous result as `time`. Finish with `Answer: HH:MM`."
ANSWER = re.compile(r"answer\s*:\s*(\d\d:\d\d)", re.IGNORECASE)


def make_chain(rng: random.Random) -> tuple[str, str]:
    time = show(rng.randrange(24 * 60))
    lines = [f"The clock shows {time}."]
    for i in range(1, rng.randint(2, 6) + 1):
        op, x = rng.choice(("add", "subtract")), rng.randint(5, 900)
        lines.append(f"Step {i}: {op} {x} minutes.")
        time = add(time, x) if op == "add" else sub(time, x)
    return "\n".join(lines + ["What time does it show at the end?"]), time


class ShiftData(vf.TaskData):
    answer: str


class ShiftTaskConfig(vf.TaskConfig):
    tools: vf.ToolsetConfig = vf.ToolsetConfig()


class ShiftTask(vf.Task[ShiftData, vf.State, ShiftTaskConfig]):
    @classmethod
    def toolsets(cls, config: ShiftTaskConfig) -> list[vf.Toolset]:
        return [ClockToolset(config.tools)]

    @vf.reward(weight=1.0)
    async def exact_answer(self, trace: vf.Trace) -> float:
        return float(last_match(ANSWER, trace.last_reply) == self.data.answer)


class ShiftConfig(vf.TasksetConfig):
    seed: int = 3
    num_tasks: int = 1000
    task: ShiftTaskConfig = ShiftTaskConfig()


class ShiftTaskset(vf.Taskset[ShiftTask, ShiftConfig]):
    def load(self) -> list[ShiftTask]:
        rng = random.Random(self.config.seed)
        return [ShiftTask(ShiftData(prompt=p, system_prompt=SYSTEM, answer=a), self.config.task)
                for p, a in (make_chain(rng) for _ in range(self.config.num_tasks))]
