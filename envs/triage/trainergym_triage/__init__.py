"""triage: a trainergym task family and verifiers v1 taskset (see family.py).

The taskset is imported lazily so the library can use the family without importing verifiers.
"""

__all__ = ["TriageTaskset"]


def __getattr__(name: str):
    if name == "TriageTaskset":
        from trainergym_triage.taskset import TriageTaskset

        return TriageTaskset
    raise AttributeError(name)
