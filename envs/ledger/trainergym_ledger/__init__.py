"""ledger: bookkeeping through tools (open, deposit, withdraw, transfer, balances).

As a verifiers v1 taskset this package exports `LedgerTaskset`; as a trainergym family its
entry point is `trainergym_ledger.family`. The taskset is imported lazily so the library can use the
family (generator, checker, solver) without importing verifiers.
"""

__all__ = ["LedgerTaskset"]


def __getattr__(name: str):
    if name == "LedgerTaskset":
        from trainergym_ledger.taskset import LedgerTaskset

        return LedgerTaskset
    raise AttributeError(name)
