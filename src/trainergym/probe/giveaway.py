"""Prompts that give the answer away.

A task whose prompt (or system prompt) holds its answer in words the family does not read
teaches a model to copy it: a shortcut the eval does not have. `gives_away` finds the answer
itself in one task. `shortcut` finds, over all of a job's tasks, free text that predicts the
answer whatever the transform, by classes of relation learned from the job's own tasks:

- fixed transforms: the answer plus a constant, a multiple, in another base, reversed, spelled
  out in words (a few languages), as character codes, a sum or product of unread numbers;
- affine: answer = p/q * x + r/q for an unread number x, any p, q, r (offsets, ratios, scales);
- digits: the answer's digits (or reversed) as two or three unread digit groups, or reordered;
- substitution: one character map (Caesar, ROT-n, Atbash, a case change, any monoalphabetic
  cipher; also of the reversed string) taking the answer to unread text;
- fragments: most of the answer's characters in unread pieces of three or more (prefix and
  suffix apart, "starts with ... ends with ...").

Unread text is read after decoding what looks like base64, base32, hex bytes or percent-encoding,
and forwards and backwards. A class is a hint when it holds in at least half the tasks it can
read (and MIN_TASKS of them) and far more often than with each task paired with another task's
answer (the shuffled baseline): what predicts the answer across tasks, not what a text holds by
chance or by its genre.
"""

from __future__ import annotations

import base64
import binascii
import math
import random
import re
import urllib.parse
from collections import Counter, defaultdict
from dataclasses import dataclass

from trainergym.probe import leakage

HALF = 0.5  # a relation in at least this share of the tasks it can read (and MIN_TASKS of them) is a hint
MIN_TASKS = 20
BASELINE = 0.25  # ... and in at most this share as many tasks when the answers are shuffled
COVERED = 0.75  # share of an answer's characters that fragments must cover
ANCHORS = 32  # task pairs an affine relation is fitted on: one in half the tasks shows in about 8
MAX_NUMBERS = 40  # unread numbers of a task the affine fit pairs up (the first and last halves)

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
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:,\d{3})*(?:\.\d+)?")  # a date's "-03" is 3, not minus 3
_ALNUM_RUN = re.compile(r"[^\W_]+")
_CHUNK = re.compile(r"[A-Za-z0-9+/=%_-]{4,}")  # what an encoding of a short string looks like
_CLUE = re.compile(r"[\d=A-Z]")  # a digit, padding or an inner capital: not an English word
_HEX = re.compile(r"(?:[0-9a-fA-F]{2}){3,}")
_B32 = re.compile(r"[A-Z2-7]{8,}=*")
_B64 = re.compile(r"[A-Za-z0-9+/_-]{4,}={0,2}")
_HEXISH = re.compile(r"\b[0-9a-f]*[a-f][0-9a-f]*\d|\b\d[0-9a-f]*[a-f]")
_NUMBER_WORDS = frozenset([*_UNITS, *_TENS, *_DIGITS, *_SCALES, "hundred"])
_HEXWORD = re.compile(r"(?<![\w-])[0-9a-f]*[a-f][0-9a-f]*(?![\w-])")  # an integer in hex without 0x


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


# --- one task's unread text, read once -------------------------------------------------------------
def _unread_text(t, solved: dict) -> str:
    """The prompt and system prompt with every argument the family's solver takes from them
    blanked out (whole tokens; an argument that an earlier tool result gave is not from them)."""
    text = f"{t.prompt}\n{getattr(t, 'system_prompt', '') or ''}"
    read, seen = set(), set()
    for c in solved["calls"]:
        for v in c["arguments"].values():
            v = str(v).strip()
            if v and not set(leakage.normalise(v).split()) <= seen:
                read.add(v)
        seen |= set(leakage.normalise(str(c["result"])).split())
    for v in sorted(read, key=len, reverse=True):
        start = 0
        while (k := text.find(v, start)) >= 0:
            end = k + len(v)
            if (k == 0 or not text[k - 1].isalnum()) and (end == len(text) or not text[end].isalnum()):
                text = text[:k] + " " * len(v) + text[end:]
            start = end
    return text


