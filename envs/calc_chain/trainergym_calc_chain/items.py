"""calc_chain items: chained integer arithmetic where each step's result feeds the next.

Pure Python (no verifiers import) so the trainergym library can generate, check and
solve items in its own process without paying the verifiers import.

An item is a start value and a chain of operations. The operands are large enough that
a small model must use the calculator tools, and every step depends on the previous
result, so the number of dependent tool calls equals the number of steps.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

from trainergym_kit.answers import last_match
from trainergym_kit.items import seeded_items, strict

from trainergym_calc_chain.calc import apply

OPS = ("add", "sub", "mul", "div", "mod")

# How each operation is worded in prompts; `parse` reads exactly these back.
_PHRASES = {
    "add": "add {x} to it",
    "sub": "subtract {x} from it",
    "mul": "multiply it by {x}",
    "div": "integer-divide it by {x} (floor division)",
    "mod": "take the remainder of it divided by {x}",
}

# Difficulty knobs: (min steps, max steps, operand digits, operations available).
# Level 3 always needs at least 5 dependent tool calls.
DIFFICULTY = {
    1: (2, 3, 2, ("add", "sub", "mul")),
    2: (3, 4, 3, ("add", "sub", "mul", "div")),
    3: (5, 6, 4, OPS),
}

SKILL_TAGS = (*OPS, "long_chain", "big_operands", "negative_intermediate")
DIFFICULTY_LEVELS = tuple(DIFFICULTY)

ANSWER_FORMAT = "Finish with a line `Answer: <integer>` (digits, optional leading minus sign)."


@dataclass(frozen=True)
class Item:
    id: str
    start: int
    steps: tuple[tuple[str, int], ...]
    difficulty: int
    skills: tuple[str, ...] = field(default=())

    @property
    def values(self) -> list[int]:
        """The running value after each step (the first entry is the start)."""
        out = [self.start]
        for op, x in self.steps:
            out.append(apply(op, out[-1], x))
        return out

    @property
    def answer(self) -> int:
        return self.values[-1]

    @property
    def prompt(self) -> str:
        lines = [f"Start with {self.start}."]
        for i, (op, x) in enumerate(self.steps, 1):
            lines.append(f"Step {i}: {_PHRASES[op].format(x=x)}.")
        lines.append("What is the final value? Use the calculator tools for every step. " + ANSWER_FORMAT)
        return "\n".join(lines)

    def as_dict(self) -> dict:
        return {
            "id": self.id,
            "prompt": self.prompt,
            "answer": str(self.answer),
            "skills": list(self.skills),
            "difficulty": self.difficulty,
            "world": {},  # calc_chain's tools are stateless
        }


def _operand(rng: random.Random, digits: int) -> int:
    return rng.randint(10 ** (digits - 1), 10**digits - 1)


def make_item(rng: random.Random, item_id: str, difficulty: int) -> Item:
    lo, hi, digits, ops = DIFFICULTY[difficulty]
    value = _operand(rng, digits)
    start = value
    steps: list[tuple[str, int]] = []
    for _ in range(rng.randint(lo, hi)):
        op = rng.choice(ops)
        if op in ("div", "mod") and value <= 0:
            op = "add"  # keep floor division on positive values: no sign puzzles
        if op == "mul":
            x = rng.randint(3, max(99, 10 ** (digits - 1)))
        elif op in ("div", "mod"):
            x = rng.randint(3, max(4, min(abs(value) // 2, 10 ** (digits - 1) * 3)))
        else:
            x = _operand(rng, digits)
        steps.append((op, x))
        value = apply(op, value, x)
    item = Item(item_id, start, tuple(steps), difficulty)
    return Item(item_id, start, tuple(steps), difficulty, tuple(sorted(_skills(item))))


def _skills(item: Item) -> set[str]:
    tags = {op for op, _ in item.steps}
    if len(item.steps) >= 5:
        tags.add("long_chain")
    if max(abs(x) for _, x in item.steps) >= 1000 or abs(item.start) >= 1000:
        tags.add("big_operands")
    if any(v < 0 for v in item.values):
        tags.add("negative_intermediate")
    return tags


def generate(
    seed: int | str, n: int, namespace: str = "public", difficulty: int | None = None
) -> list[dict]:
    """`n` items for `seed`. Each item draws from its own RNG keyed by
    (namespace, seed, index), so namespaces never share an item stream and item k is the
    same whatever `n` is (`trainergym_kit.items.seeded_items`). With no `difficulty`, levels
    mix 30/40/30 (1/2/3)."""
    return seeded_items("calc_chain", seed, n, namespace, difficulty,
                        lambda rng, item_id, level: make_item(rng, item_id, level).as_dict())


# What the checker reads (see READ_FORM in family.py): a `Start with N.` line, then one
# `Step k: ...` line per operation (k = 1, 2, ...) worded exactly as `_PHRASES`; other lines
# are free text. Bounds keep reading fast on any input: operands and running values of at
# most MAX_DIGITS digits.
MAX_DIGITS = 100
_START = re.compile(r"Start with (-?\d+)\.")
_STEP_HEAD = re.compile(r"Step \d+:")
_STEP = re.compile(r"Step (\d+): (.*)\.")
_STEP_PATTERNS = {op: re.compile(re.escape(phrase).replace(re.escape("{x}"), r"(-?\d+)")) for op, phrase in _PHRASES.items()}


def _number(text: str) -> int:
    if len(text.lstrip("-")) > MAX_DIGITS:
        raise ValueError(f"a number longer than {MAX_DIGITS} digits")
    return int(text)


def parse(prompt: str) -> Item:
    """Recover an item from its prompt (the reference solver reads only the prompt); ValueError
    when the prompt is not in the family's form."""
    if not isinstance(prompt, str):
        raise ValueError("the prompt is not a string")
    start, steps = None, []
    for line in prompt.splitlines():
        line = line.strip()
        if m := _START.fullmatch(line):
            if start is not None or steps:
                raise ValueError("a second `Start with` line, or one after the steps")
            start = _number(m.group(1))
        elif _STEP_HEAD.match(line):
            m = _STEP.fullmatch(line)
            if start is None or not m or int(m.group(1)) != len(steps) + 1:
                raise ValueError(f"step out of place or misnumbered: {line[:200]!r}")
            for op, pattern in _STEP_PATTERNS.items():
                if found := pattern.fullmatch(m.group(2)):
                    steps.append((op, _number(found.group(1))))
                    break
            else:
                raise ValueError(f"unrecognised step: {line[:200]!r}")
    if start is None or not steps:
        raise ValueError("not a calc_chain prompt: it needs a `Start with N.` line and `Step 1: ...` lines")
    return Item("parsed", start, tuple(steps), 0)


