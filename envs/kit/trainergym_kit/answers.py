"""Answer extraction: the part of a reply a checker grades, and the last match of a pattern in it.

Each family keeps its own answer pattern and normalisation (its checker's rules, in
docs/families.md); these are the mechanics they share. Pure Python and public: a job's reward
may import it (it is in the kit's PUBLIC_MODULES).
"""

from __future__ import annotations

import re


def after_think(reply: object) -> str:
    """The text a checker grades: what follows the last `</think>` in `reply`, or all of it
    when there is no `</think>`, so a reasoning draft is never graded.

    Takes the model's reply (None counts as empty; anything else is read as `str(reply)`);
    returns a string, "" at the least. An unclosed `<think>` is not stripped.
    """
    return str(reply or "").rsplit("</think>", 1)[-1]


def last_match(pattern: re.Pattern[str], reply: object) -> str | None:
    """What `pattern` finds last in `after_think(reply)`, as `pattern.findall` gives it: the
    whole match when the pattern has no group, group 1 when it has one.

    Returns None when the pattern never matches; an empty capture is returned as "" (so test
    the result with `is None`). Matches do not overlap: `findall` reads left to right.
    """
    found = pattern.findall(after_think(reply))
    return found[-1] if found else None
