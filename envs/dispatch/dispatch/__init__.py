"""dispatch: a trainergym task family and verifiers v1 taskset (see family.py).

The taskset is imported lazily so the library can use the family without importing verifiers.
"""

__all__ = ["DispatchTaskset"]


def __getattr__(name: str):
    if name == "DispatchTaskset":
        from dispatch.taskset import DispatchTaskset

        return DispatchTaskset
    raise AttributeError(name)
