"""Training data and reward for calc_chain.

The data generator is written here rather than taken from the family so the job
controls its own mix: more long chains than the eval has (they carry most of the
errors), every operation represented, operands of 2-4 digits.
"""

import random
import re

import verifiers.v1 as vf
from trainergym_calc_chain.toolset import CalcChainToolset
from trainergym_kit.answers import last_match

SYSTEM = (
    "You solve chained arithmetic with calculator tools. Call one tool per step, passing "
    "the previous result as `a`. Never compute in your head. Finish with a line "
    "`Answer: <integer>`."
)
WORDING = {
    "add": "add {x} to it",
    "sub": "subtract {x} from it",
    "mul": "multiply it by {x}",
    "div": "integer-divide it by {x} (floor division)",
    "mod": "take the remainder of it divided by {x}",
}
LEVELS = {1: (2, 3, 2), 2: (3, 4, 3), 3: (5, 6, 4)}  # steps lo, hi, operand digits


def compute(op: str, a: int, b: int) -> int:
    return {"add": a + b, "sub": a - b, "mul": a * b}[op] if op in ("add", "sub", "mul") else (a // b if op == "div" else a % b)


def make_chain(rng: random.Random, level: int) -> tuple[str, int]:
    lo, hi, digits = LEVELS[level]
    ops = ["add", "sub", "mul"] + (["div"] if level >= 2 else []) + (["mod"] if level >= 3 else [])
    value = rng.randint(10 ** (digits - 1), 10**digits - 1)
    lines = [f"Start with {value}."]
    for i in range(1, rng.randint(lo, hi) + 1):
        op = rng.choice(ops)
        if op in ("div", "mod") and value <= 0:
            op = "add"
        if op == "mul":
            x = rng.randint(3, max(99, 10 ** (digits - 1)))
        elif op in ("div", "mod"):
            x = rng.randint(3, max(4, min(abs(value) // 2, 3 * 10 ** (digits - 1))))
        else:
            x = rng.randint(10 ** (digits - 1), 10**digits - 1)
        lines.append(f"Step {i}: {WORDING[op].format(x=x)}.")
        value = compute(op, value, x)
    lines.append("What is the final value? Use the calculator tools for every step.")
    return "\n".join(lines), value


def replay(prompt: str) -> int:
    """Recompute a chain from its wording: the gold check of `validate`."""
    value = int(re.search(r"Start with (-?\d+)", prompt).group(1))
    for line in re.findall(r"Step \d+: (.*)\.", prompt):
        for op, words in WORDING.items():
            m = re.fullmatch(re.escape(words).replace(re.escape("{x}"), r"(-?\d+)"), line)
            if m:
                value = compute(op, value, int(m.group(1)))
                break
    return value


ANSWER = re.compile(r"answer\s*:\s*([+-]?[\d,]+)", re.IGNORECASE)


def final_integer(reply: str) -> int | None:
    """The integer on the last `Answer:` line after any thinking; None if absent."""
    found = last_match(ANSWER, reply)
    return int(found.replace(",", "")) if found is not None else None


class ChainData(vf.TaskData):
    answer: str
    level: int = 1


class ChainTaskConfig(vf.TaskConfig):
    tools: vf.ToolsetConfig = vf.ToolsetConfig()


class ChainTask(vf.Task[ChainData, vf.State, ChainTaskConfig]):
    @classmethod
    def toolsets(cls, config: ChainTaskConfig) -> list[vf.Toolset]:
        return [CalcChainToolset(config.tools)]

    @vf.reward(weight=1.0)
    async def exact_answer(self, trace: vf.Trace) -> float:
        return float(final_integer(trace.last_reply) == int(self.data.answer))

    @vf.metric
    async def tool_calls(self, trace: vf.Trace) -> float:
        return float(len(trace.tool_messages))

    async def validate(self, runtime) -> bool:
        return replay(self.data.prompt_text) == int(self.data.answer)


class ChainConfig(vf.TasksetConfig):
    seed: int = 7
    num_tasks: int = 2000
    task: ChainTaskConfig = ChainTaskConfig()


class ChainTaskset(vf.Taskset[ChainTask, ChainConfig]):
    def load(self) -> list[ChainTask]:
        rng = random.Random(self.config.seed)
        tasks = []
        for _ in range(self.config.num_tasks):
            level = rng.choices((1, 2, 3), weights=(2, 4, 4))[0]
            prompt, answer = make_chain(rng, level)
            data = ChainData(prompt=prompt, system_prompt=SYSTEM, answer=str(answer), level=level)
            tasks.append(ChainTask(data, self.config.task))
        return tasks
