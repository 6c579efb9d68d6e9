"""calc_chain specifics; the contract every family meets is in test_families.py."""

from calc_chain import family as fam
from calc_chain import items
from trainergym import hidden


def test_difficulty_knobs_bound_steps_and_operations():
    for level, (lo, hi, digits, ops) in items.DIFFICULTY.items():
        for row in fam.generate("knobs", 30, difficulty=level):
            calls = fam.solve(row)["calls"]
            assert lo <= len(calls) <= hi
            assert {c["tool"].removeprefix("calc_") for c in calls} <= set(ops)


def test_reference_trajectory_is_a_chain():
    for ex in hidden.hidden_eval("calc_chain"):
        calls = fam.solve(ex.model_dump())["calls"]
        for prev, call in zip(calls, calls[1:]):
            assert call["arguments"]["a"] == int(prev["result"])


def test_checker_normalisation():
    assert fam.check("Answer: 1,234", "1234")
    assert fam.check("steps...\nAnswer: -17", "-17")
    assert fam.check("the result is \\boxed{42}", "42")
    assert fam.check("I think 7. Final: 42", "42")
    assert fam.check("<think>Answer: 1</think>Answer: 2", "2")
    assert not fam.check("<think>Answer: 2</think>no idea", "2")
    assert not fam.check("Answer: 43", "42")
    assert not fam.check("", "42")
    assert not fam.check("Answer: 4 2", "4")


def test_tag_text_reads_free_text():
    assert {"add", "mul"} <= fam.tag_text("Compute 12 plus 5, then multiply by 3.")
    assert "big_operands" in fam.tag_text("Start from 48213 and subtract 7.")
