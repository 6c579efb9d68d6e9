"""multi_hop specifics; the contract every family meets is in test_contract.py."""

import pytest

from trainergym.task import hidden
from trainergym_multi_hop import family as fam
from trainergym_multi_hop import items


def test_difficulty_knobs_bound_hops_and_world_size():
    for level, (hops, lo, hi) in items.DIFFICULTY.items():
        for row in fam.generate("knobs", 30, difficulty=level):
            assert len(fam.solve(row)["calls"]) == hops + 1
            assert lo <= len(row["world"]["people"]) <= hi
            assert f"hops_{hops + 1}" in row["skills"]


def test_reference_trajectory_is_a_chain():
    for ex in hidden.hidden_eval("multi_hop"):
        calls = fam.solve(ex.model_dump())["calls"]
        for prev, call in zip(calls, calls[1:]):
            assert call["arguments"]["person"] == prev["result"]
        assert calls[-1]["tool"] == "people_get_attribute" and calls[-1]["result"] == ex.answer


def test_world_values_are_unique_so_wrong_people_give_wrong_answers():
    for row in fam.generate("unique", 20):
        people = row["world"]["people"].values()
        for attr in items.ATTRIBUTES:
            values = [p["attributes"][attr] for p in people]
            assert len(set(values)) == len(values)


def test_tools_match_names_loosely_and_explain_errors():
    world = fam.generate("tools", 1, difficulty=1)[0]["world"]
    name = next(n for n, p in world["people"].items() if "manager" in p["relations"])
    boss = world["people"][name]["relations"]["manager"]
    assert items.get_relation(world, name.upper().replace(".", ""), "Manager") == boss
    assert items.get_attribute(world, f"  {name.lower()} ", "birth year") == world["people"][name]["attributes"]["birth_year"]
    assert "manager" in items.list_relations(world, name).split(", ")
    assert items.get_relation(world, "Zed Nobody", "manager") == "error: no person named 'Zed Nobody'"
    assert items.get_relation(world, name, "boss").startswith("error: unknown relation 'boss'")
    assert items.get_attribute(world, name, "age").startswith("error: unknown attribute 'age'")


def test_checker_normalisation():
    assert fam.check("Answer: Lisbon", "Lisbon")
    assert fam.check('I looked it up.\nAnswer: **"guinea pig".**', "guinea pig")
    assert fam.check("answer:   Tabby   Cat!", "tabby cat")
    assert fam.check("<think>Answer: Oslo</think>Answer: Lisbon", "Lisbon")
    assert fam.check("Answer: Oslo\nAnswer: Lisbon", "Lisbon")
    assert not fam.check("<think>Answer: Lisbon</think>no idea", "Lisbon")
    assert not fam.check("Lisbon", "Lisbon")
    assert not fam.check("Answer: Lisbon Portugal", "Lisbon")
    assert not fam.check("", "Lisbon")


def _directory(**relations) -> dict:
    names = ("Ada K. Novak", "Bo L. Lund", "Cy M. Moreau")
    return {"people": {n: {"attributes": {"city": f"city{i}", "pet": f"pet{i}"},
                           "relations": relations.get(n.split()[0].lower(), {})} for i, n in enumerate(names)}}


def test_skills_read_the_question_and_check_the_world():
    world = _directory(ada={"manager": "Bo L. Lund"}, bo={"sibling": "Cy M. Moreau"})
    row = {"prompt": "Find the pet of the sibling of the manager of Ada K. Novak. Use the tools.", "world": world}
    assert fam.skills(row) == {"hops_3", "manager", "sibling", "pet"}
    assert fam.solve(row)["reply"] == "Answer: pet2"
    unreadable = [
        "Which city does the boss of Ann Lee's best friend live in?",  # free wording: no keyword guessing
        "What pet does her brother keep?",
        "Find the pet of the mentor of the manager of Ada K. Novak.",  # Bo has no mentor
        "Find the hobby of the manager of Ada K. Novak.",  # no hobby recorded
        "Find the pet of the sibling of the manager of Zed Q. Nobody.",  # not in the world
        "Find the pet of the manager of the sibling of the manager of the manager of Ada K. Novak.",  # 4 relations
        "Find the pet of the manager of Ada K. Novak. Find the home city of the manager of Ada K. Novak.",  # two questions
    ]
    for prompt in unreadable:
        with pytest.raises(ValueError):
            fam.skills({"prompt": prompt, "world": world})
    with pytest.raises(ValueError):  # a world whose values are not strings
        fam.solve({**row, "world": {"people": {"Ada K. Novak": {"attributes": {"pet": 3}, "relations": {}}}}})
