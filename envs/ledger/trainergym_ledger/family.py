"""ledger as a trainergym family (entry point group `trainergym.families`).

A family is a module with these names; trainergym reads them without importing verifiers.
"""

from pathlib import Path

from trainergym_kit.schema import function_tool

from trainergym_ledger.items import (
    ANSWER_FORMAT, DIFFICULTY_LEVELS, SKILL_TAGS, check, distractors, generate, skills, solve,
)

ID = "ledger"
TITLE = "Account bookkeeping"
HELD_OUT = False
TEACH = (
    "Teach a small model to keep a bank's books through tools: given a short list of operations "
    "(open an account, deposit, withdraw, transfer) to process in order, post each one with a "
    "ledger tool and report one account's final balance. Opening balances, the fee schedule and "
    "the overdraft limit exist only on the ledger, withdrawals and transfers carry fees, and an "
    "operation that would pass the overdraft limit is refused and changes nothing, so the model "
    "must post every operation in order and read the balance from the tools, never guess it."
)
ANSWER = ANSWER_FORMAT
WORLD = (
    'Each item\'s `world` is the bank\'s books: {"accounts": {name: opening balance in whole units}, '
    '"fees": {"transfer": int, "withdrawal": int}, "overdraft_limit": int} (a debit is refused when it '
    "would take the balance below minus the limit). The eval toolset copies it from the TaskData's "
    "`world` field at the start of each rollout, and the posting tools update that copy."
)
REFERENCE_JOB = Path(__file__).resolve().parents[1] / "reference_job"  # outside the package: agents never import it
# The files of this package a job may import (the sandbox exposes only these): the eval
# toolset and the tool semantics it shares with the checker.
PUBLIC_MODULES = ("__init__.py", "toolset.py", "bank.py")
# Other packages whose own PUBLIC_MODULES job code may import: the kit, which the eval
# toolset builds on (`WorldToolset`).
PUBLIC_DEPENDENCIES = ("trainergym_kit",)
# The form of item the family's checker (`solve`, `skills`) can read; anything else counts as unverified.
READ_FORM = (
    "The family's own wording, as in the dev examples: the operations one per line, numbered `1. `, `2. `, ... in "
    "order and worded exactly as the dev examples word them (`Open a new account 'NAME' with N.`, `Deposit N into "
    "NAME.`, `Withdraw N from NAME.`, `Transfer N from NAME to NAME.`; lower-case names, whole positive N), and once "
    "the question `What is the balance of NAME after all operations?`; other lines are free text. The world must be "
    "the books in the WORLD format (all three keys; lower-case account names; integers) and fit the story: every "
    "operation names an account that exists by then, none is opened twice."
)


# What the trained model is given at eval time: `trainergym_ledger.toolset.LedgerToolset`
# (tests check the two agree).
EVAL_TOOLS = [
    function_tool("ledger_balance", "Return the current balance of an account.", account="string"),
    function_tool("ledger_fees", "Return the bank's fee schedule and overdraft limit."),
    function_tool("ledger_open", "Open a new account with a starting amount.", account="string", amount="integer"),
    function_tool("ledger_deposit", "Deposit an amount into an account (deposits are free).",
                  account="string", amount="integer"),
    function_tool("ledger_withdraw", "Withdraw an amount from an account, charging the withdrawal fee; refused if it "
                  "would pass the overdraft limit.", account="string", amount="integer"),
    function_tool("ledger_transfer", "Move an amount from source to target, charging the transfer fee to source; "
                  "refused if it would pass the overdraft limit.", source="string", target="string", amount="integer"),
]
EVAL_TOOLSET = "trainergym_ledger.toolset:LedgerToolset"


def dev_examples() -> list[dict]:
    """Six public examples, two per difficulty level."""
    return [generate(i, 1, namespace="dev", difficulty=d)[0] for i, d in enumerate((1, 1, 2, 2, 3, 3))]


__all__ = [
    "ID", "TITLE", "HELD_OUT", "TEACH", "ANSWER", "WORLD", "REFERENCE_JOB", "PUBLIC_MODULES",
    "PUBLIC_DEPENDENCIES", "READ_FORM",
    "EVAL_TOOLS", "EVAL_TOOLSET", "SKILL_TAGS", "DIFFICULTY_LEVELS", "generate", "check", "solve", "skills",
    "distractors", "dev_examples",
]
