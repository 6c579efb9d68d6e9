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

Unread text is read after Unicode NFKC (superscript, fullwidth, circled digits) and any script's
decimal digits taken as ASCII, after decoding what looks like base64, base32, hex bytes or
percent-encoding, forwards and backwards, and in two more views of each token that mixes digits
with other characters: its digits alone ("p5k1k2k3" is 5123) and its letters alone. Spans of a
substitution may start or end inside a token (a glued prefix or suffix).

What none of these names is learned: a lookup table from one feature of the unread text (a
line's wording, a token or character by place, counts, spacing, capitals, punctuation, digit
sums, an id's letters and number) to one part of the answer, learned on half the job's distinct
tasks and counted when it predicts the other half (`_learned`).

Two places besides the free text can hand the answer out: an operand the solver reads from the
prompt (a no-op step "add A, subtract A" where A is the answer), and a value of the task's world
at a key the solver never asks for (an "audit" account holding the balance asked about).

A class is a hint when it holds in at least half the tasks it can read (and MIN_TASKS of them)
and far more often than with each task paired with another task's answer (the shuffled
baseline): what predicts the answer across tasks, not what a text holds by chance or by its
genre. Classes add up: a job may give each task one of several hints, so a class holding in a
minority of the tasks (SHARE, MIN_TASKS) counts when it is even further above its baseline, and
every task where a counted class holds is hinted.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import math
import random
import re
import unicodedata
import urllib.parse
from collections import Counter, defaultdict
from dataclasses import dataclass

from trainergym.probe import leakage

HALF = 0.5  # a relation in at least this share of the tasks it can read (and MIN_TASKS of them) is a hint
MIN_TASKS = 20
BASELINE = 0.25  # ... and in at most this share as many tasks when the answers are shuffled
SHARE, RARE = 0.12, 0.1  # a class in fewer tasks (one of several hints) counts at this share, against a rarer baseline
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
_NON_ASCII = re.compile(r"[^\x00-\x7f]")
_INT, _DEC = re.compile(r"-?\d+"), re.compile(r"-?\d+\.\d+")
_HEXWORD = re.compile(r"(?<![\w-])[0-9a-f]*[a-f][0-9a-f]*(?![\w-])")  # an integer in hex without 0x


def plain(text: str) -> str:
    """Text as the checks compare it: NFKC (superscript, subscript, fullwidth, circled and
    mathematical digits and letters become plain ones), any script's decimal digits as ASCII,
    the minus sign as a hyphen."""
    text = unicodedata.normalize("NFKC", text)
    if text.isascii():
        return text
    return _NON_ASCII.sub(lambda m: str(unicodedata.decimal(c)) if (c := m.group()).isdecimal() else
                          "-" if c == "\u2212" else c, text)


def gives_away(t, solved: dict) -> bool:
    """Whether a task's prompt or system prompt holds its own answer beyond what the family
    reads from it (an operand that happens to equal the answer is fine; a hint line is not): as
    a word, and for a number also with its separators dropped or reversed."""
    answer = leakage.normalise(plain(t.answer))
    if not answer:
        return False
    read, seen = set(), set()  # argument words taken from the prompt, not from an earlier tool result
    for c in solved["calls"]:
        read |= {w for v in c["arguments"].values() for w in leakage.normalise(plain(str(v))).split()} - seen
        seen |= set(leakage.normalise(plain(str(c["result"]))).split())
    text = " ".join(w for w in leakage.normalise(plain(t.prompt + " " + t.system_prompt)).split() if w not in read)
    if len(answer) >= 2 and f" {answer} " in f" {text} ":
        return True
    compact = "".join(answer.split())
    if not compact.isdigit() or len(compact) < 4:
        return False  # a string answer may well be a piece of its prompt (take, drop, reverse)
    squashed = "".join(text.split())
    return compact in squashed or compact[::-1] in squashed


