"""ledger as a verifiers v1 taskset: the family's own tasks, tools and checker on the
kit's shell (`trainergym_kit.taskset`).

This is what `vf-eval trainergym-ledger` runs and what the hidden-eval scorer uses on a GPU host.
"""

from trainergym_kit.taskset import ItemTask, ItemTaskset

from trainergym_ledger import items
from trainergym_ledger.toolset import LedgerToolset


class LedgerTask(ItemTask):
    ITEMS = items
    TOOLSET = LedgerToolset


class LedgerTaskset(ItemTaskset):
    TASK = LedgerTask
    SYSTEM_PROMPT = (
        "You keep a bank's books with the ledger tools. The balances, fees and overdraft limit are "
        "only on the ledger: post every operation with a tool call, in order, then read the balance "
        "you are asked for. " + items.ANSWER_FORMAT
    )
