"""calc_chain: chained arithmetic solved through calculator tools.

As a verifiers v1 taskset this package exports `CalcChainTaskset`; as a trainergym family
its entry point is `trainergym_calc_chain.family`. The taskset is imported lazily so the library can
use the family (generator, checker, solver) without importing verifiers.
"""

__all__ = ["CalcChainTaskset"]


def __getattr__(name: str):
    if name == "CalcChainTaskset":
        from trainergym_calc_chain.taskset import CalcChainTaskset

        return CalcChainTaskset
    raise AttributeError(name)