# --- one task's unread text, read once -------------------------------------------------------------
def _operands(solved: dict) -> list[str]:
    """The arguments the family's solver takes from the prompt: not those an earlier tool result
    gave."""
    read, seen = {}, set()
    for c in solved["calls"]:
        for v in c["arguments"].values():
            v = plain(str(v)).strip()
            if v and not set(leakage.normalise(v).split()) <= seen:
                read[v] = None
        seen |= set(leakage.normalise(plain(str(c["result"]))).split())
    return list(read)


def _unread_text(t, read: list[str]) -> str:
    """The prompt and system prompt with every operand the solver reads blanked out (whole
    tokens)."""
    text = plain(f"{t.prompt}\n{getattr(t, 'system_prompt', '') or ''}")
    for v in sorted(read, key=len, reverse=True):
        start = 0
        while (k := text.find(v, start)) >= 0:
            end = k + len(v)
            if (k == 0 or not text[k - 1].isalnum()) and (end == len(text) or not text[end].isalnum()):
                text = text[:k] + " " * len(v) + text[end:]
            start = end
    return text


def _unread_world(world, solved: dict) -> set[str]:
    """The task's world values (normalised) at keys the solver never passes: a value is reached
    when a key below the world's top level on its path is one of the solver's arguments (a
    person, an account, a category); the top-level keys name tables, which no call passes."""
    passed = {_words(str(v)) for c in solved["calls"] for v in c["arguments"].values()}
    out: set[str] = set()

    def walk(node, reached: bool, depth: int) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, reached or (depth > 0 and _words(str(k)) in passed), depth + 1)
        elif isinstance(node, list):
            for v in node:
                walk(v, reached, depth + 1)
        elif not reached and not isinstance(node, bool) and node is not None:
            out.add(_words(str(node)))

    if isinstance(world, dict):
        walk(world, False, 0)
    return out


@functools.lru_cache(maxsize=1 << 16)
def _words(text: str) -> str:
    """`text` as leakage.normalise writes it, after `plain` (worlds repeat their values: cached)."""
    return leakage.normalise(plain(text))


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
    runs: list[tuple[int, int]]  # its alphanumeric runs longer than a word edge (glued spans)
    decoded: list[str]  # what its encoded-looking chunks say, and its tokens' views
    glued: list[str]  # the digits of its tokens that mix digits with other characters


def _views(line: str) -> tuple[list[str], list[str]]:
    """The tokens that mix digits with letters or separators, read as their digits alone and as
    their letters alone: "p5k1k2k3" is 5123 and "pkkk"; "2024-03-05" is 20240305."""
    digits, letters = [], []
    for token in line.split():
        token = token.strip(".,;:!?()[]{}'\"<>#-")
        if token.isdigit() or token.isalpha() or not any(c.isdigit() for c in token):
            continue
        if sum(c.isdigit() for c in token) >= 2:
            digits.append("".join(c for c in token if c.isdigit()))
        if sum(c.isalpha() for c in token) >= 2:
            letters.append("".join(c for c in token if c.isalpha()))
    return digits, letters


def _piece(line: str, top: bool = True) -> _Piece:
    """`top`: a line of the text, whose decodings and views are read too (not theirs in turn)."""
    words = _TOKEN.findall(line)
    numbers = [(w, u) for w in words if (w[0] == "-" or w[0].isdigit()) and (u := _integer(w)) is not None]
    spelled = [] if _NUMBER_WORDS.isdisjoint(map(str.lower, words)) else _spelled([w for w in words if not w[0].isdigit()])
    hexes = [int(h, 16) for h in _HEXWORD.findall(line) if len(h) >= 3] if _HEXISH.search(line) else []
    runs = [m.span() for m in _ALNUM_RUN.finditer(line)]
    digits, letters = _views(line) if top else ([], [])
    view = " ".join(digits + letters)
    return _Piece(line, words, numbers, [u for _, u in numbers] + hexes + spelled,
                  [x for x in _NUMBER.findall(line) if "." in x] if "." in line else [], spelled,
                  re.findall(r"\d+", line), _NOT_ALNUM.sub("", line.lower()), [s for s, _ in runs],
                  {e for _, e in runs}, [(s, e) for s, e in runs if e - s > 3],
                  (_decoded(line) if top else []) + ([view] if view and view != line else []), digits)


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
    glued: set[str]  # digits of tokens that mix them with other characters
    edges: set[str]  # the first and last digits (two to eight) of its longer runs of digits
    operands: list[str]  # what the solver reads from the prompt
    world: set[str]  # the world's values at keys the solver never passes
    text: str  # its pieces' text
    scaled: set[int] = frozenset()  # its numbers in the affine fit's units (set by _affine)
    raw: str = ""  # the unread text as written (its spacing too)