def _decoded(text: str) -> list[str]:
    """What the text's encoded-looking chunks say: base64, base32, hex bytes, percent-encoding;
    only printable results. English words are skipped (no digit, no inner capital, no '=')."""
    out = []
    if "%" in text:
        with _quiet():
            out.append(urllib.parse.unquote(text))
    for chunk in _CHUNK.findall(text):
        core = chunk.strip("-_")
        if not _CLUE.search(core, 1) and not core[:1].isdigit():
            continue
        tries = []
        if _HEX.fullmatch(core):
            tries.append(lambda c=core: binascii.unhexlify(c))
        if core.isdigit():
            pass  # a number; hex bytes at most
        elif _B32.fullmatch(core):
            tries.append(lambda c=core: base64.b32decode(c + "=" * (-len(c.rstrip("=")) % 8 if "=" not in c else 0)))
        if not core.isdigit() and _B64.fullmatch(core):
            tries.append(lambda c=core: base64.urlsafe_b64decode(c.replace("+", "-").replace("/", "_")
                                                                 + "=" * (-len(c) % 4)))
        for attempt in tries:
            with _quiet():
                s = attempt().decode("utf-8")
                if s and s.isprintable():
                    out.append(s)
    return out


class _quiet:
    """Swallow a failed decoding: most chunks are not encodings."""

    def __enter__(self):
        return self

    def __exit__(self, kind, *_):
        return kind is not None and issubclass(kind, (ValueError, binascii.Error, UnicodeDecodeError))


@dataclass
class _Piece:
    """One line of unread text in the forms the detectors look at it: read once per job, as the
    lines of a family's template repeat from task to task."""

    text: str
    words: list[str]  # its tokens (_TOKEN)
    numbers: list[tuple[str, int]]  # its integer tokens, as written and as values
    values: list[int]  # every number: tokens, hex words, spelled out (for the affine fit)
    decimals: list[str]
    spelled: list[int]
    groups: list[str]  # runs of digits
    squashed: str  # letters and digits, lower-case
    starts: list[int]  # where its alphanumeric runs start and end (substitution spans)
    ends: set[int]
    decoded: list[str]  # what its encoded-looking chunks say


def _piece(line: str) -> _Piece:
    words = _TOKEN.findall(line)
    numbers = [(w, u) for w in words if (w[0] == "-" or w[0].isdigit()) and (u := _integer(w)) is not None]
    spelled = [] if _NUMBER_WORDS.isdisjoint(map(str.lower, words)) else _spelled([w for w in words if not w[0].isdigit()])
    hexes = [int(h, 16) for h in _HEXWORD.findall(line) if len(h) >= 3] if _HEXISH.search(line) else []
    runs = list(_ALNUM_RUN.finditer(line))
    return _Piece(line, words, numbers, [u for _, u in numbers] + hexes + spelled,
                  [x for x in _NUMBER.findall(line) if "." in x] if "." in line else [], spelled,
                  re.findall(r"\d+", line), _NOT_ALNUM.sub("", line.lower()), [m.start() for m in runs],
                  {m.end() for m in runs}, _decoded(line))


@dataclass
class _Reading:
    """The unread text of one task: its lines' pieces, merged."""

    pieces: list[_Piece]
    words: list[str]
    numbers: list[tuple[str, int]]
    values: list[int]
    decimals: list[str]
    spelled: set[int]
    groups: set[str]
    sorted_groups: dict[str, set[str]]  # runs of digits of 4 or more by their sorted digits
    squashed: str  # letters and digits, lower-case, forwards then backwards
    codes: str  # the printable character codes among its numbers, lower-case alphanumerics
    scaled: set[int] = frozenset()  # its numbers in the affine fit's units (set by _affine)


