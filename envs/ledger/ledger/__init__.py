"""ledger: a trainergym task family and verifiers v1 taskset (see family.py).

The taskset is imported lazily so the library can use the family without importing verifiers.
"""

__all__ = ["LedgerTaskset"]


def __getattr__(name: str):
    if name == "LedgerTaskset":
        from ledger.taskset import LedgerTaskset

        return LedgerTaskset
    raise AttributeError(name)