def _read(t, solved: dict, seen: dict[str, _Piece]) -> _Reading:
    operands = _operands(solved)
    raw = _unread_text(t, operands)
    lines = raw.replace(". ", ".\n").split("\n")
    pieces = [seen[x] if x in seen else seen.setdefault(x, _piece(x)) for x in dict.fromkeys(lines) if x.strip()]
    pieces += [seen[x] if x in seen else seen.setdefault(x, _piece(x, top=False)) for p in pieces for x in p.decoded]
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
                    dict(sorted_groups), squashed + " " + squashed[::-1], "".join(ch for ch in codes if ch.isalnum()),
                    {g for p in pieces for g in p.glued},
                    {x for g in groups for k in range(2, min(len(g), 9)) for x in (g[:k], g[-k:])}, operands, _unread_world(getattr(t, "world", None), solved),
                    "\n".join(p.text for p in pieces), raw=raw)


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
    words: str  # as leakage.normalise writes it (operands and world values are compared so)


def _answer(answer: str) -> _Answer:
    text = plain(answer).strip()
    value = int(text) if re.fullmatch(r"-?\d+", text) else None
    return _Answer(text, value, str(abs(value)) if value is not None else "", _NOT_ALNUM.sub("", text.lower()),
                   leakage.normalise(text))


# --- a lookup learned from the tasks: what no class above names ----------------------------------
LEARNED, ABOVE = 0.8, 0.4  # held-out accuracy at least this (a code, not a tendency), this far above shuffled
_SLOT_TOKEN = re.compile(r"[^\W_]+(?:[-'][^\W_]+)*")
_EDGE = 8  # tokens of a line, and characters of a token, looked at from either end
PEEK = 60  # tasks a pair is first tried on
LOOKUP_TASKS = 200  # tasks the lookups learn and are tried on (a 62-symbol code per place is learned from 100)
_ID = re.compile(r"([A-Za-z]{1,6})[-_]?(\d{2,})")
MODULI = (3, 4, 5, 7, 8, 9, 10, 11, 12, 13, 16)  # an integer's value modulo m, against the answer's


