"""ledger items: a bookkeeping story whose operations must be posted, in order, to a bank
whose balances and fee schedule only the tools know.

Pure Python (no verifiers import) so the trainergym library can generate, check and
solve items in its own process without paying the verifiers import.

An item's prompt lists operations (open, deposit, withdraw, transfer) and asks for one
account's final balance. The opening balances, the fees and the overdraft limit live only
in the item's `world`, so the answer cannot be worked out from the prompt: each operation
changes the state the next one sees, and the final balance depends on all of them.
"""

from __future__ import annotations

import copy
import random
import re
from dataclasses import dataclass

from trainergym_kit.answers import last_match
from trainergym_kit.items import seeded_items, strict

from trainergym_ledger.bank import (  # noqa: F401  (the tools' semantics; re-exported for the library and tests)
    TOOLS, _bad_amount, _fee, _missing, _name, _refusal, balance, deposit, fees, open_account, transfer, withdraw,
)

# --- Items

SKILL_TAGS = ("deposit", "withdraw", "transfer", "open_account", "fee", "overdraft_refused", "long_history")
# Difficulty knobs: (min ops, max ops, accounts on the ledger, charges fees, opens an account
# and has one refused transfer). Level 3 always has 5-6 operations plus the balance query.
DIFFICULTY = {1: (1, 2, 2, False, False), 2: (3, 4, 3, True, False), 3: (5, 6, 3, True, True)}
DIFFICULTY_LEVELS = tuple(DIFFICULTY)

ANSWER_FORMAT = "Finish with a line `Answer: <integer>` (the balance in whole units; a minus sign if negative)."

ACCOUNTS = ("checking", "savings", "travel", "rent", "payroll", "groceries", "tuition", "emergency",
            "holiday", "household", "pension", "repairs", "garden", "charity", "supplies", "taxes")
OWNERS = ("Ada", "Bruno", "Chen", "Dalia", "Emeka", "Farah", "Goran", "Hana", "Ines", "Jonas", "Keiko",
          "Luca", "Mira", "Nadia", "Omar", "Priya", "Rosa", "Sven", "Tariq", "Uma", "Vera", "Wen")
BUSINESSES = ("bakery", "bike shop", "bookshop", "cafe", "clinic", "dance studio", "farm stall", "garage",
              "household", "print shop", "tailor shop", "tea room", "toy shop", "workshop")

_PHRASES = {
    "open": "Open a new account '{account}' with {amount}.",
    "deposit": "Deposit {amount} into {account}.",
    "withdraw": "Withdraw {amount} from {account}.",
    "transfer": "Transfer {amount} from {source} to {target}.",
}
_FEE_LINE = "The bank charges its usual fees on withdrawals and transfers (the fee schedule is on the ledger)."
_REFUSAL_LINE = ("The bank refuses any withdrawal or transfer that would take an account past its overdraft "
                 "limit; a refused operation changes nothing, so carry on with the rest.")
_QUESTION = "What is the balance of {account} after all operations?"


@dataclass(frozen=True)
class Story:
    """What a prompt asks: operations (tool name, tool arguments) in order, then one balance."""

    ops: tuple[tuple[str, dict], ...]
    query: str
    mentions_fees: bool = False
    mentions_refusals: bool = False


def render(owner: str, story: Story) -> str:
    lines = [f"You keep the books for {owner}. Opening balances are on the ledger, not in this note. "
             "Process these operations in order with the ledger tools:"]
    lines += [f"{i}. {_PHRASES[kind].format(**args)}" for i, (kind, args) in enumerate(story.ops, 1)]
    lines += [_FEE_LINE] * story.mentions_fees + [_REFUSAL_LINE] * story.mentions_refusals
    lines.append(f"{_QUESTION.format(account=story.query)} {ANSWER_FORMAT}")
    return "\n".join(lines)


def _phrase_pattern(phrase: str) -> re.Pattern:
    pattern = re.escape(phrase).replace(re.escape("{amount}"), r"(?P<amount>\d+)")
    for key in ("account", "source", "target"):
        pattern = pattern.replace(re.escape("{" + key + "}"), rf"(?P<{key}>[a-z][a-z0-9_]*)")
    return re.compile(pattern)


