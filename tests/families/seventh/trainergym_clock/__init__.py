"""clock: 24-hour clock arithmetic through clock tools (a trainergym family, see family.py).

The taskset is imported lazily so the library can use the family without importing verifiers.
"""

__all__ = ["ClockTaskset"]


def __getattr__(name: str):
    if name == "ClockTaskset":
        from trainergym_clock.taskset import ClockTaskset

        return ClockTaskset
    raise AttributeError(name)