def _slots(r: _Reading) -> dict[tuple, str]:
    """What a lookup could key on in one task's unread text: each line's wording (digits
    masked; by its place from either end of the text), each token of a line (by the line's first
    word and the token's place from either end), each character of those tokens (by its place
    from either end), each run of digits (by place) with its value and digit sum modulo each of
    MODULI; each line as written, by place and by its first word: its leading and trailing spaces,
    its sentences, words and characters counted, which words are capitalised, its punctuation; the
    text's length modulo each of MODULI; and the letters, last digits and number modulo 2-64 of the
    ids the solver reads."""
    out: dict[tuple, str] = {}
    lines = [p.text for p in r.pieces if p.text.strip()]
    for k, line in enumerate(lines):
        wording = " ".join(re.sub(r"\d+", "#", line.lower()).split())  # the blanked operands' spaces too
        out[("line", k)] = out[("line", k - len(lines))] = wording
        tokens = _SLOT_TOKEN.findall(line.lower())
        if not tokens:
            continue
        head = tokens[0] if not tokens[0][0].isdigit() else "#"
        for j in (*range(min(_EDGE, len(tokens))), *range(-min(_EDGE, len(tokens)), 0)):
            token = tokens[j]
            out[("token", head, j)] = token
            if len(token) >= 3:
                for c in (*range(min(_EDGE, len(token))), *range(-min(_EDGE, len(token)), 0)):
                    out[("character", head, j, c)] = token[c]
        numbers = re.findall(r"\d+", line)  # each run of digits, also inside ids and serials
        for j in (*range(min(_EDGE, len(numbers))), *range(-min(_EDGE, len(numbers)), 0)):
            digit_sum = sum(map(int, numbers[j]))
            out[("digit sum mod 10", head, j)] = str(digit_sum % 10)
            for m in MODULI:
                out[("mod", m, head, j)] = str(int(numbers[j]) % m)
                out[("mod", m, "digit sum", head, j)] = str(digit_sum % m)
    # How the text is spaced, line by line as written: spaces are characters a code can use.
    raw = [x for x in r.raw.split("\n") if x.strip()]
    for k, line in enumerate(raw):
        words = line.split()
        head = next(iter(_SLOT_TOKEN.findall(line.lower())), "")
        counts = {"trailing spaces": len(line) - len(line.rstrip()), "leading spaces": len(line) - len(line.lstrip()),
                  "sentences": len(re.findall(r"[.!?](?:\s|$)", line)), "words": len(words),
                  "characters mod 10": len(line) % 10}
        for name, count in counts.items():  # how many: a count is a digit
            out[(name, k)] = out[(name, k - len(raw))] = out[(name, head)] = str(count)
        # which words are capitalised, and the punctuation used, as written
        shape = (" ".join(str(j) for j, w in enumerate(words[1:], 1) if w[:1].isupper()),
                 "".join(c for c in line if c in ",;:-!?()'\""))
        out[("capitals", head)] = out[("capitals", k - len(raw))] = shape[0]
        out[("punctuation", head)] = out[("punctuation", k - len(raw))] = shape[1]
    for m in MODULI:
        out[("mod", m, "characters")] = str(len(r.raw) % m)
    # Ids the solver reads (a ticket's, an incident's) are names, not values the answer follows
    # from: neither their letters nor their number may carry a code.
    for k, (letters, number) in enumerate((m.group(1).lower(), m.group(2)) for v in r.operands
                                          if (m := _ID.fullmatch(v))):
        if k == 2:
            break
        out[("id letters", k)] = letters
        for c in range(min(4, len(letters))):
            out[("id letter", k, c)] = letters[c]
        for tail in (1, 2, 3):
            out[("id digits", k, tail)] = number[-tail:]
        for m in range(2, 65):
            out[("id number modulo", k, m)] = str(int(number) % m)
    return out


def _slot_rows(readings: list[_Reading]) -> list[dict[tuple, str]]:
    """`_slots` of each task, and which of the job's frequent wordings it has (lines without
    digits in a twentieth of the tasks or more, not all): a choice among sentences, wherever it
    falls in the text, is a code too (one wording per last digit)."""
    rows = [_slots(r) for r in readings]
    frequent = Counter(w for row in rows for w in {v for k, v in row.items() if k[0] == "line" and "#" not in v})
    common = {w for w, c in frequent.items() if len(rows) / 20 <= c < len(rows)}
    for row in rows:
        row[("wordings",)] = " | ".join(sorted({v for k, v in row.items() if k[0] == "line" and v in common}))
    return rows


def _targets(a: _Answer) -> dict[tuple, str]:
    """What of an answer a lookup could predict: each character (lower-case) by its place from
    either end, the whole of it; for an integer, its hexadecimal digits from the end and its value
    modulo each of MODULI (tried only against a number of the text modulo the same)."""
    text = a.text.lower()
    out = {("character", c): text[c] for c in (*range(min(_EDGE, len(text))), *range(-min(_EDGE, len(text)), 0))}
    out[("whole",)] = text
    if a.value is not None:
        hexa = format(abs(a.value), "x")
        out.update({("hex digit", c): hexa[c] for c in range(-min(_EDGE, len(hexa)), 0)})
        out.update({("mod", m): str(a.value % m) for m in MODULI})
        out.update({("mod", m, "of its size"): str(abs(a.value) % m) for m in MODULI})
    return out


