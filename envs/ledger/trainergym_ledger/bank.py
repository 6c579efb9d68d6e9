"""The bank: the ledger tools' semantics as pure functions over a world dict, shared by the
eval tools (`trainergym_ledger.toolset`) and the solver (`trainergym_ledger.items`).

A world is {"accounts": {name: balance}, "fees": {"transfer": int, "withdrawal": int},
"overdraft_limit": int}; the posting functions update it in place.

A public module of the family: job code may import it (see `PUBLIC_MODULES` in family.py), so
it is pure Python and imports nothing else from the package.
"""

from __future__ import annotations


def _name(account: str) -> str:
    """Account names are matched leniently: case, surrounding spaces and quotes ignored."""
    return str(account).strip().strip("'\"").strip().lower()


def _fee(world: dict, kind: str) -> int:
    return int(world.get("fees", {}).get(kind, 0))


def _refusal(world: dict, account: str, cost: int) -> str | None:
    """Why a debit of `cost` from `account` is refused (it would pass the overdraft limit)."""
    have = world["accounts"][account]
    if have - cost < -int(world.get("overdraft_limit", 0)):
        return f"refused: insufficient funds in {account} (balance {have}); nothing changed"
    return None


def _missing(world: dict, *accounts: str) -> str | None:
    for account in accounts:
        if account not in world.setdefault("accounts", {}):
            return f"error: no account named {account!r}"
    return None


def _bad_amount(amount: int) -> str | None:
    return None if isinstance(amount, int) and amount > 0 else "error: amount must be a positive whole number"


def balance(world: dict, account: str) -> str:
    account = _name(account)
    return _missing(world, account) or f"{account} {world['accounts'][account]}"


def fees(world: dict) -> str:
    return (f"transfer fee {_fee(world, 'transfer')}, withdrawal fee {_fee(world, 'withdrawal')}, "
            f"deposits free, overdraft limit {int(world.get('overdraft_limit', 0))}")


def open_account(world: dict, account: str, amount: int) -> str:
    account = _name(account)
    if account in world.setdefault("accounts", {}):
        return f"error: account {account!r} already exists"
    if error := _bad_amount(amount):
        return error
    world["accounts"][account] = amount
    return f"ok: opened {account} with {amount}"


def deposit(world: dict, account: str, amount: int) -> str:
    account = _name(account)
    if error := _missing(world, account) or _bad_amount(amount):
        return error
    world["accounts"][account] += amount
    return f"ok: {account} {world['accounts'][account]}"


def withdraw(world: dict, account: str, amount: int) -> str:
    account = _name(account)
    fee = _fee(world, "withdrawal")
    if error := _missing(world, account) or _bad_amount(amount) or _refusal(world, account, amount + fee):
        return error
    world["accounts"][account] -= amount + fee
    return f"ok: {account} {world['accounts'][account]} (fee {fee})"


def transfer(world: dict, source: str, target: str, amount: int) -> str:
    source, target = _name(source), _name(target)
    if source == target:
        return "error: source and target are the same account"
    fee = _fee(world, "transfer")
    if error := _missing(world, source, target) or _bad_amount(amount) or _refusal(world, source, amount + fee):
        return error
    world["accounts"][source] -= amount + fee
    world["accounts"][target] += amount
    return f"ok: {source} {world['accounts'][source]} (fee {fee}), {target} {world['accounts'][target]}"


TOOLS = {"balance": balance, "fees": fees, "open": open_account, "deposit": deposit,
         "withdraw": withdraw, "transfer": transfer}
