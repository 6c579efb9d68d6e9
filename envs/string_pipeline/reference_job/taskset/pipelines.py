"""Training data and reward for string_pipeline.

The data generator is written here rather than taken from the family so the job
controls its own mix: 40% long pipelines (5-6 steps with two-digit Caesar shifts and
rotations, where most errors happen), every operation represented, start strings of
lower-case letters, letters and digits, or mixed case.
"""

import random
import re
import string

import verifiers.v1 as vf
from trainergym_kit.answers import last_match
from trainergym_string_pipeline.toolset import StringPipelineToolset

SYSTEM = (
    "You transform strings with text tools. Call one tool per step, passing the previous "
    "step's output as `text`. Never transform in your head. Finish with a line "
    "`Answer: <final string>` giving the exact characters (case-sensitive, no quotes)."
)
WORDING = {
    "reverse": "reverse it",
    "swapcase": "swap the case of every letter",
    "caesar": "Caesar-shift its letters forward by {x} (digits unchanged, case kept)",
    "rotate": "rotate it left by {x} (move the first character to the end, {x} times)",
    "replace": 'replace every "{old}" with "{new}"',
    "take": "keep only the first {x} characters",
    "drop": "drop the first {x} characters",
    "dedupe": "remove repeated characters (case-sensitive), keeping the first occurrence of each",
}
OPS = tuple(WORDING)
EASY = ("reverse", "swapcase", "replace", "take", "drop")
LEVELS = {1: (2, 2, 8, 11, (1, 9)), 2: (3, 4, 10, 14, (1, 9)), 3: (5, 6, 12, 16, (10, 25))}
ALPHABETS = (string.ascii_lowercase, string.ascii_lowercase + string.digits, string.ascii_letters + string.digits)


def shift_letters(text: str, x: int) -> str:
    def one(c: str) -> str:
        for a in (string.ascii_lowercase, string.ascii_uppercase):
            if c in a:
                return a[(a.index(c) + x) % 26]
        return c
    return "".join(one(c) for c in text)


def transform(op: str, text: str, x: int = 0, old: str = "", new: str = "") -> str:
    """The eval tools' semantics, reimplemented for the job's own gold answers."""
    if op == "rotate":
        x %= len(text)
        return text[x:] + text[:x]
    return {
        "reverse": lambda: text[::-1],
        "swapcase": lambda: text.swapcase(),
        "caesar": lambda: shift_letters(text, x),
        "replace": lambda: text.replace(old, new),
        "take": lambda: text[:x],
        "drop": lambda: text[x:],
        "dedupe": lambda: "".join(dict.fromkeys(text)),
    }[op]()


def make_pipeline(rng: random.Random, level: int) -> tuple[str, str] | None:
    """(prompt, answer), or None when a drawn step would leave the string unchanged."""
    lo, hi, len_lo, len_hi, shifts = LEVELS[level]
    alphabet = rng.choice(ALPHABETS)
    text = "".join(rng.choice(alphabet) for _ in range(rng.randint(len_lo, len_hi)))
    lines = [f'Start with the string "{text}".']
    ops = EASY if level == 1 else OPS
    plan = ["caesar", "rotate"] if level == 3 else []  # the hard steps every long pipeline has
    plan += [rng.choice(ops) for _ in range(rng.randint(lo, hi) - len(plan))]
    rng.shuffle(plan)
    if any(a == b for a, b in zip(plan, plan[1:])):
        return None  # a repeated reverse or swapcase would just undo itself
    for i, op in enumerate(plan, 1):
        args = {"x": rng.randint(*shifts)} if op in ("caesar", "rotate") else {}
        if op == "take":
            args = {"x": rng.randint(len(text) // 2 + 2, len(text) - 1)} if len(text) >= 7 else None
        elif op == "drop":
            args = {"x": rng.randint(1, min(4, len(text) - 6))} if len(text) >= 7 else None
        elif op == "replace":
            args = {"old": rng.choice(text), "new": "".join(rng.choices(alphabet, k=rng.randint(1, 2)))}
        if args is None or transform(op, text, **args) == text:
            return None
        lines.append(f"Step {i}: {WORDING[op].format(**args)}.")
        text = transform(op, text, **args)
    if len(text) < 4 or not any(c.isalpha() for c in text):
        return None
    lines.append("What is the final string? Use the text tools for every step, passing each result to the next step.")
    return "\n".join(lines), text


def replay(prompt: str) -> str | None:
    """Recompute a pipeline from its wording: the gold check of `validate`."""
    text = re.search(r'Start with the string "(\w+)"', prompt).group(1)
    for line in re.findall(r"Step \d+: (.*)\.", prompt):
        for op, words in WORDING.items():
            pattern = re.escape(words).replace(re.escape("{x}"), r"(?P<x>\d+)", 1).replace(re.escape("{x}"), r"(?P=x)")
            pattern = pattern.replace(re.escape("{old}"), r"(?P<old>\w+)").replace(re.escape("{new}"), r"(?P<new>\w+)")
            m = re.fullmatch(pattern, line)
            if m:
                args = {k: int(v) if k == "x" else v for k, v in m.groupdict().items()}
                text = transform(op, text, **args)
                break
        else:
            return None
    return text


ANSWER = re.compile(r"answer\s*\**\s*:(.*)", re.IGNORECASE)


def final_answer(reply: str | None) -> str | None:
    """The last `Answer:` line after any think block, without surrounding quotes/backticks."""
    found = last_match(ANSWER, reply)
    return (found.strip(" \t\r\"'`*") or None) if found is not None else None


class PipelineData(vf.TaskData):
    answer: str
    level: int = 1


class PipelineTaskConfig(vf.TaskConfig):
    tools: vf.ToolsetConfig = vf.ToolsetConfig()


class PipelineTask(vf.Task[PipelineData, vf.State, PipelineTaskConfig]):
    @classmethod
    def toolsets(cls, config: PipelineTaskConfig) -> list[vf.Toolset]:
        return [StringPipelineToolset(config.tools)]

    @vf.reward(weight=1.0)
    async def exact_answer(self, trace: vf.Trace) -> float:
        return float(final_answer(trace.last_reply) == self.data.answer)

    @vf.metric
    async def tool_calls(self, trace: vf.Trace) -> float:
        return float(len(trace.tool_messages))

    async def validate(self, runtime) -> bool:
        return replay(self.data.prompt_text) == self.data.answer


class PipelineConfig(vf.TasksetConfig):
    seed: int = 7
    num_tasks: int = 2000
    task: PipelineTaskConfig = PipelineTaskConfig()


class PipelineTaskset(vf.Taskset[PipelineTask, PipelineConfig]):
    def load(self) -> list[PipelineTask]:
        rng = random.Random(self.config.seed)
        tasks = []
        while len(tasks) < self.config.num_tasks:
            level = rng.choices((1, 2, 3), weights=(2, 3, 5))[0]
            made = make_pipeline(rng, level)
            if made:
                prompt, answer = made
                data = PipelineData(prompt=prompt, system_prompt=SYSTEM, answer=answer, level=level)
                tasks.append(PipelineTask(data, self.config.task))
        return tasks
