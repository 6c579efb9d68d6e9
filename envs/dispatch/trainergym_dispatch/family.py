"""dispatch as a trainergym family (entry point group `trainergym.families`).

A family is a module with these names; trainergym reads them without importing verifiers.
"""

from pathlib import Path

from trainergym_kit.schema import function_tool

from trainergym_dispatch.items import (
    ANSWER_FORMAT, DIFFICULTY_LEVELS, SKILL_TAGS, check, distractors, generate, skills, solve,
)

ID = "dispatch"
TITLE = "Rule-based ticket routing"
HELD_OUT = False
TEACH = (
    "Teach a small model to route support tickets: given only a ticket id, look up the ticket, "
    "then the ordered routing rules of its category (conditions on priority, region and customer "
    "tier; the first rule that matches wins, else the default), then, when teams may be at "
    "capacity, the chosen team's status, following its overflow team (possibly more than once) "
    "until an available team takes the ticket. Every fact lives behind the dispatch tools."
)
ANSWER = ANSWER_FORMAT
WORLD = (
    'Each task\'s world is {"tickets": {id: {category, priority (1-5), region, customer_tier, channel}}, '
    '"rules": {category: [{"if": [[field, op, value], ...], "team": name}, ...]} (ordered, op one of '
    '>=, <=, ==, !=, in; the last rule has an empty "if"), "teams": {name: {"status": "available" | '
    '"at capacity", "overflow": team}}}; the eval toolset reads it from the TaskData\'s `world` field.'
)
REFERENCE_JOB = Path(__file__).resolve().parents[1] / "reference_job"  # outside the package: agents never import it
# The files of this package a job may import (the sandbox exposes only these): the eval
# toolset and the tool semantics it shares with the checker.
PUBLIC_MODULES = ("__init__.py", "toolset.py", "desk.py")
# Other packages whose own PUBLIC_MODULES job code may import: the kit, which the eval
# toolset builds on (`WorldToolset`).
PUBLIC_DEPENDENCIES = ("trainergym_kit",)
# The form of item the family's checker (`solve`, `skills`) can read; anything else counts as unverified.
READ_FORM = (
    "Any prompt that names the ticket once as `Route ticket <id>:` (as the dev examples do; `T-1234`), with a "
    "world in the WORLD format that holds that ticket (category, priority 1-5, region, customer_tier), its "
    "category's ordered rules (keyed by the lower-case category; conditions only on priority, region, "
    "customer_tier; some rule must match, usually a last one with an empty \"if\") and every team on its route, "
    "where following overflow from the matched team reaches an available team within 7 steps without looping. "
    "The dev examples' sentence `Every team has capacity today, ...` tells the solver to skip the team checks, "
    "so the matched team must then be available."
)


# What the trained model is given at eval time: `trainergym_dispatch.toolset.DispatchToolset`
# (tests check the two agree).
EVAL_TOOLS = [
    function_tool("dispatch_get_ticket", "Return a ticket's fields: category, priority (1-5), region, customer_tier, "
                  "channel.", ticket_id="string"),
    function_tool("dispatch_get_rules", "Return a ticket category's ordered routing rules (the first rule that matches "
                  "wins).", category="string"),
    function_tool("dispatch_get_team", "Return a team's status (available or at capacity) and its overflow team.",
                  team="string"),
]
EVAL_TOOLSET = "trainergym_dispatch.toolset:DispatchToolset"


def dev_examples() -> list[dict]:
    """Six public examples, two per difficulty level."""
    return [generate(i, 1, namespace="dev", difficulty=d)[0] for i, d in enumerate((1, 1, 2, 2, 3, 3))]


__all__ = [
    "ID", "TITLE", "HELD_OUT", "TEACH", "ANSWER", "WORLD", "REFERENCE_JOB", "PUBLIC_MODULES",
    "PUBLIC_DEPENDENCIES", "READ_FORM",
    "EVAL_TOOLS", "EVAL_TOOLSET", "SKILL_TAGS", "DIFFICULTY_LEVELS", "generate", "check", "solve", "skills",
    "distractors", "dev_examples",
]
