"""calc_chain specifics; the contract every family meets is in test_contract.py."""

import time

import pytest

from trainergym.task import hidden
from trainergym_calc_chain import family as fam
from trainergym_calc_chain import items


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


def test_skills_read_the_family_wording_only():
    prompt = "Start with 48213.\nStep 1: subtract 50000 from it.\nStep 2: multiply it by 3.\nWhat is the final value?"
    assert fam.skills({"prompt": prompt}) == {"sub", "mul", "big_operands", "negative_intermediate"}
    assert fam.solve({"prompt": prompt, "world": {}})["reply"] == "Answer: -5361"
    for text in ("Compute 12 plus 5, then multiply by 3.",  # free wording is not read: no keyword guessing
                 "Start from 48213 and subtract 7.",
                 "Start with 5.\nStep 1: add 3 to it\nStep 2: multiply it by 2.",  # a step without its period
                 "Start with 5.\nStep 1: add 3 to it.\nStep 3: multiply it by 2.",  # misnumbered
                 "Step 1: add 3 to it.\nStart with 5.",  # steps before the start
                 "Start with 5.\nStep 1: add three to it."):
        with pytest.raises(ValueError):
            fam.skills({"prompt": text})


def test_long_chains_are_read_quickly():
    prompt = "Start with 1.\n" + "".join(f"Step {i}: add {i} to it.\n" for i in range(1, 700))
    start = time.perf_counter()
    assert fam.solve({"prompt": prompt})["reply"] == f"Answer: {1 + 699 * 700 // 2}"
    assert fam.skills({"prompt": prompt}) == {"add", "long_chain"}
    assert time.perf_counter() - start < 1.0
