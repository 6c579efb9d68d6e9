"""calc_chain as a trainergym family (entry point group `trainergym.families`).

A family is a module with these names; trainergym reads them without importing verifiers.
"""

from pathlib import Path

from calc_chain.items import ANSWER_FORMAT, DIFFICULTY_LEVELS, SKILL_TAGS, check, distractors, generate, solve, tag_text

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
WORLD = None  # the tools need no per-task state (see trainergym.tasks.Family.WORLD)
REFERENCE_JOB = Path(__file__).parent / "reference_job"


def _binary(name: str, doc: str) -> dict:
    return {
        "type": "function",
        "function": {
            "name": f"calc_{name}",
            "description": doc,
            "parameters": {
                "type": "object",
                "properties": {"a": {"title": "A", "type": "integer"}, "b": {"title": "B", "type": "integer"}},
                "required": ["a", "b"],
            },
        },
    }


# What the trained model is given at eval time: `calc_chain.toolset.CalcChainToolset`
# (tests check the two agree).
EVAL_TOOLS = [
    _binary("add", "Return a + b."),
    _binary("sub", "Return a - b."),
    _binary("mul", "Return a * b."),
    _binary("div", "Return the floor of a / b (integer division)."),
    _binary("mod", "Return the remainder of a divided by b (Python's a % b)."),
]
EVAL_TOOLSET = "calc_chain.toolset:CalcChainToolset"


def dev_examples() -> list[dict]:
    """Five public examples, one or two per difficulty level."""
    return [generate(i, 1, namespace="dev", difficulty=d)[0] for i, d in enumerate((1, 2, 2, 3, 3))]


__all__ = [
    "ID", "TITLE", "HELD_OUT", "TEACH", "ANSWER", "WORLD", "REFERENCE_JOB", "EVAL_TOOLS", "EVAL_TOOLSET",
    "SKILL_TAGS", "DIFFICULTY_LEVELS", "generate", "check", "solve", "distractors", "tag_text", "dev_examples",
]
