"""Whether a job's data holds items of the hidden eval, matched by content rather than wording.

A hidden item is leaked by a job item when any of these hold:

1. **Same text**: the prompts are equal after normalisation (case, punctuation, spacing).
2. **Same problem**: the family's own solver, run on both, makes the same tool calls with the
   same results and reaches the same answer (`canonical`). Rewording that the family can still
   read, a reshuffled world, a renamed id field: the trace is what a model sees, so it is the
   item's identity.
3. **Same content**: the job item's prompt and world hold every distinctive token of the hidden
   item's (numbers of two or more digits, ids such as `T-8772`, quoted strings, capitalised
   names), and those tokens carry enough information that an honest generator would not
   produce them all by chance (`STRONG_BITS`); between `WEAK_BITS` and that, the answers must
   also agree. This catches rewordings the family cannot read, whatever the job's answer field says.

Token information is estimated from the family's public items: a token seen in k of N public
items carries log2(N / (k + 1)) bits (at least 1). Items too generic to tell from chance
(under `WEAK_BITS`) are matched by rules 1 and 2 only. Only the verdict leaves the library.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import threading
from collections import Counter
from dataclasses import dataclass
from functools import cache

from trainergym.task import hidden
from trainergym.task.spec import get_family

STRONG_BITS = 56.0  # containment alone is a leak
WEAK_BITS = 28.0  # containment plus the same answer is a leak
MAX_TOKEN_BITS = 32.0
_CORPUS = 1000  # public items the token statistics are read from
_TOKEN = re.compile(r'"([^"\n]{3,80})"'  # a quoted string
                    r"|\b([A-Z][A-Za-z]*-\d{2,})\b"  # an id: T-8772, INC-281362
                    r"|\b([A-Z][a-z]+(?: [A-Z]\.)?(?: [A-Z][a-z]+)+)\b"  # a name of two or more words
                    r"|(?<![\w-])(-?\d{2,})\b")  # a number of two or more digits


def normalise(text: str) -> str:
    """`text` lower-cased, with punctuation turned into spaces and whitespace collapsed: what rule 1
    compares."""
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


def tokens(prompt: str, world: dict | None) -> Counter:
    """The distinctive tokens of an item: in its prompt, numbers, ids, quoted strings and
    capitalised names; in its world, every key and string of 3-80 characters and every number
    of two or more digits."""
    # One group of the pattern takes part in each match, and none matches empty: the others are "".
    out: Counter = Counter("".join(groups).strip() for groups in _TOKEN.findall(prompt))
    if world:
        _walk(world, out)
    return out


MAX_DEPTH = 20  # a world's values nested deeper than this are not read


def _walk(value, out: Counter) -> None:
    """Count `value`'s tokens into `out`, in order, down to MAX_DEPTH: dict keys and values,
    list and tuple items, ints of two or more digits (not bools), strings of 3-80 characters.
    Iterative (a world's depth is the job's choice) and typed by exact type first: worlds
    arrive as JSON, and this walks every value of every task."""
    stack = [iter((value,))]  # stack[d] yields the values at depth d
    while stack:
        depth = len(stack) - 1
        for v in stack[-1]:
            kind = type(v)
            if kind is str:
                if 3 <= len(v) <= 80:
                    out[v.strip()] += 1
            elif kind is int:
                if v >= 10 or v <= -10:
                    out[str(v)] += 1
            elif kind is dict:
                if depth < MAX_DEPTH:
                    stack.append(itertools.chain.from_iterable(v.items()))
                    break
            elif kind is list or kind is tuple:
                if depth < MAX_DEPTH:
                    stack.append(iter(v))
                    break
            elif kind is bool or kind is float or v is None:
                continue
            elif isinstance(v, dict):  # subclasses, as the types they are
                if depth < MAX_DEPTH:
                    stack.append(itertools.chain.from_iterable(v.items()))
                    break
            elif isinstance(v, (list, tuple)):
                if depth < MAX_DEPTH:
                    stack.append(iter(v))
                    break
            elif isinstance(v, bool):
                continue
            elif isinstance(v, int):
                if abs(v) >= 10:
                    out[str(v)] += 1
            elif isinstance(v, str) and 3 <= len(v) <= 80:
                out[v.strip()] += 1
        else:
            stack.pop()


def canonical(family, row: dict) -> str | None:
    """The item as the family's solver sees it: its tool calls, their results and the reply;
    None when the family cannot read it."""
    try:
        solved = family.solve(row)
    except Exception:  # noqa: BLE001 - unreadable items are matched by content instead
        return None
    return json.dumps([solved["calls"], solved["reply"]], sort_keys=True, default=str)


@dataclass(frozen=True)
class _Hidden:
    prompts: frozenset[str]
    canon: frozenset[str]
    # per hidden item: its token counts, bits, normalised answer; indexed by its rarest token
    items: tuple[tuple[Counter, float, str], ...]
    by_key: dict[str, tuple[int, ...]]


@cache
def _bits(family_id: str) -> tuple[Counter, int]:
    fam = get_family(family_id)
    seen: Counter = Counter()
    rows = fam.generate("leakage-statistics", _CORPUS)
    for row in rows:
        seen.update(set(tokens(row["prompt"], row.get("world"))))
    return seen, len(rows)


def token_bits(family_id: str, token: str) -> float:
    """log2(N / (k + 1)) for a token seen in k of N public items; a token never seen carries
    at least that much, and as much as its characters can hold (a random 13-character string
    is not a name from a short list), up to `MAX_TOKEN_BITS`."""
    seen, n = _bits(family_id)
    k = seen.get(token, 0)
    if k:
        return max(1.0, math.log2(n / (k + 1)))
    return max(math.log2(n), min(MAX_TOKEN_BITS, _capacity(token)))


def _capacity(token: str) -> float:
    """Bits a token's characters can hold: log2 of its character classes' size per character."""
    size = (10 * any(c.isdigit() for c in token) + 26 * any(c.islower() for c in token)
            + 26 * any(c.isupper() for c in token)) or 10
    return len(token) * math.log2(size) * 0.5  # halved: generators rarely use the full space


@cache
def _hidden(family_id: str, secret: str) -> _Hidden:
    fam = get_family(family_id)
    items, by_key, canon = [], {}, set()
    evals = hidden.hidden_eval(family_id)
    for i, ex in enumerate(evals):
        row = ex.model_dump()
        key = canonical(fam, row)
        if key:
            canon.add(key)
        toks = tokens(ex.prompt, ex.world)
        bits = sum(token_bits(family_id, t) * c for t, c in toks.items())
        items.append((toks, bits, normalise(ex.answer)))
        if toks and bits >= WEAK_BITS:
            rarest = max(toks, key=lambda t: token_bits(family_id, t))
            by_key.setdefault(rarest, []).append(i)
    return _Hidden(frozenset(normalise(ex.prompt) for ex in evals), frozenset(canon), tuple(items),
                   {k: tuple(v) for k, v in by_key.items()})


def prepare(family_id: str) -> threading.Thread:
    """Build the family's hidden index in the background (a first probe starts its sandbox
    meanwhile); `leaks` waits for it."""
    with _preparing_lock:
        thread = _preparing.get(family_id)
        if thread is None:
            thread = _preparing[family_id] = threading.Thread(target=_hidden, args=(family_id, hidden.secret_seed()),
                                                              daemon=True)
            thread.start()
    return thread


_preparing: dict[str, threading.Thread] = {}
_preparing_lock = threading.Lock()


def leaks(family_id: str, rows: list[dict], canon: list[str | None] | None = None) -> list[int]:
    """Indices of `rows` ({prompt, answer, world}) that leak a hidden-eval item. `canon` gives
    the rows' canonical forms where the caller already solved them (None: unreadable)."""
    prepare(family_id).join()
    h = _hidden(family_id, hidden.secret_seed())
    fam = get_family(family_id)
    out = []
    for j, row in enumerate(rows):
        if normalise(row["prompt"]) in h.prompts:
            out.append(j)
            continue
        key = canon[j] if canon is not None else canonical(fam, row)
        if key is not None and key in h.canon:
            out.append(j)
            continue
        toks = tokens(row["prompt"], row.get("world"))
        answer = normalise(row.get("answer", ""))
        for t in toks:
            if any(_contains(toks, h.items[i], answer) for i in h.by_key.get(t, ())):
                out.append(j)
                break
    return out


def _contains(toks: Counter, item: tuple[Counter, float, str], answer: str) -> bool:
    have, bits, item_answer = item
    if any(toks[t] < c for t, c in have.items()):
        return False
    return bits >= STRONG_BITS or answer == item_answer
