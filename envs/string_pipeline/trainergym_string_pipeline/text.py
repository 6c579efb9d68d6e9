"""The text tools' semantics, shared by the eval tools (`trainergym_string_pipeline.toolset`) and the
solver and checker (`trainergym_string_pipeline.items`).

A public module of the family: job code may import it (see `PUBLIC_MODULES` in family.py), so
it is pure Python and imports nothing else from the package.
"""

from __future__ import annotations

import string


def reverse(text: str) -> str:
    return text[::-1]


def swapcase(text: str) -> str:
    return text.swapcase()


def caesar(text: str, shift: int) -> str:
    """Shift ASCII letters forward by `shift` (mod 26), keeping case; others unchanged."""
    out = []
    for ch in text:
        for alphabet in (string.ascii_lowercase, string.ascii_uppercase):
            if ch in alphabet:
                ch = alphabet[(alphabet.index(ch) + shift) % 26]
                break
        out.append(ch)
    return "".join(out)


def rotate(text: str, k: int) -> str:
    """Move the first k characters to the end; k wraps around the length."""
    if not text:
        return text
    k %= len(text)
    return text[k:] + text[:k]


def replace(text: str, old: str, new: str) -> str:
    """Replace every occurrence of `old` (non-empty) with `new`."""
    if not old:
        raise ValueError("old must be a non-empty string")
    return text.replace(old, new)


def take(text: str, n: int) -> str:
    """The first n characters (none for n <= 0)."""
    return text[: max(0, n)]


def drop(text: str, n: int) -> str:
    """Everything after the first n characters (all of it for n <= 0)."""
    return text[max(0, n) :]


def dedupe(text: str) -> str:
    """Keep the first occurrence of each character (case-sensitive)."""
    return "".join(dict.fromkeys(text))


OPERATIONS = {f.__name__: f for f in (reverse, swapcase, caesar, rotate, replace, take, drop, dedupe)}
OPS = tuple(OPERATIONS)
TOOL_PREFIX = "text"