def _lookup_accuracy(features: list, targets: list, least: float | None = None) -> float:
    """A table learned on the even tasks predicts the odd ones' targets from their features, and
    the other way round: the share predicted right of the tasks whose feature the table knows (a
    code of many values is learned from a few tasks each), or 0 when it knows too few of them (a
    quarter, MIN_TASKS / 2; or `least`)."""
    right = total = known = 0
    for learn in (0, 1):
        table: dict[str, Counter] = defaultdict(Counter)
        for i in range(learn, len(features), 2):
            if features[i] is not None and targets[i] is not None:
                table[features[i]][targets[i]] += 1
        best = {f: counts.most_common(1)[0][0] for f, counts in table.items()}
        for i in range(1 - learn, len(features), 2):
            if features[i] is not None and targets[i] is not None:
                total += 1
                known += features[i] in best
                right += best.get(features[i]) == targets[i]
    return right / known if known >= (max(MIN_TASKS / 2, total / 4) if least is None else least) else 0.0


def _columns(rows: list[dict], keep) -> dict[tuple, list]:
    """`rows` (one dict per task) as one column per key, None where a task lacks it; only the
    columns `keep(values)` accepts, each distinct column once."""
    keys = Counter(k for row in rows for k in row)
    out, seen = {}, set()
    for key, n in keys.items():
        if n < MIN_TASKS:
            continue
        column = [row.get(key) for row in rows]
        values = [v for v in column if v is not None]
        sig = tuple(column)
        if sig not in seen and keep(values):
            seen.add(sig)
            out[key] = column
    return out


def _learned(readings: list[_Reading], answers: list[_Answer], others: list[_Answer]):
    """A lookup from one feature of the unread text to one part of the answer, learned on half the
    tasks, that predicts the other half (LEARNED) far better than with the answers shuffled
    (ABOVE): any per-place code (colour words for digits, a wording per last digit, a shifted or
    XOR-ed character per position, initials in an id) without naming it. Yields (what, the
    feature's key, the target's)."""
    # A code repeats its values from task to task (names and ids do not), and takes more than one.
    features = _columns(_slot_rows(readings), lambda vs: 2 <= len(set(vs)) <= len(vs) / 2)
    # A part of the answer with few values, or one mostly the same (its sign, its first digit), is
    # what the task's own words may well predict (a chain of subtractions ends negative).
    targets = _columns([_targets(a) for a in answers],
                       lambda vs: len(set(vs)) >= 4 and Counter(vs).most_common(1)[0][1] <= len(vs) / 2)
    shuffled = [_targets(a) for a in others]
    for key, feature in features.items():
        for target, told in targets.items():
            if (key[0] == "mod" or target[0] == "mod") and key[:2] != target[:2]:
                continue  # a number modulo m is tried against the answer modulo m only
            if sum(f is not None and t is not None for f, t in zip(feature, told)) < MIN_TASKS:
                continue
            if len(feature) > 2 * PEEK and _lookup_accuracy(feature[:PEEK], told[:PEEK], least=1) < LEARNED - 0.3:
                continue  # a first look at a few tasks: most pairs are nowhere near a code
            acc = _lookup_accuracy(feature, told)
            if acc < LEARNED:
                continue
            base = _lookup_accuracy(feature, [row.get(target) for row in shuffled])
            if acc - base >= ABOVE:
                yield (f"the answer's {' '.join(map(str, target))} predicted by a lookup of the unread text's "
                       f"{' '.join(map(str, key))} (learned on half the tasks: {acc:.0%} right on the other half, "
                       f"{base:.0%} with the answers shuffled)"), key, target


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
        d = ans.digits
        if len(d) >= 2 and d in r.glued:
            found.add("the answer's digits inside a token with other characters")
        if len(d) >= 2 and (d in r.edges or d[::-1] in r.edges):
            found.add("the answer's digits, or reversed, at one end of a longer number")
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
    """The unread text's pieces of n characters that start and end on a word's edge, or that
    start or end a longer word (glued to a prefix or a suffix: "ref" + code). Spans at any offset
    inside words would let English text vote for any image of a letter; so would the ends of
    words for answers under five characters (and every longer word would be read twice)."""
    out = [p.text[s:s + n] for p in r.pieces for s in p.starts if s + n in p.ends]
    for p in r.pieces if n >= 5 else ():
        for s, e in p.runs:
            if e - s > n:
                out += (p.text[s:s + n], p.text[e - n:e])
    return out


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
    return (image[::-1] if backwards else image) in r.text  # anywhere: glued on both sides too


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


