"""string_pipeline items: a start string pushed through a pipeline of text operations.

Pure Python (no verifiers import) so the trainergym library can generate, check and
solve items in its own process without paying the verifiers import.

An item is a start string and 2-6 steps; each step transforms the previous step's
output, so the number of dependent tool calls equals the number of steps. The
operations (Caesar shifts, rotations with wrap-around, case swaps, dedupes) are easy to
describe and error-prone to do in one's head. The tools are stateless: `world` is `{}`.
"""

from __future__ import annotations

import random
import re
import string

from trainergym_kit.answers import last_match
from trainergym_kit.items import seeded_items, strict

from trainergym_string_pipeline.text import (  # noqa: F401  (the tools' semantics; re-exported for the library and tests)
    OPERATIONS, OPS, TOOL_PREFIX, caesar, dedupe, drop, replace, reverse, rotate, swapcase, take,
)

# How each step is worded in prompts; `parse` inverts this.
_PHRASES = {
    "reverse": "reverse it",
    "swapcase": "swap the case of every letter",
    "caesar": "Caesar-shift its letters forward by {shift} (digits unchanged, case kept)",
    "rotate": "rotate it left by {k} (move the first character to the end, {k} times)",
    "replace": 'replace every "{old}" with "{new}"',
    "take": "keep only the first {n} characters",
    "drop": "drop the first {n} characters",
    "dedupe": "remove repeated characters (case-sensitive), keeping the first occurrence of each",
}

# Difficulty knobs: (steps lo, hi, start length lo, hi, operations, caesar/rotate range).
# Level 3 always has a Caesar shift and a rotation with two-digit parameters.
EASY = ("reverse", "swapcase", "replace", "take", "drop")
DIFFICULTY = {
    1: (2, 2, 8, 11, EASY, (1, 9)),
    2: (3, 4, 10, 14, OPS, (1, 9)),
    3: (5, 6, 12, 16, OPS, (10, 25)),
}
# Start strings: lower-case letters, lower-case letters and digits, or mixed case and digits.
ALPHABETS = (string.ascii_lowercase, string.ascii_lowercase + string.digits, string.ascii_letters + string.digits)

SKILL_TAGS = (*OPS, "long_pipeline", "mixed_case", "large_shift")
DIFFICULTY_LEVELS = tuple(DIFFICULTY)

ANSWER_FORMAT = "Finish with a line `Answer: <final string>` giving the exact characters (case-sensitive, no quotes)."


def run(start: str, steps: list[tuple[str, dict]]) -> list[str]:
    """The string after each step (the first entry is the start)."""
    out = [start]
    for op, args in steps:
        out.append(OPERATIONS[op](out[-1], **args))
    return out


def _skills(start: str, steps: list[tuple[str, dict]]) -> set[str]:
    tags = {op for op, _ in steps}
    if len(steps) >= 5:
        tags.add("long_pipeline")
    if _is_mixed_case(start):
        tags.add("mixed_case")
    if any(args.get("shift", args.get("k", 0)) >= 10 for op, args in steps if op in ("caesar", "rotate")):
        tags.add("large_shift")
    return tags


def _is_mixed_case(text: str) -> bool:
    return any(c.isupper() for c in text) and any(c.islower() for c in text)


def prompt_text(start: str, steps: list[tuple[str, dict]]) -> str:
    lines = [f'Start with the string "{start}".']
    for i, (op, args) in enumerate(steps, 1):
        lines.append(f"Step {i}: {_PHRASES[op].format(**args)}.")
    lines.append("What is the final string? Use the text tools for every step, passing each result "
                 "to the next step. " + ANSWER_FORMAT)
    return "\n".join(lines)


# --- generation --------------------------------------------------------------------------


