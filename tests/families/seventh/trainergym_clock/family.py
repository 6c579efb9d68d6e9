"""clock as a trainergym family (entry point group `trainergym.families`): the names
trainergym reads, without importing verifiers."""

from pathlib import Path

from trainergym_kit.schema import function_tool

from trainergym_clock.items import (
    ANSWER_FORMAT, DIFFICULTY_LEVELS, SKILL_TAGS, check, distractors, generate, skills, solve,
)

ID = "clock"
TITLE = "24-hour clock arithmetic"
HELD_OUT = False
TEACH = (
    "Teach a small model to run a chain of 2-5 minute shifts on a 24-hour clock (add or subtract N "
    "minutes, wrapping past midnight), calling the clock tools once per step and carrying each time forward."
)
ANSWER = ANSWER_FORMAT
WORLD = None  # stateless tools
REFERENCE_JOB = Path(__file__).resolve().parents[1] / "reference_job"  # outside the package: jobs never import it
PUBLIC_MODULES = ("__init__.py", "toolset.py", "dial.py")  # what job code may import of this package
PUBLIC_DEPENDENCIES = ("trainergym_kit",)  # the reference job's reward uses trainergym_kit.answers
READ_FORM = (
    "A line `The clock shows HH:MM.` (24-hour), then one line per shift, `Step 1: add N minutes.` or `Step 1: "
    "subtract N minutes.`, numbered from 1 in order (N up to 4 digits, at most 50 steps); other lines are free text."
)
EVAL_TOOLS = [
    function_tool("clock_add", "Return the time (HH:MM, 24-hour) `minutes` after `time`.",
                  time="string", minutes="integer"),
    function_tool("clock_sub", "Return the time (HH:MM, 24-hour) `minutes` before `time`.",
                  time="string", minutes="integer"),
]
EVAL_TOOLSET = "trainergym_clock.toolset:ClockToolset"


def dev_examples() -> list[dict]:
    """Six public examples, two per difficulty level."""
    return [generate(i, 1, namespace="dev", difficulty=d)[0] for i, d in enumerate((1, 1, 2, 2, 3, 3))]


__all__ = [
    "ID", "TITLE", "HELD_OUT", "TEACH", "ANSWER", "WORLD", "REFERENCE_JOB", "PUBLIC_MODULES", "PUBLIC_DEPENDENCIES",
    "READ_FORM", "EVAL_TOOLS", "EVAL_TOOLSET", "SKILL_TAGS", "DIFFICULTY_LEVELS", "generate", "check", "solve",
    "skills", "distractors", "dev_examples",
]
