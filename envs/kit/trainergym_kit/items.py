"""The item contract: how item k of a family's stream is seeded, and how a family reads an item.

Pure Python (no verifiers import), so trainergym generates and checks items in its own process.
The seeding fixes every family's items, and so the hidden eval and the baselines measured on
it: `item_rng` must never change.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from typing import TypeVar

# The difficulty levels and, when a caller asks for none, how often each is drawn: 30/40/30.
LEVELS = (1, 2, 3)
LEVEL_WEIGHTS = (3, 4, 3)

# What reading a malformed row raises inside a family's parser; `strict` turns these into ValueError.
_UNREADABLE = (KeyError, TypeError, AttributeError, IndexError, ZeroDivisionError, OverflowError, RecursionError)

Reader = TypeVar("Reader", bound=Callable)


def item_rng(family: str, namespace: str, seed: int | str, index: int) -> tuple[str, random.Random]:
    """The id and the RNG of item `index` of the stream (family, namespace, seed).

    Takes the family id, the namespace (`public`, `dev`, the probe's and the hidden eval's own),
    the seed and the item's position. Returns `("{namespace}-{seed}-{index}", rng)` where `rng`
    is seeded with `"{family}:{namespace}:{seed}:{index}"`. Guarantees: item k draws from its
    own RNG, so it is the same however many items are generated, and no two namespaces or
    families share a stream; the same arguments give the same RNG state in every process and
    Python version (string seeds are hashed with SHA-512, not `hash()`).
    """
    return f"{namespace}-{seed}-{index}", random.Random(f"{family}:{namespace}:{seed}:{index}")


def seeded_items(family: str, seed: int | str, n: int, namespace: str, difficulty: int | None,
                 make: Callable[[random.Random, str, int], dict]) -> list[dict]:
    """The first `n` items of the stream (family, namespace, seed): what a family's `generate`
    returns.

    Item k is `make(rng, item_id, level)` with `item_id, rng = item_rng(family, namespace, seed, k)`;
    `level` is `difficulty` when one is given, else drawn first from that item's RNG from
    `LEVELS` weighted `LEVEL_WEIGHTS`. Returns `make`'s rows in order. Guarantees what
    `item_rng` does: `seeded_items(..., n=5, ...)` is the first five of `n=30`, and the rows
    depend only on the arguments (as long as `make` draws only from the RNG it is given).
    """
    rows = []
    for index in range(n):
        item_id, rng = item_rng(family, namespace, seed, index)
        level = difficulty or rng.choices(LEVELS, weights=LEVEL_WEIGHTS)[0]
        rows.append(make(rng, item_id, level))
    return rows


def strict(family: str, *also: type[Exception]) -> Callable[[Reader], Reader]:
    """A decorator for a family's item readers (`solve`, `skills`, `distractors`: one row in).

    Takes the family id (for the message) and any exception types beyond the usual ones its
    parser can raise on a malformed row (dispatch's: `StopIteration`). The decorated reader
    raises ValueError, and only ValueError, when it cannot read a row: a ValueError passes as
    is; KeyError, TypeError, AttributeError, IndexError, ZeroDivisionError, OverflowError,
    RecursionError and `also` become `ValueError("<family> cannot read this item: <type>: <e>")`
    chained to the original. Anything else propagates: it is a bug, not a bad row.
    """
    unreadable = _UNREADABLE + also

    def decorate(fn: Reader) -> Reader:
        @functools.wraps(fn)
        def reader(row):
            try:
                return fn(row)
            except ValueError:
                raise
            except unreadable as e:
                raise ValueError(f"{family} cannot read this item: {type(e).__name__}: {e}") from e
        return reader  # type: ignore[return-value]

    return decorate
