"""Training data and reward for ledger.

The generator is written here rather than taken from the family so the job controls its
own mix: more long histories than the eval has (they carry most of the errors), every
operation represented, fees charged from level 2, and at level 3 an account opening plus
one debit the bank refuses. Each task carries its bank in `world`, in the eval toolset's
format, so the model trains on the same tools and the same hidden balances it meets at eval.
"""

import random
import re

import verifiers.v1 as vf
from trainergym_kit.answers import last_match
from trainergym_ledger.toolset import LedgerToolset

SYSTEM = (
    "You keep a bank's books with the ledger tools. Balances, fees and the overdraft limit are "
    "only on the ledger. Post every operation with one tool call, in the order given, then call "
    "ledger_balance for the account asked about. Never compute balances in your head. Finish with "
    "a line `Answer: <integer>`."
)
WORDING = {
    "open": "Open a new account '{account}' with {amount}.",
    "deposit": "Deposit {amount} into {account}.",
    "withdraw": "Withdraw {amount} from {account}.",
    "transfer": "Transfer {amount} from {source} to {target}.",
}
FEES = "The bank charges its usual fees on withdrawals and transfers (the fee schedule is on the ledger)."
REFUSALS = ("The bank refuses any withdrawal or transfer that would take an account past its overdraft "
            "limit; a refused operation changes nothing, so carry on with the rest.")
NAMES = ("checking", "savings", "travel", "rent", "payroll", "groceries", "tuition", "emergency", "holiday",
         "household", "pension", "repairs", "garden", "charity", "supplies", "taxes", "wages", "stock")
OWNERS = ("a bakery", "a bike shop", "a cafe", "a clinic", "a florist", "a garage", "a tea room", "a workshop",
          "Ana", "Bilal", "Carmen", "Dmitri", "Eun", "Femi", "Greta", "Hugo", "Isla", "Joao", "Kofi", "Lena")
LEVELS = {1: (1, 2, 2), 2: (3, 4, 3), 3: (5, 6, 3)}  # operations lo, hi, accounts on the ledger


class Bank:
    """The bank's rules, as the task describes them: fees on debits, refusal past the limit."""

    def __init__(self, world: dict):
        self.accounts = dict(world["accounts"])
        self.fees, self.limit = world["fees"], world["overdraft_limit"]

    def room(self, account: str, fee: str) -> int:
        return self.accounts[account] + self.limit - self.fees[fee]

    def post(self, kind: str, args: dict) -> bool:
        """Apply one operation; False when the bank refuses it."""
        if kind == "open":
            self.accounts[args["account"]] = args["amount"]
        elif kind == "deposit":
            self.accounts[args["account"]] += args["amount"]
        else:
            debit = args.get("source") or args["account"]
            fee = "transfer" if kind == "transfer" else "withdrawal"
            if args["amount"] > self.room(debit, fee):
                return False
            self.accounts[debit] -= args["amount"] + self.fees[fee]
            if kind == "transfer":
                self.accounts[args["target"]] += args["amount"]
        return True


def make_story(rng: random.Random, level: int) -> tuple[str, dict, int]:
    lo, hi, n_accounts = LEVELS[level]
    names = rng.sample(NAMES, n_accounts + 1)
    world = {
        "accounts": {name: rng.randint(100, 2000) for name in names[:-1]},
        "fees": {"transfer": rng.randint(1, 6) if level > 1 else 0, "withdrawal": rng.randint(1, 4) if level > 1 else 0},
        "overdraft_limit": rng.choice((0, 0, 50, 100)) if level == 3 else 0,
    }
    n = rng.randint(lo, hi)
    plan = [rng.choice(("deposit", "withdraw", "transfer", "transfer")) for _ in range(n)]
    if level == 3:  # an opening early on and one refused debit (never the last operation)
        spots = rng.sample(range(n - 1), 2)
        plan[min(spots)], plan[max(spots)] = "open", "refuse"
    bank, ops = Bank(world), []
    for kind in plan:
        live = list(bank.accounts)
        account = rng.choice(live)
        other = rng.choice([a for a in live if a != account])
        if kind == "open":
            op = ("open", {"account": names[-1], "amount": rng.randint(40, 700)})
        elif kind == "refuse":
            amount = max(bank.room(account, "transfer"), 0) + rng.randint(1, 300)
            op = ("transfer", {"amount": amount, "source": account, "target": other})
        else:
            fee = "withdrawal" if kind == "withdraw" else "transfer"
            top = min(500, bank.room(account, fee))
            if kind == "deposit" or top < 10:
                op = ("deposit", {"amount": rng.randint(10, 500), "account": account})
            elif kind == "withdraw":
                op = ("withdraw", {"amount": rng.randint(10, top), "account": account})
            else:
                op = ("transfer", {"amount": rng.randint(10, top), "source": account, "target": other})
        bank.post(*op)
        ops.append(op)
    last = ops[-1][1]
    query = rng.choice([a for a in (last.get("account"), last.get("source"), last.get("target")) if a])
    lines = [f"You keep the books for {rng.choice(OWNERS)}. Opening balances are on the ledger, not in this "
             "note. Process these operations in order with the ledger tools:"]
    lines += [f"{i}. {WORDING[kind].format(**args)}" for i, (kind, args) in enumerate(ops, 1)]
    lines += [FEES] * (level > 1) + [REFUSALS] * (level == 3)
    lines.append(f"What is the balance of {query} after all operations? Finish with a line `Answer: <integer>`.")
    return "\n".join(lines), world, bank.accounts[query]