# --- the solver's own inputs: what it reads from the prompt, and the world it does not ask for -----
@dataclass
class _Operands:
    """The numbers among what the solver reads from the prompt, for the affine fit."""

    values: list[int]
    decimals: list[str]
    scaled: set[int] = frozenset()


def _operand_numbers(r: _Reading) -> _Operands:
    return _Operands([int(v) for v in r.operands if _INT.fullmatch(v)], [v for v in r.operands if _DEC.fullmatch(v)])


def _is_operand(r: _Reading, ans: _Answer) -> bool:
    """An honest chain rarely holds its own answer as an operand ("add A, subtract A" does)."""
    return any(_words(v) == ans.words for v in r.operands)


def _in_world(r: _Reading, ans: _Answer) -> bool:
    return ans.words in r.world


# --- the job ---------------------------------------------------------------------------------------
def shortcut(tasks: list, solved: list[dict]) -> tuple[str, list[int]]:
    """Relations of the answer to unread words, to operands the solver reads or to world values
    it never asks for, each holding in at least half the tasks it can read (or SHARE of them,
    when rarer still with the answers shuffled) and MIN_TASKS or more, and far less when each
    task is paired with another task's answer: (what they are, the indices of the tasks holding
    any), or ("", [])."""
    counted = [(f"{name} in {len(hits)} of {len(tasks)} tasks ({base} with the answers shuffled)", hits)
               for name, hits, base, share in _classes(tasks, solved, floor=True) if _counts(hits, base, share)]
    if not counted:
        return "", []
    hinted = sorted({i for _, hits in counted for i in hits})
    if len(counted) == 1:
        return counted[0][0], hinted
    return f"{len(counted)} hints, in {len(hinted)} tasks together: " + "; ".join(c for c, _ in counted), hinted


def _counts(hits: list[int], base: int, share: int) -> bool:
    """Whether a class is a hint, of the `share` tasks it can read: in half of them against a
    baseline a quarter as large; in SHARE of them (one of several hints) against a baseline a
    tenth as large; or in half of them more than with the answers shuffled (a world whose values
    recur from task to task holds another task's answer often, but not the hint's)."""
    if len(hits) < max(MIN_TASKS, SHARE * share):
        return False
    return (base <= (BASELINE if len(hits) >= HALF * share else RARE) * len(hits)
            or len(hits) - base >= max(MIN_TASKS, HALF * share))


