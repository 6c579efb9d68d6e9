"""Prompts that give the answer away.

A task whose prompt (or system prompt) holds its answer in words the family does not read
teaches a model to copy it: a shortcut the eval does not have. `gives_away` finds the answer
itself in one task. `shortcut` finds one fixed transform of it in most tasks: the answer plus a
constant, a multiple, its hex, its digits or letters spelled apart, spelled out in words (a few
languages), as character codes, a sum, difference or product of two numbers, a product plus a
third. One task may hold such a number by chance; half of them do not.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter

from trainergym.probe import leakage

HALF = 0.5  # a transform in at least this share of the tasks (and MIN_TASKS of them) is a hint
MIN_TASKS = 20

_UNITS = {w: i for i, w in enumerate("zero one two three four five six seven eight nine ten eleven twelve thirteen "
                                     "fourteen fifteen sixteen seventeen eighteen nineteen".split())}
_TENS = {w: 10 * i for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split(), 2)}
_SCALES = {"thousand": 10**3, "million": 10**6, "billion": 10**9}
_DIGITS = {w: d for words in ("zero one two three four five six seven eight nine",  # digit by digit, in a few languages
                              "null eins zwei drei vier fünf sechs sieben acht neun",
                              "zéro un deux trois quatre cinq six sept huit neuf",
                              "cero uno dos tres cuatro cinco seis siete ocho nueve")
           for d, w in enumerate(words.split())}
_NEGATIVE = {"minus", "negative", "negativ", "moins", "menos"}
_TOKEN = re.compile(r"-?0[xob][0-9a-f]+|-?\d[\d,_]*|[^\W\d_]+", re.IGNORECASE)
_NOT_ALNUM = re.compile(r"[\W_]+")  # what str.isalnum refuses, exactly


def gives_away(t, solved: dict) -> bool:
    """Whether a task's prompt or system prompt holds its own answer beyond what the family
    reads from it (an operand that happens to equal the answer is fine; a hint line is not): as
    a word, and for a number also with its separators dropped or reversed."""
    answer = leakage.normalise(t.answer)
    if not answer:
        return False
    read, seen = set(), set()  # argument words taken from the prompt, not from an earlier tool result
    for c in solved["calls"]:
        read |= {w for v in c["arguments"].values() for w in leakage.normalise(str(v)).split()} - seen
        seen |= set(leakage.normalise(str(c["result"])).split())
    text = " ".join(w for w in leakage.normalise(t.prompt + " " + t.system_prompt).split() if w not in read)
    if len(answer) >= 2 and f" {answer} " in f" {text} ":
        return True
    compact = "".join(answer.split())
    if not compact.isdigit() or len(compact) < 4:
        return False  # a string answer may well be a piece of its prompt (take, drop, reverse)
    squashed = "".join(text.split())
    return compact in squashed or compact[::-1] in squashed


def _unread(t, solved: dict) -> list[str]:
    """The prompt's and system prompt's tokens that are not arguments the family's solver reads."""
    read = {str(v).strip() for c in solved["calls"] for v in c["arguments"].values()}
    return [w for w in _TOKEN.findall(f"{t.prompt} {t.system_prompt}") if w not in read]


def _integer(token: str) -> int | None:
    clean = token.replace(",", "").replace("_", "")
    try:
        return int(clean, 0) if clean.lstrip("-")[:2].lower() in ("0x", "0o", "0b") else int(clean)
    except ValueError:
        return None


def _spelled(words: list[str]) -> list[int]:
    """Numbers written in words: English ("minus five hundred twenty-one"), or digit by digit in
    English, German, French or Spanish ("fünf zwei eins")."""
    out, run = [], []
    for w in [*words, ""]:
        lw = w.lower()
        if lw in _UNITS or lw in _TENS or lw in _SCALES or lw == "hundred" or lw in _DIGITS or (lw == "and" and run) \
                or (lw in _NEGATIVE and not run):
            run.append(lw)
            continue
        if run:
            out += _parse_run(run)
        run = []
    return out


