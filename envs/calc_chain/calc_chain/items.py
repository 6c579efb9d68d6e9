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

OPS = ("add", "sub", "mul", "div", "mod")

# How each operation is worded in prompts; `tag_text` recognises these and synonyms.
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


def apply(op: str, a: int, b: int) -> int:
    """The calculator semantics shared by the tools, the solver and the checker."""
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    if op in ("div", "mod") and b == 0:
        raise ZeroDivisionError("division by zero")
    if op == "div":
        return a // b
    if op == "mod":
        return a % b
    raise ValueError(f"unknown operation {op!r}")


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
    same whatever `n` is. With no `difficulty`, levels mix 30/40/30 (1/2/3)."""
    items = []
    for i in range(n):
        rng = random.Random(f"calc_chain:{namespace}:{seed}:{i}")
        level = difficulty or rng.choices((1, 2, 3), weights=(3, 4, 3))[0]
        items.append(make_item(rng, f"{namespace}-{seed}-{i}", level))
    return [item.as_dict() for item in items]


def parse(prompt: str) -> Item:
    """Recover an item from its prompt (the reference solver reads only the prompt)."""
    start = int(re.search(r"Start with (-?\d+)", prompt).group(1))
    steps = []
    for line in re.findall(r"Step \d+: (.*)\.", prompt):
        for op, phrase in _PHRASES.items():
            pattern = re.escape(phrase).replace(re.escape("{x}"), r"(-?\d+)")
            m = re.fullmatch(pattern, line)
            if m:
                steps.append((op, int(m.group(1))))
                break
        else:
            raise ValueError(f"unrecognised step: {line!r}")
    return Item("parsed", start, tuple(steps), 0)


_ANSWER = re.compile(r"answer\s*[:=]\s*\**\s*([+-]?[\d,_ ]*\d)", re.IGNORECASE)
_BOXED = re.compile(r"\\boxed\{\s*([+-]?[\d,_ ]*\d)\s*\}")
_INTEGER = re.compile(r"[+-]?\d[\d,_]*")


def extract_answer(reply: str) -> int | None:
    """Normalisation (documented in docs/families.md): take the last `Answer: N`, else the
    last `\\boxed{N}`, else the last integer in the reply; drop thousands separators
    (`,` `_` and spaces inside the number) and a leading `+`. Text after `</think>` only,
    when a think block is present, so reasoning drafts are never graded."""
    if "</think>" in reply:
        reply = reply.rsplit("</think>", 1)[1]
    for pattern in (_ANSWER, _BOXED, _INTEGER):
        found = pattern.findall(reply)
        if found:
            digits = re.sub(r"[,_ ]", "", found[-1])
            try:
                return int(digits)
            except ValueError:
                return None
    return None


def check(reply: str, answer: str) -> bool:
    """True iff the reply's final integer equals the answer."""
    got = extract_answer(reply)
    return got is not None and got == int(answer)


def solve(row: dict) -> dict:
    """The reference solver: one calculator call per step, each fed the previous result.
    Reads only the item's prompt, as a model would."""
    item = parse(row["prompt"])
    calls, value = [], item.start
    for op, x in item.steps:
        result = apply(op, value, x)
        calls.append({"tool": f"calc_{op}", "arguments": {"a": value, "b": x}, "result": str(result)})
        value = result
    return {"calls": calls, "reply": f"Answer: {value}"}


def distractors(row: dict) -> list[dict]:
    """Plausible wrong answers, each labelled by the mistake that produces it."""
    item = parse(row["prompt"])
    values = item.values
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


_OP_WORDS = {
    "add": r"\b(add|plus|sum|increase)",
    "sub": r"\b(subtract|minus|decrease|take away)",
    "mul": r"\b(multipl|times|product)",
    "div": r"\b(divide|quotient|floor division)",
    "mod": r"\b(remainder|modulo|mod\b)",
}


def tag_text(text: str) -> set[str]:
    """Skill tags read off any task prompt (also prompts a job author wrote in their own
    words), so data coverage can be measured without trusting self-declared tags."""
    try:
        return _skills(parse(text))
    except (AttributeError, ValueError, ZeroDivisionError):
        pass  # not in the family's own wording: fall back to keywords
    lower = text.lower()
    tags = set()
    mentions = 0
    for op, pattern in _OP_WORDS.items():
        hits = re.findall(pattern, lower)
        if op == "div":  # "divided by" in a remainder step is not a division step
            hits = re.findall(r"\b(integer-divide|divide it|quotient|floor division)", lower)
        if hits:
            tags.add(op)
            mentions += len(hits)
    if mentions >= 5:
        tags.add("long_chain")
    if re.search(r"\d{4,}", lower):
        tags.add("big_operands")
    if re.search(r"(?<![\w])-\d", lower) or "negative" in lower:
        tags.add("negative_intermediate")
    return tags