def _read(t, solved: dict, seen: dict[str, _Piece]) -> _Reading:
    raw = _unread_text(t, solved)
    lines = raw.replace(". ", ".\n").split("\n")
    pieces = [seen[x] if x in seen else seen.setdefault(x, _piece(x)) for x in dict.fromkeys(lines) if x.strip()]
    pieces += [seen[x] if x in seen else seen.setdefault(x, _piece(x)) for p in pieces for x in p.decoded]
    numbers = [n for p in pieces for n in p.numbers]
    groups = {g for p in pieces for g in p.groups}
    sorted_groups = defaultdict(set)
    for g in groups:
        if len(g) >= 4:
            sorted_groups["".join(sorted(g))].add(g)
    squashed = " ".join(p.squashed for p in pieces)
    codes = "".join(chr(u) for _, u in numbers if 32 <= u < 127).lower()
    return _Reading(pieces, [w for p in pieces for w in p.words], numbers, list({v for p in pieces for v in p.values}),
                    [x for p in pieces for x in p.decimals], {v for p in pieces for v in p.spelled}, groups,
                    dict(sorted_groups), squashed + " " + squashed[::-1], "".join(ch for ch in codes if ch.isalnum()))


def _decimal(token: str, d: int) -> int:
    """A decimal number times 10**d, exactly (no float: numbers may be long)."""
    whole, _, frac = token.replace(",", "").partition(".")
    sign = -1 if whole.startswith("-") else 1
    return sign * (abs(int(whole)) * 10**d + int(frac.ljust(d, "0")))


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


@dataclass(frozen=True)
class _Answer:
    text: str
    value: int | None  # the answer as an integer, where it is one
    digits: str  # its digits, for an integer
    compact: str  # its letters and digits, lower-case


def _answer(answer: str) -> _Answer:
    text = answer.strip()
    value = int(text) if re.fullmatch(r"-?\d+", text) else None
    return _Answer(text, value, str(abs(value)) if value is not None else "", _NOT_ALNUM.sub("", text.lower()))


