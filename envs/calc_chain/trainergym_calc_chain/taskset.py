"""calc_chain as a verifiers v1 taskset: the family's own tasks, tools and checker on the
kit's shell (`trainergym_kit.taskset`).

This is what `vf-eval trainergym-calc-chain` runs and what the hidden-eval scorer uses on a GPU host.
"""

from trainergym_kit.taskset import ItemTask, ItemTaskset

from trainergym_calc_chain import items
from trainergym_calc_chain.toolset import CalcChainToolset


class CalcChainTask(ItemTask):
    ITEMS = items
    TOOLSET = CalcChainToolset


class CalcChainTaskset(ItemTaskset):
    TASK = CalcChainTask
    SYSTEM_PROMPT = (
        "You solve chained arithmetic with calculator tools. Call one tool per step, feeding "
        "each result into the next step. " + items.ANSWER_FORMAT
    )
