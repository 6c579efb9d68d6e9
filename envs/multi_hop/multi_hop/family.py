"""multi_hop as a trainergym family (entry point group `trainergym.families`).

A family is a module with these names; trainergym reads them without importing verifiers.
"""

from pathlib import Path

from multi_hop.items import ANSWER_FORMAT, DIFFICULTY_LEVELS, SKILL_TAGS, check, distractors, generate, solve, tag_text

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
REFERENCE_JOB = Path(__file__).parent / "reference_job"


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
    "ID", "TITLE", "HELD_OUT", "TEACH", "ANSWER", "WORLD", "REFERENCE_JOB", "EVAL_TOOLS", "EVAL_TOOLSET",
    "SKILL_TAGS", "DIFFICULTY_LEVELS", "generate", "check", "solve", "distractors", "tag_text", "dev_examples",
]
