"""string_pipeline as a trainergym family (entry point group `trainergym.families`).

A family is a module with these names; trainergym reads them without importing verifiers.
"""

from pathlib import Path

from trainergym_kit.schema import function_tool

from trainergym_string_pipeline.items import (
    ANSWER_FORMAT, DIFFICULTY_LEVELS, SKILL_TAGS, check, distractors, generate, skills, solve,
)

ID = "string_pipeline"
TITLE = "String transformation pipelines"
HELD_OUT = False
TEACH = (
    "Teach a small model to run string transformation pipelines: start from a string of "
    "8-16 letters and digits and apply 2-6 steps (reverse, swap case, Caesar shift, rotate, "
    "replace, keep the first n, drop the first n, remove repeated characters), where each "
    "step's output feeds the next. The model must call the text tools once per step, pass "
    "each output on exactly, and report the final string character for character."
)
ANSWER = ANSWER_FORMAT
WORLD = None  # the tools need no per-task state (see trainergym.task.spec.Family.WORLD)
REFERENCE_JOB = Path(__file__).resolve().parents[1] / "reference_job"  # outside the package: agents never import it
# The files of this package a job may import (the sandbox exposes only these): the eval
# toolset and the tool semantics it shares with the checker.
PUBLIC_MODULES = ("__init__.py", "toolset.py", "text.py")
# Other packages whose own PUBLIC_MODULES job code may import: the kit, whose answer helpers
# the reference job's reward uses.
PUBLIC_DEPENDENCIES = ("trainergym_kit",)
# The form of item the family's checker (`solve`, `skills`) can read; anything else counts as unverified.
READ_FORM = (
    "The family's own wording, as in the dev examples: a line `Start with the string \"S\".` (S of ASCII letters "
    "and digits), then one line per operation, `Step 1: ...`, `Step 2: ...` numbered from 1 in order, each worded "
    "exactly as the dev examples word it (`reverse it`, `swap the case of every letter`, `Caesar-shift its letters "
    "forward by N (digits unchanged, case kept)`, `rotate it left by N (move the first character to the end, N "
    "times)`, `replace every \"A\" with \"B\"` (A, B letters and digits), `keep only the first N characters`, "
    "`drop the first N characters`, `remove repeated characters (case-sensitive), keeping the first occurrence of "
    "each`) and ending with a period; other lines are free text. Strings up to 1,000 characters at every step; "
    "no world is needed."
)


def _tool(name: str, doc: str, **params: str) -> dict:
    """A text tool: it takes the current string, `text`, then `params`."""
    return function_tool(f"text_{name}", doc, text="string", **params)


# What the trained model is given at eval time: `trainergym_string_pipeline.toolset.StringPipelineToolset`
# (tests check the two agree).
EVAL_TOOLS = [
    _tool("reverse", "Return the text reversed."),
    _tool("swapcase", "Return the text with every letter's case swapped."),
    _tool("caesar", "Shift each letter forward by `shift` places in the alphabet (wrapping, case kept); "
          "other characters stay.", shift="integer"),
    _tool("rotate", "Move the first k characters to the end (k wraps around the text's length).", k="integer"),
    _tool("replace", "Replace every occurrence of `old` with `new`.", old="string", new="string"),
    _tool("take", "Return the first n characters of the text.", n="integer"),
    _tool("drop", "Return the text without its first n characters.", n="integer"),
    _tool("dedupe", "Remove repeated characters, keeping the first occurrence of each (case-sensitive)."),
]
EVAL_TOOLSET = "trainergym_string_pipeline.toolset:StringPipelineToolset"


def dev_examples() -> list[dict]:
    """Six public examples, two per difficulty level."""
    return [generate(i, 1, namespace="dev", difficulty=d)[0] for i, d in enumerate((1, 1, 2, 2, 3, 3))]


__all__ = [
    "ID", "TITLE", "HELD_OUT", "TEACH", "ANSWER", "WORLD", "REFERENCE_JOB", "PUBLIC_MODULES",
    "PUBLIC_DEPENDENCIES", "READ_FORM",
    "EVAL_TOOLS", "EVAL_TOOLSET", "SKILL_TAGS", "DIFFICULTY_LEVELS", "generate", "check", "solve", "skills",
    "distractors", "dev_examples",
]
