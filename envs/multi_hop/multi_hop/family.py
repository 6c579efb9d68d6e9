"""multi_hop as a trainergym family (entry point group `trainergym.families`).

A family is a module with these names; trainergym reads them without importing verifiers.
"""

from pathlib import Path

from multi_hop.items import ANSWER_FORMAT, DIFFICULTY_LEVELS, SKILL_TAGS, check, distractors, generate, skills, solve

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
# The form of item the family's checker (`solve`, `skills`) can read; anything else counts as unverified.
READ_FORM = (
    "The family's own question, as in the dev examples, once in the prompt: `<What is|Find|Look up|Tell me|Give|"
    "Report> the <home city|employer|birth year|pet|hobby> of the <relation> of ... <Full Name>` with 1-3 relations "
    "(manager, mentor, sibling, neighbor, best friend; outermost first) and a capitalised `First [X.] Last` name; "
    "the rest of the prompt is free. The world must be a people directory in the WORLD format (every value a "
    "string) in which that person, each relation on the chain and the final attribute exist."
)


def _tool(name: str, doc: str, params: tuple[str, ...]) -> dict:
    return {
        "type": "function",
        "function": {
            "name": f"people_{name}",
            "description": doc,
            "parameters": {
                "type": "object",
                "properties": {p: {"title": p.capitalize(), "type": "string"} for p in params},
                "required": list(params),
            },
        },
    }


# What the trained model is given at eval time: `multi_hop.toolset.MultiHopToolset`
# (tests check the two agree).
EVAL_TOOLS = [
    _tool("get_relation", "Return the full name of a person's manager, mentor, sibling, neighbor or best_friend.",
          ("person", "relation")),
    _tool("get_attribute", "Return a person's city, employer, birth_year, pet or hobby.", ("person", "attribute")),
    _tool("list_relations", "Return which relations (manager, mentor, ...) a person has.", ("person",)),
]
EVAL_TOOLSET = "multi_hop.toolset:MultiHopToolset"


def dev_examples() -> list[dict]:
    """Six public examples, two per difficulty level."""
    return [generate(i, 1, namespace="dev", difficulty=d)[0] for i, d in enumerate((1, 1, 2, 2, 3, 3))]


__all__ = [
    "ID", "TITLE", "HELD_OUT", "TEACH", "ANSWER", "WORLD", "REFERENCE_JOB", "PUBLIC_MODULES", "READ_FORM",
    "EVAL_TOOLS", "EVAL_TOOLSET", "SKILL_TAGS", "DIFFICULTY_LEVELS", "generate", "check", "solve", "skills",
    "distractors", "dev_examples",
]