_PATTERNS = {kind: _phrase_pattern(phrase) for kind, phrase in _PHRASES.items()}


# What the checker reads (see READ_FORM in family.py): one line per operation, `1. ...`,
# `2. ...` in order, worded exactly as `_PHRASES`, and the question `_QUESTION`; other lines are
# free text. Numbers (amounts, balances, fees, the limit) have at most MAX_DIGITS digits.
MAX_DIGITS = 100
_OP_LINE = re.compile(r"(\d+)\. (.*)")
_QUERY = re.compile(_QUESTION.replace("{account}", r"([a-z][a-z0-9_]*)").replace("?", r"\?"))


def _small(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value.bit_length() <= MAX_DIGITS * 10 // 3


def parse(prompt: str) -> Story:
    """Recover the story from a prompt in the family's own wording (ValueError otherwise)."""
    if not isinstance(prompt, str):
        raise ValueError("the prompt is not a string")
    ops = []
    for line in prompt.splitlines():
        if not (numbered := _OP_LINE.fullmatch(line)):
            continue
        if int(numbered.group(1)) != len(ops) + 1:
            raise ValueError(f"operation misnumbered: {line[:200]!r}")
        for kind, pattern in _PATTERNS.items():
            if m := pattern.fullmatch(numbered.group(2)):
                args = m.groupdict()
                if len(args["amount"]) > MAX_DIGITS:
                    raise ValueError(f"an amount longer than {MAX_DIGITS} digits")
                ops.append((kind, {**args, "amount": int(args["amount"])}))
                break
        else:
            raise ValueError(f"unrecognised operation: {line[:200]!r}")
    queries = [m for _, m in zip(range(2), _QUERY.finditer(prompt))]
    if not ops or len(queries) != 1:
        raise ValueError("not a ledger story in the family's wording")
    return Story(tuple(ops), queries[0].group(1), _FEE_LINE in prompt, _REFUSAL_LINE in prompt)


def check_world(world) -> dict:
    """The books of a world in the family's format (see WORLD), as a fresh copy; ValueError if
    the world is missing or malformed."""
    if not isinstance(world, dict):
        raise ValueError("the world must be the bank's books (a JSON object)")
    accounts, fee_table, limit = world.get("accounts"), world.get("fees"), world.get("overdraft_limit")
    if not isinstance(accounts, dict) or not all(isinstance(k, str) and k == _name(k) and k and _small(v)
                                                 for k, v in accounts.items()):
        raise ValueError('the world needs "accounts": {lower-case name: whole-unit balance}')
    if not isinstance(fee_table, dict) or not all(_small(fee_table.get(k)) and fee_table[k] >= 0
                                                  for k in ("transfer", "withdrawal")):
        raise ValueError('the world needs "fees": {"transfer": int >= 0, "withdrawal": int >= 0}')
    if not _small(limit) or limit < 0:
        raise ValueError('the world needs "overdraft_limit": int >= 0')
    return {"accounts": dict(accounts), "fees": {k: fee_table[k] for k in ("transfer", "withdrawal")},
            "overdraft_limit": limit}


def _read(row: dict) -> tuple[Story, dict, list[dict]]:
    """(story, the books, the reference tool calls) of a row; ValueError when the family cannot
    read it: the prompt is not its story, or the world is missing, malformed or inconsistent with
    the story (an operation on an unknown account, an account opened twice, ...)."""
    if not isinstance(row, dict):
        raise ValueError("an item is a dict")
    story = parse(row["prompt"])
    world = check_world(row.get("world"))
    books, calls = copy.deepcopy(world), []
    for kind, args in (*story.ops, ("balance", {"account": story.query})):
        result = TOOLS[kind](books, **args)
        calls.append({"tool": f"ledger_{kind}", "arguments": dict(args), "result": result})
        if result.startswith("error:"):
            raise ValueError(f"the world does not fit the story: {kind} {args}: {result}")
    return story, world, calls


def _tags(story: Story, results: list[str]) -> set[str]:
    """What the item actually exercises: fees and refusals as the bank applied them."""
    flags = {"fee": any(re.search(r"\(fee [1-9]", r) for r in results), "long_history": len(story.ops) >= 5,
             "overdraft_refused": any(r.startswith("refused") for r in results)}
    return {"open_account" if kind == "open" else kind for kind, _ in story.ops} | {t for t, on in flags.items() if on}


_strict = strict("ledger")


def post_all(world: dict, ops) -> tuple[dict, list[str]]:
    """Post the operations to a copy of the world: (final world, each tool result)."""
    world = copy.deepcopy(world)
    return world, [TOOLS[kind](world, **args) for kind, args in ops]


def _debit_room(world: dict, account: str, kind: str) -> int:
    """The largest amount `account` can send or withdraw without being refused."""
    return world["accounts"][account] + int(world["overdraft_limit"]) - _fee(world, kind)


def _make(rng: random.Random, level: int) -> tuple[dict, Story]:
    lo, hi, n_accounts, charges, opens_and_refuses = DIFFICULTY[level]
    names = rng.sample(ACCOUNTS, n_accounts + 1)
    world = {
        "accounts": {name: rng.randint(150, 1800) for name in names[:n_accounts]},
        "fees": {"transfer": rng.randint(1, 6), "withdrawal": rng.randint(1, 4)} if charges else
                {"transfer": 0, "withdrawal": 0},
        "overdraft_limit": rng.choice((0, 0, 50, 100)) if opens_and_refuses else 0,
    }
    n = rng.randint(lo, hi)
    kinds = [rng.choice(("deposit", "withdraw", "transfer")) for _ in range(n)]
    if charges and not {"withdraw", "transfer"} & set(kinds):
        kinds[-1] = "transfer"  # fees must matter at the levels that charge them
    if opens_and_refuses:
        opened, refused = rng.randrange(0, n - 2), rng.randrange(1, n - 1)
        if refused == opened:
            refused += 1
        kinds[opened], kinds[refused] = "open", "refused"
    sim, ops, bounced = copy.deepcopy(world), [], set()
    for i, kind in enumerate(kinds):
        live = list(sim["accounts"])
        if kind == "open":
            op = ("open", {"account": names[-1], "amount": rng.randint(50, 600)})
        elif kind == "refused":  # debit the poorest account by more than it can cover
            source = min(live, key=lambda a: _debit_room(sim, a, "transfer"))
            amount = max(_debit_room(sim, source, "transfer"), 0) + rng.randint(5, 250)
            target = rng.choice([a for a in live if a != source])
            op, bounced = ("transfer", {"amount": amount, "source": source, "target": target}), {source, target}
        else:
            account = rng.choice([a for a in live if a in bounced and i == n - 1] or live)
            fee_kind = "withdrawal" if kind == "withdraw" else "transfer"
            room = min(450, _debit_room(sim, account, fee_kind))
            if kind == "deposit" or room < 15:
                op = ("deposit", {"amount": rng.randint(15, 450), "account": account})
            elif kind == "withdraw":
                op = ("withdraw", {"amount": rng.randint(15, room), "account": account})
            else:
                target = rng.choice([a for a in live if a != account])
                op = ("transfer", {"amount": rng.randint(15, room), "source": account, "target": target})
        TOOLS[op[0]](sim, **op[1])
        ops.append(op)
    # Ask about an account the last operation touched (so a stale balance is wrong), and,
    # when there is one, about an account the refused transfer touched too.
    touched = [a for key in ("account", "source", "target") if (a := ops[-1][1].get(key))]
    query = rng.choice([a for a in touched if a in bounced] or touched)
    return world, Story(tuple(ops), query, charges, opens_and_refuses)


def _skills(world: dict, story: Story) -> set[str]:
    """What the item actually exercises: fees and refusals as the bank applied them."""
    return _tags(story, post_all(world, story.ops)[1])


def _row(rng: random.Random, item_id: str, level: int) -> dict:
    owner = f"{rng.choice(OWNERS)}'s {rng.choice(BUSINESSES)}"
    world, story = _make(rng, level)
    final, _ = post_all(world, story.ops)
    return {
        "id": item_id,
        "prompt": render(owner, story),
        "answer": str(final["accounts"][story.query]),
        "skills": sorted(_skills(world, story)),
        "difficulty": level,
        "world": world,
    }


def generate(seed: int | str, n: int, namespace: str = "public", difficulty: int | None = None) -> list[dict]:
    """`n` items for `seed`. Each item draws from its own RNG keyed by (namespace, seed,
    index), so namespaces never share an item stream and item k is the same whatever `n`
    is (`trainergym_kit.items.seeded_items`). With no `difficulty`, levels mix 30/40/30 (1/2/3)."""
    return seeded_items("ledger", seed, n, namespace, difficulty, _row)


_ANSWER = re.compile(r"answer\s*[:=]\s*\**\s*[$€£]?\s*([+-]?\s*\d[\d,_]*)", re.IGNORECASE)
_BOXED = re.compile(r"\\boxed\{\s*([+-]?\d[\d,_]*)\s*\}")
_INTEGER = re.compile(r"[+-]?\d[\d,_]*")


def extract_answer(reply: str) -> int | None:
    """Normalisation: only text after the last `</think>`; take the last `Answer: N`
    (case-insensitive, `:` or `=`, optional bold and currency sign), else the last
    `\\boxed{N}`, else the last integer in the reply; drop thousands separators (`,` `_`)
    and a leading `+`; a leading `-` keeps the balance negative."""
    for pattern in (_ANSWER, _BOXED, _INTEGER):
        if (found := last_match(pattern, reply)) is not None:
            try:
                return int(re.sub(r"[,_\s]", "", found))
            except ValueError:
                return None
    return None


def check(reply: str, answer: str) -> bool:
    """True iff the reply's final integer equals the answer."""
    got = extract_answer(reply)
    return got is not None and got == int(answer)


@_strict
def solve(item: dict) -> dict:
    """The reference solver: post every operation through the tools in order, then ask the
    queried account's balance and answer with it. Reads the story from the prompt and the
    facts only through the tool functions applied to a copy of the item's world; ValueError
    when the family cannot read the item."""
    _, _, calls = _read(item)
    return {"calls": calls, "reply": f"Answer: {calls[-1]['result'].rsplit(' ', 1)[1]}"}


@_strict
def skills(row: dict) -> set[str]:
    """The item's skill tags: its operations read from the prompt by the family's own parser,
    fees and refusals as the bank applies them to the item's world (equal to the generator's
    `skills` on generated items); ValueError when the family cannot read the item (see
    READ_FORM)."""
    story, _, calls = _read(row)
    return _tags(story, [c["result"] for c in calls[:-1]])


def _after_reversing_last(world: dict, ops, account: str) -> int | None:
    """The balance had the last operation been posted the wrong way round (a deposit as a
    withdrawal, a transfer in the opposite direction), whatever the overdraft limit."""
    world, _ = post_all(world, ops[:-1])
    kind, args = ops[-1]
    if kind == "transfer":
        args = {**args, "source": args["target"], "target": args["source"]}
    kind = {"deposit": "withdraw", "withdraw": "deposit"}.get(kind, kind)
    world["overdraft_limit"] = 10**9
    TOOLS[kind](world, **args)
    return world["accounts"].get(account)


@_strict
def distractors(item: dict) -> list[dict]:
    """Plausible wrong answers, each labelled by the mistake that produces it."""
    story, world, _ = _read(item)
    q, ops = story.query, story.ops

    def final(w: dict, todo=ops) -> int | None:
        return post_all(w, todo)[0]["accounts"].get(q)

    finals = post_all(world, ops)[0]["accounts"]
    last = ops[-1][1]  # the counterparty of the last transfer, else any other account
    other = next((a for a in (last.get("source"), last.get("target")) if a and a != q), None) or \
        min(a for a in finals if a != q)
    opened = [args["amount"] for kind, args in ops if kind == "open" and args["account"] == q]
    candidates = [
        ("stale_balance", final(world, ops[:-1])),
        ("fee_not_applied", final({**world, "fees": {"transfer": 0, "withdrawal": 0}})),
        ("opening_balance", world["accounts"].get(q, opened[0] if opened else None)),
        ("refusal_ignored", final({**world, "overdraft_limit": 10**9})),
        ("direction_reversed", _after_reversing_last(world, ops, q)),
        ("wrong_account", finals[other]),
    ]
    seen, out = {finals[q]}, []
    for kind, value in candidates:
        if value is not None and value not in seen:
            seen.add(value)
            out.append({"kind": kind, "reply": f"Answer: {value}"})
    return out
