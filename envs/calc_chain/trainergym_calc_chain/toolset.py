"""The calc_chain eval tool interface as a verifiers v1 `Toolset`.

The trained model sees exactly these tools at eval time (advertised as `calc_add`, ...).
A job should wire this class into its own tasks so training and eval use the same tools.
"""

import verifiers.v1 as vf

from trainergym_calc_chain.calc import apply


class CalcChainToolset(vf.Toolset[vf.ToolsetConfig]):
    TOOL_PREFIX = "calc"

    @vf.tool
    def add(self, a: int, b: int) -> str:
        """Return a + b."""
        return str(apply("add", a, b))

    @vf.tool
    def sub(self, a: int, b: int) -> str:
        """Return a - b."""
        return str(apply("sub", a, b))

    @vf.tool
    def mul(self, a: int, b: int) -> str:
        """Return a * b."""
        return str(apply("mul", a, b))

    @vf.tool
    def div(self, a: int, b: int) -> str:
        """Return the floor of a / b (integer division)."""
        return str(apply("div", a, b))

    @vf.tool
    def mod(self, a: int, b: int) -> str:
        """Return the remainder of a divided by b (Python's a % b)."""
        return str(apply("mod", a, b))


if __name__ == "__main__":
    CalcChainToolset.run()
