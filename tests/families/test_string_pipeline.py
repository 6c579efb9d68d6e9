"""The string_pipeline family: operations, difficulty knobs, checker, distractors, skills."""

import pytest

from trainergym_string_pipeline import family as fam
from trainergym_string_pipeline import items


def test_operations():
    assert items.caesar("aZ9y", 27) == "bA9z"
    assert items.rotate("abcdef", 14) == "cdefab"  # k wraps around the length
    assert items.replace("abab", "a", "xy") == "xybxyb"
    assert items.take("abcdef", 4) == "abcd" and items.drop("abcdef", 4) == "ef"
    assert items.dedupe("aAbaBb") == "aAbB"  # case-sensitive, first occurrences kept
    assert items.swapcase("aB3") == "Ab3" and items.reverse("abc") == "cba"


def test_difficulty_knobs_and_every_step_changes_the_string():
    for level, (lo, hi, len_lo, len_hi, ops, (p_lo, p_hi)) in items.DIFFICULTY.items():
        for row in fam.generate("knobs", 40, difficulty=level):
            start, steps = items.parse(row["prompt"])
            assert lo <= len(steps) <= hi and len_lo <= len(start) <= len_hi
            assert {op for op, _ in steps} <= set(ops)
            values = items.run(start, steps)
            assert all(a != b for a, b in zip(values, values[1:])) and values[-1] == row["answer"]
            shifts = [a.get("shift", a.get("k")) for op, a in steps if op in ("caesar", "rotate")]
            assert all(p_lo <= s <= p_hi for s in shifts)
            if level == 3:
                assert {"caesar", "rotate"} <= {op for op, _ in steps} and "long_pipeline" in row["skills"]


def test_checker_normalisation():
    assert fam.check("Answer: aB3", "aB3")
    assert fam.check('steps...\n**Answer:** "aB3"\n', "aB3")
    assert fam.check("answer: `aB3`", "aB3")
    assert fam.check("<think>Answer: x</think>Answer: x\nAnswer: aB3", "aB3")
    assert not fam.check("<think>Answer: aB3</think>no idea", "aB3")
    assert not fam.check("Answer: ab3", "aB3")  # case-sensitive
    assert not fam.check("Answer: aB3.", "aB3")
    assert not fam.check("aB3", "aB3")  # no Answer line
    assert not fam.check("", "aB3") and not fam.check("Answer:", "aB3")


def test_distractor_kinds():
    kinds = set()
    for row in fam.generate("distract", 200):
        ds = fam.distractors(row)
        assert {"skipped_step", "case_error"} <= {d["kind"] for d in ds}
        assert len({d["reply"] for d in ds}) == len(ds)
        kinds |= {d["kind"] for d in ds}
    assert kinds == {"skipped_step", "swapped_steps", "off_by_one", "case_error"}


def test_skills_read_the_family_wording_only():
    prompt = ('Start with the string "qWe4rTy9".\nStep 1: reverse it.\n'
              "Step 2: Caesar-shift its letters forward by 13 (digits unchanged, case kept).\n"
              "Step 3: rotate it left by 11 (move the first character to the end, 11 times).\n"
              "Step 4: swap the case of every letter.\n"
              "Step 5: remove repeated characters (case-sensitive), keeping the first occurrence of each.\n"
              "What is the final string?")
    assert fam.skills({"prompt": prompt}) == {"reverse", "caesar", "rotate", "swapcase", "dedupe", "long_pipeline",
                                              "mixed_case", "large_shift"}
    assert fam.check(fam.solve({"prompt": prompt})["reply"], items.run(*items.parse(prompt))[-1])
    for text in ("Take 'qWe4rTy9' and reverse it, then apply a caesar shift of 13.",  # free wording: no guessing
                 "Drop the first 2 characters, then keep only the first 5.",
                 'Start with the string "abc".\nStep 1: flip it.',
                 'Start with the string "abc".\nStep 2: reverse it.'):
        with pytest.raises(ValueError):
            fam.skills({"prompt": text})
