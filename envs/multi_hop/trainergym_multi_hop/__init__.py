"""multi_hop: a trainergym task family and verifiers v1 taskset (see family.py).

The taskset is imported lazily so the library can use the family without importing verifiers.
"""

__all__ = ["MultiHopTaskset"]


def __getattr__(name: str):
    if name == "MultiHopTaskset":
        from trainergym_multi_hop.taskset import MultiHopTaskset

        return MultiHopTaskset
    raise AttributeError(name)
