"""multi_hop as a verifiers v1 taskset: the family's own tasks, tools and checker on the
kit's shell (`trainergym_kit.taskset`).

This is what `vf-eval trainergym-multi-hop` runs and what the hidden-eval scorer uses on a GPU host.
"""

from trainergym_kit.taskset import ItemTask, ItemTaskset

from trainergym_multi_hop import items
from trainergym_multi_hop.toolset import MultiHopToolset


class MultiHopTask(ItemTask):
    ITEMS = items
    TOOLSET = MultiHopToolset


class MultiHopTaskset(ItemTaskset):
    TASK = MultiHopTask
    SYSTEM_PROMPT = (
        "You answer questions about people in a directory you can only reach through the people "
        "tools. Follow the chain of relations one tool call at a time, passing the full name each "
        "call returns to the next call, then look up the attribute. " + items.ANSWER_FORMAT
    )