def read_story(prompt: str) -> tuple[list[tuple[str, dict]], str]:
    """The operations and the queried account, read back from a prompt's wording."""
    ops = []
    for line in re.findall(r"^\d+\. (.*)$", prompt, re.MULTILINE):
        for kind, words in WORDING.items():
            pattern = re.escape(words).replace(re.escape("{amount}"), r"(?P<amount>\d+)")
            for key in ("account", "source", "target"):
                pattern = pattern.replace(re.escape("{" + key + "}"), rf"(?P<{key}>\w+)")
            if m := re.fullmatch(pattern, line):
                ops.append((kind, {k: int(v) if k == "amount" else v for k, v in m.groupdict().items()}))
                break
    return ops, re.search(r"What is the balance of (\w+)", prompt).group(1)


ANSWER = re.compile(r"answer\s*:\s*\**\s*([+-]?\d[\d,]*)", re.IGNORECASE)


def final_integer(reply: str) -> int | None:
    """The balance on the last `Answer:` line after any thinking; None if absent."""
    found = last_match(ANSWER, reply)
    return int(found.replace(",", "")) if found is not None else None


class BooksData(vf.TaskData):
    answer: str
    world: dict = {}
    level: int = 1


class BooksTaskConfig(vf.TaskConfig):
    tools: vf.ToolsetConfig = vf.ToolsetConfig()


class BooksTask(vf.Task[BooksData, vf.State, BooksTaskConfig]):
    @classmethod
    def toolsets(cls, config: BooksTaskConfig) -> list[vf.Toolset]:
        return [LedgerToolset(config.tools)]

    @vf.reward(weight=1.0)
    async def exact_answer(self, trace: vf.Trace) -> float:
        return float(final_integer(trace.last_reply) == int(self.data.answer))

    @vf.metric
    async def tool_calls(self, trace: vf.Trace) -> float:
        return float(len(trace.tool_messages))

    async def validate(self, runtime) -> bool:
        """Gold check through the eval tools themselves: post the prompt's operations to the
        task's world and compare the balance the ledger reports with the stored answer."""
        tools = LedgerToolset(self.config.tools)
        await tools.setup_task(self.data)
        ops, query = read_story(self.data.prompt_text)
        for kind, args in ops:
            getattr(tools, kind)(**args)
        return tools.balance(query) == f"{query} {self.data.answer}"


class BooksConfig(vf.TasksetConfig):
    seed: int = 11
    num_tasks: int = 2000
    task: BooksTaskConfig = BooksTaskConfig()


class BooksTaskset(vf.Taskset[BooksTask, BooksConfig]):
    def load(self) -> list[BooksTask]:
        rng = random.Random(self.config.seed)
        tasks = []
        for _ in range(self.config.num_tasks):
            level = rng.choices((1, 2, 3), weights=(2, 4, 4))[0]
            prompt, world, answer = make_story(rng, level)
            data = BooksData(prompt=prompt, system_prompt=SYSTEM, answer=str(answer), world=world, level=level)
            tasks.append(BooksTask(data, self.config.task))
        return tasks