def _arguments(rng: random.Random, op: str, text: str, shifts: tuple[int, int], alphabet: str) -> dict | None:
    """Random parameters for `op` on `text`, or None when `op` does not fit `text`."""
    if op == "caesar":
        return {"shift": rng.randint(*shifts)}
    if op == "rotate":
        return {"k": rng.randint(*shifts)}
    if op == "replace":
        old = rng.choice(text)
        new = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 2)))
        return {"old": old, "new": new} if new != old else None
    if op == "take":
        return {"n": rng.randint((len(text) + 1) // 2 + 1, len(text) - 1)} if len(text) >= 7 else None
    if op == "drop":
        return {"n": rng.randint(1, min(4, len(text) - 6))} if len(text) >= 7 else None
    return {}


def _pipeline(rng: random.Random, level: int) -> tuple[str, list[tuple[str, dict]]] | None:
    """One attempt at an item: None if some step could not change the string."""
    lo, hi, len_lo, len_hi, ops, shifts = DIFFICULTY[level]
    alphabet = rng.choice(ALPHABETS)
    start = "".join(rng.choice(alphabet) for _ in range(rng.randint(len_lo, len_hi)))
    n_steps = rng.randint(lo, hi)
    plan = ["caesar", "rotate"] if level == 3 else []
    plan += [rng.choice(ops) for _ in range(n_steps - len(plan))]
    rng.shuffle(plan)
    text, steps = start, []
    for planned in plan:
        for op in [planned] + rng.sample(ops, len(ops)):  # the planned op, else any op that fits
            if steps and op == steps[-1][0]:
                continue  # no op twice in a row (a second reverse or swapcase would undo the first)
            args = _arguments(rng, op, text, shifts, alphabet)
            if args is not None and OPERATIONS[op](text, **args) != text:
                steps.append((op, args))
                text = OPERATIONS[op](text, **args)
                break
        else:
            return None
    if level == 3 and not {"caesar", "rotate"} <= {op for op, _ in steps}:
        return None
    if len(text) < 4 or not any(c.isalpha() for c in text):
        return None  # keep answers non-trivial and case-sensitive
    return start, steps


def make_item(rng: random.Random, item_id: str, level: int) -> dict:
    while (made := _pipeline(rng, level)) is None:
        pass
    start, steps = made
    return {
        "id": item_id,
        "prompt": prompt_text(start, steps),
        "answer": run(start, steps)[-1],
        "skills": sorted(_skills(start, steps)),
        "difficulty": level,
        "world": {},  # string_pipeline's tools are stateless
    }


def generate(seed: int | str, n: int, namespace: str = "public", difficulty: int | None = None) -> list[dict]:
    """`n` items for `seed`. Each item draws from its own RNG keyed by
    (namespace, seed, index), so namespaces never share an item stream and item k is the
    same whatever `n` is. With no `difficulty`, levels mix 30/40/30 (1/2/3)."""
    return seeded_items("string_pipeline", seed, n, namespace, difficulty, make_item)


# --- reading prompts back ------------------------------------------------------------------


def _phrase_pattern(phrase: str) -> re.Pattern:
    """A phrase template as a regex; a placeholder's repeats must match its first value."""
    seen: set[str] = set()

    def group(m: re.Match) -> str:
        name = m.group(1)
        if name in seen:
            return f"(?P={name})"
        seen.add(name)
        return rf"(?P<{name}>[A-Za-z0-9]+)" if name in ("old", "new") else rf"(?P<{name}>-?\d+)"

    return re.compile(re.sub(r"\\\{(\w+)\\\}", group, re.escape(phrase)))


_PATTERNS = {op: _phrase_pattern(phrase) for op, phrase in _PHRASES.items()}


# What the checker reads (see READ_FORM in family.py): a `Start with the string "..."` line,
# then one `Step k: ...` line per operation (k = 1, 2, ...) worded exactly as `_PHRASES`; other
# lines are free text. Bounds keep reading fast on any input.
MAX_CHARS = 1000  # the longest start or intermediate string
MAX_DIGITS = 100  # the longest number in a step
_START = re.compile(r'Start with the string "([A-Za-z0-9]+)"\.')
_STEP_HEAD = re.compile(r"Step \d+:")
_STEP = re.compile(r"Step (\d+): (.*)\.")


def _number(text: str) -> int:
    if len(text.lstrip("-")) > MAX_DIGITS:
        raise ValueError(f"a number longer than {MAX_DIGITS} digits")
    return int(text)


def parse(prompt: str) -> tuple[str, list[tuple[str, dict]]]:
    """Recover (start, steps) from a prompt in the family's wording (ValueError otherwise)."""
    if not isinstance(prompt, str):
        raise ValueError("the prompt is not a string")
    start, steps = None, []
    for line in prompt.splitlines():
        line = line.strip()
        if m := _START.fullmatch(line):
            if start is not None or steps:
                raise ValueError("a second `Start with the string` line, or one after the steps")
            start = m.group(1)
        elif _STEP_HEAD.match(line):
            m = _STEP.fullmatch(line)
            if start is None or not m or int(m.group(1)) != len(steps) + 1:
                raise ValueError(f"step out of place or misnumbered: {line[:200]!r}")
            for op, pattern in _PATTERNS.items():
                if found := pattern.fullmatch(m.group(2)):
                    steps.append((op, {k: v if k in ("old", "new") else _number(v) for k, v in found.groupdict().items()}))
                    break
            else:
                raise ValueError(f"unrecognised step: {line[:200]!r}")
    if start is None or not steps:
        raise ValueError('not a string_pipeline prompt: it needs a `Start with the string "...".` line and '
                         "`Step 1: ...` lines")
    return start, steps


def _read(row: dict) -> tuple[str, list[tuple[str, dict]], list[str]]:
    """(start, steps, the string after each step) of a row; ValueError if unreadable."""
    if not isinstance(row, dict):
        raise ValueError("an item is a dict")
    start, steps = parse(row["prompt"])
    values = [start]
    for op, args in steps:
        if len(values[-1]) > MAX_CHARS:
            raise ValueError(f"a string longer than {MAX_CHARS} characters")
        values.append(OPERATIONS[op](values[-1], **args))
    if len(values[-1]) > MAX_CHARS:
        raise ValueError(f"a string longer than {MAX_CHARS} characters")
    return start, steps, values


_strict = strict("string_pipeline")


# --- checking, solving, distractors ---------------------------------------------------------

_ANSWER = re.compile(r"answer\s*\**\s*[:=](.*)", re.IGNORECASE)
_WRAPPING = " \t\r\"'`*"


def extract_answer(reply: str) -> str | None:
    """Normalisation: only text after the last `</think>` counts; take the rest of the line
    after the last `Answer:` (any case, `=` also accepted); strip surrounding whitespace,
    quotes, backticks and markdown asterisks. Nothing else changes: the comparison is
    exact and case-sensitive. No `Answer:` line, or an empty one, is no answer."""
    found = last_match(_ANSWER, reply)
    return (found or "").strip(_WRAPPING) or None


def check(reply: str, answer: str) -> bool:
    """True iff the reply's final answer is exactly the expected string."""
    return extract_answer(reply or "") == answer


@_strict
def solve(row: dict) -> dict:
    """The reference solver: one tool call per step, each fed the previous output.
    Reads only the item's prompt, as a model would (the tools need no world); ValueError
    when it cannot read it."""
    _, steps, values = _read(row)
    calls = [{"tool": f"{TOOL_PREFIX}_{op}", "arguments": {"text": text, **args}, "result": result}
             for (op, args), text, result in zip(steps, values, values[1:])]
    return {"calls": calls, "reply": f"Answer: {values[-1]}"}


@_strict
def skills(row: dict) -> set[str]:
    """The item's skill tags, read from its prompt by the family's own parser (equal to the
    generator's `skills` on generated items); ValueError when the prompt is not in the
    family's form (see READ_FORM)."""
    start, steps, _ = _read(row)
    return _skills(start, steps)


@_strict
def distractors(row: dict) -> list[dict]:
    """Plausible wrong answers, each labelled by the mistake that produces it: for each
    kind, the first variant pipeline whose output is new. Answers always hold a letter, so
    `case_error` always exists; every step changes the string, so skipping one gives a
    second wrong answer (unless every skip lands on the case-flipped answer)."""
    start, steps, values = _read(row)
    answer = values[-1]
    kinds = {
        "case_error": [answer.swapcase()],
        "skipped_step": (run(start, steps[:i] + steps[i + 1 :])[-1] for i in reversed(range(len(steps)))),
        "swapped_steps": (
            run(start, steps[:i] + [steps[i + 1], steps[i]] + steps[i + 2 :])[-1] for i in range(len(steps) - 1)
        ),
        "off_by_one": (
            run(start, steps[:i] + [(op, {key: value + delta})] + steps[i + 1 :])[-1]
            for i, (op, args) in enumerate(steps)
            if op in ("caesar", "rotate", "take", "drop")
            for key, value in args.items()
            for delta in (1, -1)
        ),
    }
    seen, out = {answer}, []
    for kind, outputs in kinds.items():
        value = next((v for v in outputs if v and v not in seen), None)
        if value:
            seen.add(value)
            out.append({"kind": kind, "reply": f"Answer: {value}"})
    return out
