"""clock items: a start time and a chain of minute shifts, each applied to the previous result.

Pure Python (no verifiers import). Item k of a stream is seeded by the kit
(`trainergym_kit.items.seeded_items`), so hidden, probe, dev and public items never meet.
"""

from __future__ import annotations

import random
import re

from trainergym_kit.answers import last_match
from trainergym_kit.items import seeded_items, strict

from trainergym_clock.dial import DAY, add, minutes, show, sub

OPS = {"add": add, "sub": sub}
_PHRASES = {"add": "add {x} minutes", "sub": "subtract {x} minutes"}
DIFFICULTY = {1: (2, 2), 2: (3, 3), 3: (4, 5)}  # steps, fewest and most; level 3 needs 4+ dependent calls
DIFFICULTY_LEVELS = tuple(DIFFICULTY)
SKILL_TAGS = ("add", "sub", "past_midnight", "long_chain")
ANSWER_FORMAT = "Finish with a line `Answer: HH:MM` (24-hour clock)."
MAX_STEPS = 50  # the parser refuses longer chains, so reading stays fast on any prompt


def _skills(start: str, steps: list[tuple[str, int]]) -> set[str]:
    tags, total = {op for op, _ in steps}, minutes(start)
    for op, x in steps:
        total += x if op == "add" else -x
        if not 0 <= total < DAY:
            tags.add("past_midnight")
        total %= DAY
    return tags | ({"long_chain"} if len(steps) >= 4 else set())


def _times(start: str, steps: list[tuple[str, int]]) -> list[str]:
    times = [start]
    for op, x in steps:
        times.append(OPS[op](times[-1], x))
    return times


def _prompt(start: str, steps: list[tuple[str, int]]) -> str:
    lines = [f"The clock shows {start}."]
    lines += [f"Step {i}: {_PHRASES[op].format(x=x)}." for i, (op, x) in enumerate(steps, 1)]
    lines.append("What time does it show at the end? Use the clock tools for every step. " + ANSWER_FORMAT)
    return "\n".join(lines)


def _make(rng: random.Random, item_id: str, level: int) -> dict:
    lo, hi = DIFFICULTY[level]
    start = show(rng.randrange(DAY))
    steps = [(rng.choice(tuple(OPS)), rng.randint(5, 600)) for _ in range(rng.randint(lo, hi))]
    return {"id": item_id, "prompt": _prompt(start, steps), "answer": _times(start, steps)[-1],
            "skills": sorted(_skills(start, steps)), "difficulty": level, "world": {}}


def generate(seed: int | str, n: int, namespace: str = "public", difficulty: int | None = None) -> list[dict]:
    """`n` items for `seed`, item k from its own RNG (see `trainergym_kit.items.seeded_items`);
    with no `difficulty`, levels mix 30/40/30 (1/2/3)."""
    return seeded_items("clock", seed, n, namespace, difficulty, _make)


# What the checker reads (READ_FORM): a `The clock shows HH:MM.` line, then `Step k: add|subtract
# N minutes.` lines numbered from 1; other lines are free text.
_START = re.compile(r"The clock shows (\d\d:\d\d)\.")
_STEP = re.compile(r"Step (\d{1,3}): (add|subtract) (\d{1,4}) minutes\.")


def parse(prompt: str) -> tuple[str, list[tuple[str, int]]]:
    """The start time and steps a prompt states; ValueError when it is not in the family's form."""
    if not isinstance(prompt, str):
        raise ValueError("the prompt is not a string")
    start, steps = None, []
    for line in prompt.splitlines():
        line = line.strip()
        if _START.fullmatch(line):
            if start is not None or steps:
                raise ValueError("a second start time, or one after the steps")
            start = _START.fullmatch(line).group(1)
            minutes(start)
        elif line.startswith("Step "):
            found = _STEP.fullmatch(line)
            if start is None or not found or int(found.group(1)) != len(steps) + 1 or len(steps) >= MAX_STEPS:
                raise ValueError(f"step out of place, misnumbered or unreadable: {line[:200]!r}")
            steps.append(("add" if found.group(2) == "add" else "sub", int(found.group(3))))
    if start is None or not steps:
        raise ValueError("not a clock prompt: it needs `The clock shows HH:MM.` and `Step 1: ...` lines")
    return start, steps


_strict = strict("clock")


@_strict
def solve(row: dict) -> dict:
    """The reference solver: one clock call per step, each fed the previous result. Reads only
    the prompt; ValueError when it cannot."""
    start, steps = parse(row["prompt"])
    times = _times(start, steps)
    calls = [{"tool": f"clock_{op}", "arguments": {"time": t, "minutes": x}, "result": result}
             for (op, x), t, result in zip(steps, times, times[1:])]
    return {"calls": calls, "reply": f"Answer: {times[-1]}"}


@_strict
def skills(row: dict) -> set[str]:
    """The item's skill tags, read from its prompt (equal to the generator's on its items)."""
    return _skills(*parse(row["prompt"]))


@_strict
def distractors(row: dict) -> list[dict]:
    """Plausible wrong times, each labelled by the mistake that produces it."""
    start, steps = parse(row["prompt"])
    times = _times(start, steps)
    candidates = [("skipped_last_step", times[-2]), ("first_step_only", times[1]), ("hour_off", add(times[-1], 60))]
    seen, out = {times[-1]}, []
    for kind, value in candidates:
        if value not in seen:
            seen.add(value)
            out.append({"kind": kind, "reply": f"Answer: {value}"})
    return out


_ANSWER = re.compile(r"answer\s*[:=]\s*\**\s*(\d{1,2}:\d\d)", re.IGNORECASE)


def extract_answer(reply: str) -> str | None:
    """The time on the last `Answer:` after any `</think>`, as `HH:MM` (`9:05` reads as `09:05`)."""
    found = last_match(_ANSWER, reply)
    try:
        return show(minutes(found.zfill(5))) if found is not None else None
    except ValueError:
        return None


def check(reply: str, answer: str) -> bool:
    """True iff the reply's final `Answer:` time is the answer."""
    return extract_answer(reply) == answer