# --- the classes of relation; each says whether one task's unread text holds one answer -----------
def _fixed(r: _Reading, ans: _Answer) -> set[str]:
    """The fixed transforms of the answer in one task's unread text."""
    found, a = set(), ans.value
    if a is not None:
        present = Counter(u for _, u in r.numbers)
        for w, u in r.numbers:
            if u != a and abs(u - a) <= 10:
                found.add("a number within 10 of the answer")
            elif u != a and abs(u - a) <= 1000:
                found.add(f"the answer {u - a:+d}")
            if a not in (0, 1, -1) and u != a and u % a == 0 and abs(u // a) <= 1000:
                found.add(f"the answer times {u // a}")
            if u == a and not w.lstrip("-").isdigit():
                found.add("the answer in another base")
            if len(ans.digits) >= 3 and str(abs(u)) == ans.digits[::-1] and u != a:
                found.add("the answer's digits reversed")
        if a in r.spelled:
            found.add("the answer spelled out in words")
        if len(ans.digits) >= 4 and ans.digits in r.squashed and ans.digits not in {str(abs(u)) for u in present}:
            found.add("the answer's digits written apart")
        values = list(present)[:12]
        if _two(values, present, a):
            found.add("a sum, difference or product of two numbers")
        if any(x not in (0, 1) and y not in (0, 1) and _has(present, a - x * y, x, y)
               for i, x in enumerate(values) for y in values[i:] if present[x] > (x == y)):
            found.add("a product of two numbers plus a third")
    elif len(ans.text) >= 3:
        low = ans.text.lower()
        for w in r.words:
            if w == ans.text[::-1] and w != ans.text:
                found.add("the answer reversed")
            elif w.lower() == low and w != ans.text:
                found.add("the answer in another case")
        if len(ans.compact) >= 5 and ans.compact in r.squashed:
            found.add("the answer's characters written apart")
        if len(ans.compact) >= 3 and ans.compact in r.codes:
            found.add("the answer as character codes")
    return found


def _has(present: Counter, z: int, x: int, y: int | None = None) -> bool:
    """Whether z is among the numbers, besides x (and y) already used."""
    return present.get(z, 0) > (z == x) + (z == y)


def _two(values: list[int], present: Counter, a: int) -> bool:
    for x in values:
        if _has(present, a - x, x) or _has(present, x - a, x):  # x + y, x - y
            return True
        if a not in (0, 1, -1) and x not in (0,) and a % x == 0 and _has(present, a // x, x):
            return True
    return False


def _affine(readings: list[_Reading], answers: list[_Answer]) -> tuple[int, tuple[int, int, int]] | None:
    """The relation q*A = p*x + r (x an unread number, decimals scaled by 10**d) most often seen
    among ANCHORS pairs of tasks, fitted on each pair's numbers: (d, (p, q, r)), or None."""
    d = min(3, max((len(x.partition(".")[2]) for r in readings for x in r.decimals), default=0))
    for r in readings:
        r.scaled = {u * 10**d for u in r.values} | {_decimal(x, d) for x in r.decimals if len(x.partition(".")[2]) <= d}
    usable = [i for i, a in enumerate(answers) if a.value is not None and readings[i].scaled]
    if len(usable) < MIN_TASKS:
        return None
    rng = random.Random(len(usable))  # the same tasks, the same pairs
    votes: Counter = Counter()
    for _ in range(ANCHORS):
        i, j = rng.sample(usable, 2)
        ai, aj = answers[i].value * 10**d, answers[j].value * 10**d
        if ai == aj:
            continue
        seen = set()
        for x in _some(readings[i].scaled):
            for y in _some(readings[j].scaled):
                if x == y:
                    continue
                p, q = ai - aj, x - y
                g = math.gcd(p, q) * (1 if q > 0 else -1)
                p, q = p // g, q // g
                seen.add((p, q, q * ai - p * x))
        votes.update(seen)
    best = [c for c, k in votes.most_common(8) if k >= 2]
    return (d, best) if best else None


def _some(numbers: set[int]) -> list[int]:
    ordered = sorted(numbers)
    return ordered if len(ordered) <= MAX_NUMBERS else ordered[:MAX_NUMBERS // 2] + ordered[-MAX_NUMBERS // 2:]


def _affine_holds(r: _Reading, ans: _Answer, d: int, rel: tuple[int, int, int]) -> bool:
    p, q, c = rel
    if ans.value is None:
        return False
    z = q * ans.value * 10**d - c
    return z % p == 0 and z // p in r.scaled


def _digits_split(r: _Reading, ans: _Answer) -> bool:
    """The answer's digits, or its digits reversed, as two or three unread digit groups (in any
    order in the text)."""
    for s in (ans.digits, ans.digits[::-1]):
        n = len(s)
        for i in range(1, n):
            if s[:i] not in r.groups:
                continue
            if s[i:] in r.groups or any(s[i:j] in r.groups and s[j:] in r.groups for j in range(i + 1, n)):
                return True
    return False


def _digits_reordered(r: _Reading, ans: _Answer) -> bool:
    return any(g != ans.digits for g in r.sorted_groups.get("".join(sorted(ans.digits)), ()))


def _spans(r: _Reading, n: int) -> list[str]:
    """The unread text's pieces of n characters that start and end on a word's edge."""
    return [p.text[s:s + n] for p in r.pieces for s in p.starts if s + n in p.ends]


def _substitution(readings: list[_Reading], answers: list[_Answer]) -> list[dict[str, str]]:
    """Character maps (forwards, backwards) voted for by the spans as long as each task's answer
    that a single map could take it to: each character's most voted image, where three tasks or
    more agree."""
    votes = [defaultdict(Counter), defaultdict(Counter)]
    for r, ans in zip(readings, answers):
        s = ans.text
        if len(s) < 3:
            continue
        pairs, distinct = [set(), set()], len(set(s))
        for w in _spans(r, len(s)):
            if w == s:
                continue
            for k, u in enumerate((w, w[::-1])):
                m = set(zip(s, u))
                if len(m) == distinct:  # each character of the answer goes to one character
                    pairs[k] |= m
        for k in (0, 1):
            for c, e in pairs[k]:
                votes[k][c][e] += 1
    maps = []
    for v in votes:
        maps.append({c: e for c, n in v.items() for e, k in [n.most_common(1)[0]] if k >= 3})
    return maps


def _substituted(r: _Reading, ans: _Answer, m: dict[str, str], backwards: bool) -> bool:
    s = ans.text
    if len(s) < 3 or any(c not in m for c in s):
        return False
    image = "".join(m[c] for c in s)
    if image == s:
        return False
    return (image[::-1] if backwards else image) in _spans(r, len(s))


def _fragments(r: _Reading, ans: _Answer) -> bool:
    """Most of the answer's characters in pieces of three or more of the unread text (squashed,
    forwards or backwards)."""
    s = ans.compact
    n = len(s)
    if n < 4:
        return False
    covered, k = 0, 0
    reach = 0
    while k <= n - 3:
        m = 3
        if s[k:k + 3] in r.squashed:
            while k + m < n and s[k:k + m + 1] in r.squashed:
                m += 1
            covered += k + m - max(k, reach)
            reach = k + m
        k += 1
    return covered >= COVERED * n


# --- the job ---------------------------------------------------------------------------------------
def shortcut(tasks: list, solved: list[dict]) -> tuple[str, list[int]]:
    """A relation of the answer to unread words that holds in at least half the tasks it can
    read (and MIN_TASKS or more), and far less when each task is paired with another task's
    answer: (what it is, the indices of the tasks holding it), or ("", [])."""
    n = len(tasks)
    if n < MIN_TASKS:
        return "", []
    seen: dict[str, _Piece] = {}
    readings = [_read(t, sv, seen) for t, sv in zip(tasks, solved)]
    answers = [_answer(t.answer) for t in tasks]
    others = answers[n // 2:] + answers[:n // 2]  # each task against another task's answer

    def judge(name: str, holds, readable, known: tuple[list, list] | None = None) -> tuple[str, list[int]] | None:
        """`holds(reading, answer)` of the tasks' own answers against the shuffled ones; `known`:
        both already computed."""
        own, other = known or ([readable(a) and holds(r, a) for r, a in zip(readings, answers)], None)
        hits = [i for i, h in enumerate(own) if h]
        share = sum(1 for a in answers if readable(a))
        if len(hits) < max(MIN_TASKS, HALF * share):
            return None
        other = other or [readable(a) and holds(r, a) for r, a in zip(readings, others)]
        base = sum(other)
        if base > BASELINE * len(hits):
            return None
        return (f"{name} appears in words the family does not read, in {len(hits)} of {n} tasks "
                f"({base} with the answers shuffled)"), hits

    fit = _affine(readings, answers)
    for rel in fit[1] if fit else ():
        p, q, c = rel
        name = f"an affine map of a number (answer = {p}/{q} x + {c}/{q})" + (f", in units of 10**-{fit[0]}" if fit[0] else "")
        if found := judge(name, lambda r, a, rel=rel: _affine_holds(r, a, fit[0], rel), lambda a: a.value is not None):
            return found
    digits = lambda a: len(a.digits) >= 4  # noqa: E731
    if found := judge("the answer's digits split into groups (digits)", _digits_split, digits):
        return found
    if found := judge("the answer's digits reordered (digits)", _digits_reordered, digits):
        return found
    for backwards, m in enumerate(_substitution(readings, answers)):
        if m and (found := judge("the answer under a character substitution" + (" of its reverse" if backwards else ""),
                                 lambda r, a, m=m, b=bool(backwards): _substituted(r, a, m, b),
                                 lambda a: len(a.text) >= 3)):
            return found
    if found := judge("most of the answer in fragments of three or more characters", _fragments,
                      lambda a: len(a.compact) >= 4):
        return found
    own = [_fixed(r, a) for r, a in zip(readings, answers)]
    candidates = Counter(h for f in own for h in f).most_common(3)
    other = [_fixed(r, a) for r, a in zip(readings, others)] if candidates else []
    for hint, _ in candidates:
        if found := judge(hint, None, lambda a: True, ([hint in f for f in own], [hint in f for f in other])):
            return found
    return "", []