def _classes(tasks: list, solved: list[dict], floor: bool = True):
    """Each class of relation tried on the job: (what it is, the tasks holding it, how many hold
    it with the answers shuffled, how many tasks it can read). With `floor`, the shuffled count
    is only taken (and the class only given) where enough tasks hold it to count."""
    n = len(tasks)
    if n < MIN_TASKS:
        return
    seen: dict[str, _Piece] = {}
    readings = [_read(t, sv, seen) for t, sv in zip(tasks, solved)]
    answers = [_answer(t.answer) for t in tasks]
    others = answers[n // 2:] + answers[:n // 2]  # each task against another task's answer

    def judge(name: str, holds, readable, known: tuple[list, list] | None = None, on=readings, where=" appears in "
              "words the family does not read,"):
        """`holds(reading, answer)` of the tasks' own answers against the shuffled ones; `known`:
        both already computed; `on`: what it reads of each task."""
        own, other = known or ([readable(a) and holds(r, a) for r, a in zip(on, answers)], None)
        hits = [i for i, h in enumerate(own) if h]
        share = sum(1 for a in answers if readable(a))
        if floor and len(hits) < max(MIN_TASKS, SHARE * share):
            return None
        other = other if other is not None else [readable(a) and holds(r, a) for r, a in zip(on, others)]
        return name + where, hits, sum(other), share

    def affine(on: list, where: str):
        fit = _affine(on, answers)
        for rel in fit[1] if fit else ():
            p, q, c = rel
            name = f"an affine map of {where} (answer = {p}/{q} x + {c}/{q})" + (f", in units of 10**-{fit[0]}" if fit[0] else "")
            yield judge(name, lambda r, a, rel=rel: _affine_holds(r, a, fit[0], rel), lambda a: a.value is not None,
                        on=on, where=" appears in words the family does not read," if on is readings else ",")

    found = [*affine(readings, "a number")]
    digits = lambda a: len(a.digits) >= 4  # noqa: E731
    found.append(judge("the answer's digits split into groups (digits)", _digits_split, digits))
    found.append(judge("the answer's digits reordered (digits)", _digits_reordered, digits))
    left = range(n)  # several maps on parts of the tasks: learn one, then one on the tasks it leaves
    for _ in range(3):
        held = set()
        for backwards, m in enumerate(_substitution([readings[i] for i in left], [answers[i] for i in left])):
            if m and (f := judge("the answer under a character substitution" + (" of its reverse" if backwards else ""),
                                 lambda r, a, m=m, b=bool(backwards): _substituted(r, a, m, b),
                                 lambda a: len(a.text) >= 3)):
                found.append(f)
                held |= set(f[1]) if _counts(*f[1:]) else set()
        if not held:
            break
        left = [i for i in left if i not in held]
    found.append(judge("most of the answer in fragments of three or more characters", _fragments,
                       lambda a: len(a.compact) >= 4))
    own = [_fixed(r, a) for r, a in zip(readings, answers)]
    least = max(MIN_TASKS, SHARE * n) if floor else 1
    candidates = [h for h, k in Counter(h for f in own for h in f).items() if k >= least]
    other = [_fixed(r, a) for r, a in zip(readings, others)] if candidates else []
    for hint in candidates:
        found.append(judge(hint, None, lambda a: True, ([hint in f for f in own], [hint in f for f in other])))
    # The solver's own inputs: an operand equal to (or an affine map to) the answer, a world value
    # equal to it at a key no call passes.
    found.append(judge("the answer is an operand the solver reads from the prompt,", _is_operand, lambda a: True,
                       where=""))
    found += affine([_operand_numbers(r) for r in readings], "an operand the solver reads")
    found.append(judge("the answer is a value of the task's world at a key the solver never asks for,", _in_world,
                       lambda a: True, where=""))
    yield from (f for f in found if f is not None)
    # Last, what none of the classes names: learned as a lookup on LOOKUP_TASKS of them (spread over
    # the job), counted as a hint in every task it reads.
    # Over distinct tasks by the family's reading: a job that repeats a few tasks makes whatever
    # tells them apart (a line's length, its spacing) predict their answers without any code.
    first: dict[str, int] = {}
    for i, sv in enumerate(solved):
        calls = [(c["tool"], c["arguments"]) for c in sv["calls"]] if sv["calls"] else tasks[i].prompt
        first.setdefault(json.dumps([calls, tasks[i].answer], sort_keys=True, default=str), i)
    distinct = list(first.values())
    picked = distinct[::max(1, len(distinct) // LOOKUP_TASKS)][:LOOKUP_TASKS]
    slots = None
    for what, key, target in _learned([readings[i] for i in picked], [answers[i] for i in picked],
                                      [others[i] for i in picked]):
        slots = slots or _slot_rows(readings)
        reads = [i for i in range(n) if key in slots[i] and target in _targets(answers[i])]
        yield what + ",", reads, 0, len(reads)
