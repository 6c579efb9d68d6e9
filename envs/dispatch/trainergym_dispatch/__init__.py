"""dispatch: route a support ticket under ordered routing rules, team capacity and overflow,
every fact looked up through the dispatch tools.

As a verifiers v1 taskset this package exports `DispatchTaskset`; as a trainergym family its
entry point is `trainergym_dispatch.family`. The taskset is imported lazily so the library can use the
family (generator, checker, solver) without importing verifiers.
"""

__all__ = ["DispatchTaskset"]


def __getattr__(name: str):
    if name == "DispatchTaskset":
        from trainergym_dispatch.taskset import DispatchTaskset

        return DispatchTaskset
    raise AttributeError(name)
