"""multi_hop as a trainergym family (entry point group `trainergym.families`).

A family is a module with these names; trainergym reads them without importing verifiers.
"""

from pathlib import Path

from trainergym_kit.schema import function_tool

from trainergym_multi_hop.items import (
    ANSWER_FORMAT, DIFFICULTY_LEVELS, SKILL_TAGS, check, distractors, generate, skills, solve,
)

ID = "multi_hop"
TITLE = "Multi-hop look-ups in a people directory"
HELD_OUT = False
TEACH = (
    "Teach a small model to answer multi-hop questions about a directory of invented people, "
    "such as \"What is the home city of the mentor of the manager of Ada K. Novak?\". Each person "
    "has attributes (city, employer, birth year, pet, hobby) and relations to others (manager, "
    "mentor, sibling, neighbor, best friend). The facts exist only behind the people tools, so "
    "the model must follow the chain one look-up at a time (1-3 relations, then the attribute), "
    "passing the full name each call returns into the next call."
)
ANSWER = ANSWER_FORMAT
WORLD = (
    "Each task's `world` is its own directory of 8-14 people: "
    "`{\"people\": {\"<Full Name>\": {\"attributes\": {\"city\": ..., \"employer\": ..., \"birth_year\": ..., "
    "\"pet\": ..., \"hobby\": ...}, \"relations\": {\"manager\": \"<Full Name>\", ...}}}}` (all values strings; "
    "relations among manager, mentor, sibling, neighbor, best_friend, not every person has each). The eval "
    "toolset answers only from the TaskData's `world` field."
)
REFERENCE_JOB = Path(__file__).resolve().parents[1] / "reference_job"  # outside the package: agents never import it
# The files of this package a job may import (the sandbox exposes only these): the eval
# toolset and the tool semantics it shares with the checker.
PUBLIC_MODULES = ("__init__.py", "toolset.py", "people.py")
# Other packages whose own PUBLIC_MODULES job code may import: the kit, which the eval
# toolset builds on (`WorldToolset`).
PUBLIC_DEPENDENCIES = ("trainergym_kit",)
# The form of item the family's checker (`solve`, `skills`) can read; anything else counts as unverified.
READ_FORM = (
    "The family's own question, as in the dev examples, once in the prompt: `<What is|Find|Look up|Tell me|Give|"
    "Report> the <home city|employer|birth year|pet|hobby> of the <relation> of ... <Full Name>` with 1-3 relations "
    "(manager, mentor, sibling, neighbor, best friend; outermost first) and a capitalised `First [X.] Last` name; "
    "the rest of the prompt is free. The world must be a people directory in the WORLD format (every value a "
    "string) in which that person, each relation on the chain and the final attribute exist."
)


# What the trained model is given at eval time: `trainergym_multi_hop.toolset.MultiHopToolset`
# (tests check the two agree).
EVAL_TOOLS = [
    function_tool("people_get_relation",
                  "Return the full name of a person's manager, mentor, sibling, neighbor or best_friend.",
                  person="string", relation="string"),
    function_tool("people_get_attribute", "Return a person's city, employer, birth_year, pet or hobby.",
                  person="string", attribute="string"),
    function_tool("people_list_relations", "Return which relations (manager, mentor, ...) a person has.",
                  person="string"),
]
EVAL_TOOLSET = "trainergym_multi_hop.toolset:MultiHopToolset"


def dev_examples() -> list[dict]:
    """Six public examples, two per difficulty level."""
    return [generate(i, 1, namespace="dev", difficulty=d)[0] for i, d in enumerate((1, 1, 2, 2, 3, 3))]


__all__ = [
    "ID", "TITLE", "HELD_OUT", "TEACH", "ANSWER", "WORLD", "REFERENCE_JOB", "PUBLIC_MODULES",
    "PUBLIC_DEPENDENCIES", "READ_FORM",
    "EVAL_TOOLS", "EVAL_TOOLSET", "SKILL_TAGS", "DIFFICULTY_LEVELS", "generate", "check", "solve", "skills",
    "distractors", "dev_examples",
]
