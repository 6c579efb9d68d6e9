"""dispatch as a verifiers v1 taskset: the family's own tasks, tools and checker on the
kit's shell (`trainergym_kit.taskset`).

This is what `vf-eval trainergym-dispatch` runs and what the hidden-eval scorer uses on a GPU host.
"""

from trainergym_kit.taskset import ItemTask, ItemTaskset

from trainergym_dispatch import items
from trainergym_dispatch.toolset import DispatchToolset


class DispatchTask(ItemTask):
    ITEMS = items
    TOOLSET = DispatchToolset


class DispatchTaskset(ItemTaskset):
    TASK = DispatchTask
    SYSTEM_PROMPT = (
        "You route support tickets with the dispatch tools. Look up the ticket, then its category's "
        "routing rules (the first rule that matches wins), then, when capacity matters, the team "
        "and any overflow team in turn. " + items.ANSWER_FORMAT
    )
