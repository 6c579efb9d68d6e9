"""The clock's semantics, shared by the eval tools (`toolset.py`) and the checker (`items.py`).

Public (in PUBLIC_MODULES): pure Python, importing nothing else from the package.
"""

import re

DAY = 24 * 60
_TIME = re.compile(r"([01]\d|2[0-3]):([0-5]\d)")


def minutes(time: str) -> int:
    """Minutes since midnight of an `HH:MM` time; ValueError for anything else."""
    found = _TIME.fullmatch(time.strip()) if isinstance(time, str) else None
    if not found:
        raise ValueError(f"not an HH:MM time: {str(time)[:40]!r}")
    return int(found.group(1)) * 60 + int(found.group(2))


def show(total: int) -> str:
    """The `HH:MM` a 24-hour clock shows `total` minutes after midnight (wrapping both ways)."""
    total %= DAY
    return f"{total // 60:02d}:{total % 60:02d}"


def add(time: str, delta: int) -> str:
    """The time `delta` minutes after `time`: what the `clock_add` tool returns."""
    return show(minutes(time) + delta)


def sub(time: str, delta: int) -> str:
    """The time `delta` minutes before `time`: what the `clock_sub` tool returns."""
    return show(minutes(time) - delta)
