"""ledger-specific checks (the shared contract is in test_contract.py)."""

import pytest

from trainergym_ledger import items


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


def test_skills_read_the_story_and_apply_it_to_the_world():
    prompt = ("You keep the books.\n1. Open a new account 'travel' with 50.\n2. Transfer 100 from rent to travel.\n"
              "3. Withdraw 5 from travel.\nWhat is the balance of travel after all operations?")
    row = {"prompt": prompt, "world": {**_bank(rent=10), "overdraft_limit": 0}}
    assert items.skills(row) == {"open_account", "transfer", "withdraw", "fee", "overdraft_refused"}
    assert items.solve(row)["reply"] == "Answer: 44"
    free = {"fees": {"transfer": 0, "withdrawal": 0}, "overdraft_limit": 100}
    assert items.skills({**row, "world": {**_bank(rent=10), **free}}) == {"open_account", "transfer", "withdraw"}
    for bad in ({"prompt": "Pay in 20 to savings, then move 5 to rent.", "world": row["world"]},  # free wording
                {"prompt": prompt.replace("2. Transfer", "3. Transfer"), "world": row["world"]},  # misnumbered
                {"prompt": prompt.replace("'travel'", "'rent'"), "world": row["world"]},  # opens an existing account
                {"prompt": prompt, "world": _bank(savings=10)},  # rent is not on the books
                {"prompt": prompt, "world": {"accounts": {"rent": 10}}},  # no fees or limit
                {"prompt": prompt, "world": {**_bank(rent=10), "overdraft_limit": "none"}},
                {"prompt": prompt, "world": {**_bank(Rent=10)}}):  # the tools lower-case names
        with pytest.raises(ValueError):
            items.skills(bad)
