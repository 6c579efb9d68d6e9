"""triage as a trainergym family (entry point group `trainergym.families`).

A family is a module with these names; trainergym reads them without importing verifiers.
Held out: never trained on, it measures whether a job's training generalises.
"""

from pathlib import Path

from trainergym_kit.schema import function_tool

from trainergym_triage.items import (
    ANSWER_FORMAT, DIFFICULTY_LEVELS, SKILL_TAGS, check, distractors, generate, skills, solve,
)

ID = "triage"
TITLE = "On-call incident triage"
HELD_OUT = True
TEACH = (
    "Teach a small model to triage on-call incidents: given an incident id, use the ops tools to find "
    "the incident's service and start time, search the deploy logs of that service, then of its "
    "dependencies, then of theirs, and name the culprit deploy (the most recent deploy in the 2 hours "
    "before the incident started, at the nearest dependency level) and the owner of the service it went "
    "to. Decoys punish shortcuts: releases just after the start, older releases, releases on services "
    "that call the incident's service, and the deploy author in place of the owner."
)
ANSWER = ANSWER_FORMAT
WORLD = (
    "Each task's `world` is {\"services\": {name: {\"owner\", \"depends_on\": [names]}}, \"incidents\": "
    "{\"INC-1234\": {\"service\", \"started_at\": \"HH:MM\", \"symptom\"}}, \"deploys\": [{\"id\": \"D-1234\", "
    "\"service\", \"at\": \"HH:MM\", \"author\"}]}; the eval toolset (TriageToolset) reads it from the "
    "TaskData's `world` field and answers every ops_* call from it."
)
REFERENCE_JOB = Path(__file__).resolve().parents[1] / "reference_job"  # outside the package: agents never import it
# The files of this package a job may import (the sandbox exposes only these): the eval
# toolset and the tool semantics it shares with the checker.
PUBLIC_MODULES = ("__init__.py", "toolset.py", "ops.py")
# Other packages whose own PUBLIC_MODULES job code may import: the kit, which the eval
# toolset builds on (`WorldToolset`).
PUBLIC_DEPENDENCIES = ("trainergym_kit",)
# The form of item the family's checker (`solve`, `skills`) can read; anything else counts as unverified.
READ_FORM = (
    "Any prompt that names one incident id, `INC-<digits>` (as the dev examples do), with a world in the WORLD format "
    "that holds that incident (a service of the world, `started_at` HH:MM), services whose `depends_on` name services "
    "of the world, and deploys with distinct `D-<digits>` ids on services of the world at HH:MM times, in which the "
    "runbook finds a single most recent deploy in the 2 hours before the start within two dependency levels of the "
    "incident's service. The skill tags are read off the world, not the prompt's hints."
)


# What the trained model is given at eval time: `trainergym_triage.toolset.TriageToolset` (tests check
# the two agree).
EVAL_TOOLS = [
    function_tool("ops_get_incident", "Look up an incident (e.g. INC-1234): its service, start time (HH:MM) and "
                  "symptom.", incident_id="string"),
    function_tool("ops_get_service", "Look up a service: its owner, the services it depends on and the services that "
                  "call it.", service="string"),
    function_tool("ops_list_deploys", "List a service's deploys, oldest first, with their ids, times (HH:MM) and "
                  "authors.", service="string"),
]
EVAL_TOOLSET = "trainergym_triage.toolset:TriageToolset"


def dev_examples() -> list[dict]:
    """Six public examples, two per difficulty level."""
    return [generate(i, 1, namespace="dev", difficulty=d)[0] for i, d in enumerate((1, 1, 2, 2, 3, 3))]


__all__ = [
    "ID", "TITLE", "HELD_OUT", "TEACH", "ANSWER", "WORLD", "REFERENCE_JOB", "PUBLIC_MODULES",
    "PUBLIC_DEPENDENCIES", "READ_FORM",
    "EVAL_TOOLS", "EVAL_TOOLSET", "SKILL_TAGS", "DIFFICULTY_LEVELS", "generate", "check", "solve", "skills",
    "distractors", "dev_examples",
]