def _parse_run(run: list[str]) -> list[int]:
    sign = -1 if run[0] in _NEGATIVE else 1
    words = [w for w in run if w not in _NEGATIVE and w != "and"]
    if not words:
        return []
    found = []
    if len(words) >= 2 and all(w in _DIGITS for w in words):  # digit by digit
        found.append(sign * int("".join(str(_DIGITS[w]) for w in words)))
    if all(w in _UNITS or w in _TENS or w in _SCALES or w == "hundred" for w in words):
        total = current = 0
        for w in words:
            if w == "hundred":
                current = max(current, 1) * 100
            elif w in _SCALES:
                total, current = total + max(current, 1) * _SCALES[w], 0
            else:
                current += _UNITS.get(w, 0) + _TENS.get(w, 0)
        found.append(sign * (total + current))
    return found


def _hints(t, solved: dict) -> set[str]:
    """The transforms of the answer found in the words of one task the family does not read."""
    words = _unread(t, solved)
    answer, found = t.answer.strip(), set()
    a = _integer(answer) if re.fullmatch(r"-?\d+", answer) else None
    squashed = _NOT_ALNUM.sub("", " ".join(words).lower())  # its letters and digits (str.isalnum)
    # A token of _TOKEN that starts with neither a digit nor "-" is letters only: never an integer.
    numbers = [(w, u) for w in words if (w[0] == "-" or w[0].isdigit()) and (u := _integer(w)) is not None]
    if a is not None:
        for w, u in numbers:
            if u != a and abs(u - a) <= 10:
                found.add("a number within 10 of the answer")
            elif u != a and abs(u - a) <= 1000:
                found.add(f"the answer {u - a:+d}")
            if a not in (0, 1, -1) and u != a and u % a == 0 and abs(u // a) <= 1000:
                found.add(f"the answer times {u // a}")
            if u == a and not w.lstrip("-").isdigit():
                found.add("the answer in another base")
            if len(str(abs(a))) >= 3 and str(abs(u)) == str(abs(a))[::-1] and u != a:
                found.add("the answer's digits reversed")
        if a in _spelled([w for w in words if not w[0].isdigit()]):
            found.add("the answer spelled out in words")
        if len(str(abs(a))) >= 4 and str(abs(a)) in squashed and str(abs(a)) not in {str(abs(u)) for _, u in numbers}:
            found.add("the answer's digits written apart")
        values = [u for _, u in numbers][:12]
        if any(x + y == a or x - y == a or (x * y == a and a not in (0, 1, -1)) for x, y in itertools.permutations(values, 2)):
            found.add("a sum, difference or product of two numbers")
        if any(x * y + z == a and x not in (0, 1) and y not in (0, 1) for x, y, z in itertools.permutations(values, 3)):
            found.add("a product of two numbers plus a third")
    elif len(answer) >= 3:
        low = answer.lower()
        for w in words:
            if w == answer[::-1] and w != answer:
                found.add("the answer reversed")
            elif w.lower() == low and w != answer:
                found.add("the answer in another case")
        compact = "".join(ch for ch in low if ch.isalnum())
        if len(compact) >= 5 and compact in squashed:
            found.add("the answer's characters written apart")
        codes = "".join(chr(u) for _, u in numbers if 32 <= u < 127).lower()
        if len(compact) >= 3 and compact in "".join(ch for ch in codes if ch.isalnum()):
            found.add("the answer as character codes")
    return found


def shortcut(tasks: list, solved: list[dict]) -> tuple[str, list[int]]:
    """A transform of the answer present in the unread words of at least half the tasks (and 20
    or more): (what it is, the indices of the tasks holding it), or ("", [])."""
    found = [_hints(t, sv) for t, sv in zip(tasks, solved)]
    counts = Counter(h for f in found for h in f)
    if not counts:
        return "", []
    hint, k = counts.most_common(1)[0]
    if k < max(MIN_TASKS, HALF * len(tasks)):
        return "", []
    return f"{hint} appears in words the family does not read, in {k} of {len(tasks)} tasks", \
        [i for i, f in enumerate(found) if hint in f]
