"""ledger-specific checks (the shared contract is in test_families.py)."""

from ledger import items


def _bank(**accounts):
    return {"accounts": dict(accounts), "fees": {"transfer": 2, "withdrawal": 1}, "overdraft_limit": 0}


def test_checker_normalisation():
    assert items.check("Answer: 1,074", "1074")
    assert items.check("<think>Answer: 5</think>The books close at **Answer:** $1074", "1074")
    assert items.check("answer = -40", "-40")
    assert items.check("The balance is 1074.", "1074")
    assert not items.check("Answer: 1075", "1074")
    assert not items.check("", "1074")


def test_refused_debit_changes_nothing_and_fees_go_to_the_source():
    world = _bank(checking=100, savings=0)
    assert items.transfer(world, "checking", "savings", 99) == \
        "refused: insufficient funds in checking (balance 100); nothing changed"
    assert world["accounts"] == {"checking": 100, "savings": 0}
    assert items.transfer(world, "Checking", "savings", 98) == "ok: checking 0 (fee 2), savings 98"
    assert items.withdraw(world, "savings", 97) == "ok: savings 0 (fee 1)"


def test_overdraft_limit_allows_a_negative_balance():
    world = {**_bank(rent=10), "overdraft_limit": 50}
    assert items.withdraw(world, "rent", 59) == "ok: rent -50 (fee 1)"
    assert items.withdraw(world, "rent", 1).startswith("refused")


def test_unknown_accounts_and_bad_amounts_are_errors_not_exceptions():
    world = _bank(rent=10)
    assert items.balance(world, "zed") == "error: no account named 'zed'"
    assert items.deposit(world, "rent", 0).startswith("error")
    assert items.open_account(world, "rent", 5) == "error: account 'rent' already exists"
    assert items.open_account(world, "travel", 5) == "ok: opened travel with 5"


def test_hardest_items_have_an_opening_and_a_refusal_and_expected_distractors():
    for row in items.generate("l3", 50, difficulty=3):
        assert {"open_account", "overdraft_refused", "long_history"} <= set(row["skills"])
        kinds = {d["kind"] for d in items.distractors(row)}
        assert {"stale_balance", "direction_reversed"} <= kinds
