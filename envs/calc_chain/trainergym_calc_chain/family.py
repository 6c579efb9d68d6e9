"""calc_chain as a trainergym family (entry point group `trainergym.families`).

A family is a module with these names; trainergym reads them without importing verifiers.
"""

from pathlib import Path

from trainergym_kit.schema import function_tool

from trainergym_calc_chain.items import (
    ANSWER_FORMAT, DIFFICULTY_LEVELS, SKILL_TAGS, check, distractors, generate, skills, solve,
)

ID = "calc_chain"
TITLE = "Chained arithmetic"
HELD_OUT = False
TEACH = (
    "Teach a small model to solve chained arithmetic: start from a number and apply a chain "
    "of 2-6 operations (add, subtract, multiply, floor-divide, remainder), where each step's "
    "result feeds the next. The operands are large, so the model must call the calculator "
    "tools once per step and carry each result forward exactly."
)
ANSWER = ANSWER_FORMAT
WORLD = None  # the tools need no per-task state (see trainergym.task.spec.Family.WORLD)
REFERENCE_JOB = Path(__file__).resolve().parents[1] / "reference_job"  # outside the package: agents never import it
# The files of this package a job may import (the sandbox exposes only these): the eval
# toolset and the calculator semantics it shares with the checker.
PUBLIC_MODULES = ("__init__.py", "toolset.py", "calc.py")
# Other packages whose own PUBLIC_MODULES job code may import: the kit's answer helpers, which
# the reference job's reward uses.
PUBLIC_DEPENDENCIES = ("trainergym_kit",)
# The form of item the family's checker (`solve`, `skills`) can read; anything else counts as unverified.
READ_FORM = (
    "The family's own wording, as in the dev examples: a line `Start with N.`, then one line per operation, "
    "`Step 1: ...`, `Step 2: ...` numbered from 1 in order, each worded exactly as the dev examples word it "
    "(`add X to it`, `subtract X from it`, `multiply it by X`, `integer-divide it by X (floor division)`, "
    "`take the remainder of it divided by X`, with integer X) and ending with a period; other lines are free "
    "text. Numbers up to 100 digits, no division by zero; no world is needed."
)


# What the trained model is given at eval time: `trainergym_calc_chain.toolset.CalcChainToolset`
# (tests check the two agree).
EVAL_TOOLS = [
    function_tool("calc_add", "Return a + b.", a="integer", b="integer"),
    function_tool("calc_sub", "Return a - b.", a="integer", b="integer"),
    function_tool("calc_mul", "Return a * b.", a="integer", b="integer"),
    function_tool("calc_div", "Return the floor of a / b (integer division).", a="integer", b="integer"),
    function_tool("calc_mod", "Return the remainder of a divided by b (Python's a % b).", a="integer", b="integer"),
]
EVAL_TOOLSET = "trainergym_calc_chain.toolset:CalcChainToolset"


def dev_examples() -> list[dict]:
    """Five public examples, one or two per difficulty level."""
    return [generate(i, 1, namespace="dev", difficulty=d)[0] for i, d in enumerate((1, 2, 2, 3, 3))]


__all__ = [
    "ID", "TITLE", "HELD_OUT", "TEACH", "ANSWER", "WORLD", "REFERENCE_JOB", "PUBLIC_MODULES",
    "PUBLIC_DEPENDENCIES", "READ_FORM",
    "EVAL_TOOLS", "EVAL_TOOLSET", "SKILL_TAGS", "DIFFICULTY_LEVELS", "generate", "check", "solve", "skills",
    "distractors", "dev_examples",
]
