"""clock as a verifiers v1 taskset on the kit's shell (`vf-eval trainergym-clock`)."""

from trainergym_kit.taskset import ItemTask, ItemTaskset

from trainergym_clock import items
from trainergym_clock.toolset import ClockToolset


class ClockTask(ItemTask):
    ITEMS = items
    TOOLSET = ClockToolset


class ClockTaskset(ItemTaskset):
    TASK = ClockTask
    SYSTEM_PROMPT = "You do clock arithmetic with the clock tools, one call per step. " + items.ANSWER_FORMAT
