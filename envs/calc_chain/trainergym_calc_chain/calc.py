"""The calculator's semantics, shared by the eval tools (`trainergym_calc_chain.toolset`), the solver and
the checker (`trainergym_calc_chain.items`).

A public module of the family: job code may import it (see `PUBLIC_MODULES` in family.py), so
it is pure Python and imports nothing else from the package.
"""


def apply(op: str, a: int, b: int) -> int:
    """The calculator semantics shared by the tools, the solver and the checker."""
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    if op in ("div", "mod") and b == 0:
        raise ZeroDivisionError("division by zero")
    if op == "div":
        return a // b
    if op == "mod":
        return a % b
    raise ValueError(f"unknown operation {op!r}")