def _read(row: dict) -> tuple[Item, list[int]]:
    """The item a row's prompt states and its running values; ValueError if unreadable."""
    if not isinstance(row, dict):
        raise ValueError("an item is a dict")
    item = parse(row["prompt"])
    values = [item.start]
    for op, x in item.steps:
        values.append(apply(op, values[-1], x))
        if values[-1].bit_length() > MAX_DIGITS * 10 // 3:
            raise ValueError(f"a running value beyond {MAX_DIGITS} digits")
    return item, values


_strict = strict("calc_chain")


_ANSWER = re.compile(r"answer\s*[:=]\s*\**\s*([+-]?[\d,_ ]*\d)", re.IGNORECASE)
_BOXED = re.compile(r"\\boxed\{\s*([+-]?[\d,_ ]*\d)\s*\}")
_INTEGER = re.compile(r"[+-]?\d[\d,_]*")


def extract_answer(reply: str) -> int | None:
    """Normalisation (documented in docs/families.md): take the last `Answer: N`, else the
    last `\\boxed{N}`, else the last integer in the reply; drop thousands separators
    (`,` `_` and spaces inside the number) and a leading `+`. Text after `</think>` only,
    when a think block is present, so reasoning drafts are never graded."""
    for pattern in (_ANSWER, _BOXED, _INTEGER):
        found = last_match(pattern, reply)
        if found is not None:
            digits = re.sub(r"[,_ ]", "", found)
            try:
                return int(digits)
            except ValueError:
                return None
    return None


def check(reply: str, answer: str) -> bool:
    """True iff the reply's final integer equals the answer."""
    got = extract_answer(reply)
    return got is not None and got == int(answer)


@_strict
def solve(row: dict) -> dict:
    """The reference solver: one calculator call per step, each fed the previous result.
    Reads only the item's prompt, as a model would; ValueError when it cannot read it."""
    item, values = _read(row)
    calls = [{"tool": f"calc_{op}", "arguments": {"a": a, "b": x}, "result": str(result)}
             for (op, x), a, result in zip(item.steps, values, values[1:])]
    return {"calls": calls, "reply": f"Answer: {values[-1]}"}


@_strict
def skills(row: dict) -> set[str]:
    """The item's skill tags, read from its prompt by the family's own parser (equal to the
    generator's `skills` on generated items); ValueError when the prompt is not in the
    family's form (see READ_FORM)."""
    item, _ = _read(row)
    return _skills(item)


@_strict
def distractors(row: dict) -> list[dict]:
    """Plausible wrong answers, each labelled by the mistake that produces it."""
    item, values = _read(row)
    answer = values[-1]
    candidates = [
        ("off_by_one", answer + 1),
        ("off_by_one", answer - 1),
        ("skipped_last_step", values[-2]),
        ("stopped_after_first_step", values[1]),
        ("sign_flip", -answer),
    ]
    sub_steps = [i for i, (op, _) in enumerate(item.steps) if op == "sub"]
    if sub_steps:  # operands of one subtraction swapped: b - a instead of a - b
        k = sub_steps[0]
        v = values[k]
        v = item.steps[k][1] - v
        for op, x in item.steps[k + 1 :]:
            try:
                v = apply(op, v, x)
            except ZeroDivisionError:
                break
        else:
            candidates.append(("swapped_operands", v))
    seen, out = {answer}, []
    for kind, value in candidates:
        if value not in seen:
            seen.add(value)
            out.append({"kind": kind, "reply": f"Answer: {value}"})
    return out
