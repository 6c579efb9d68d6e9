"""triage as a verifiers v1 taskset: the family's own tasks, tools and checker on the
kit's shell (`trainergym_kit.taskset`).

This is what `vf-eval trainergym-triage` runs and what the hidden-eval scorer uses on a GPU host.
"""

from trainergym_kit.taskset import ItemTask, ItemTaskset

from trainergym_triage import items
from trainergym_triage.toolset import TriageToolset


class TriageTask(ItemTask):
    ITEMS = items
    TOOLSET = TriageToolset


class TriageTaskset(ItemTaskset):
    TASK = TriageTask
    SYSTEM_PROMPT = (
        "You are an on-call engineer triaging incidents with the ops tools. Look facts up with the tools; "
        "never guess deploy ids, times or owners. " + items.ANSWER_FORMAT
    )
