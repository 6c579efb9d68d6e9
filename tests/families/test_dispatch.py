"""dispatch specifics; the contract every family meets is in test_contract.py."""

import pytest

from trainergym.task import hidden
from trainergym_dispatch import family as fam
from trainergym_dispatch import items


def test_levels_set_the_number_of_dependent_calls():
    calls = {1: {2}, 2: {3}, 3: {4, 5}}
    for level, allowed in calls.items():
        for row in fam.generate("knobs", 30, difficulty=level):
            assert len(fam.solve(row)["calls"]) in allowed, row["id"]


def test_reference_trajectory_is_a_dependent_chain():
    for ex in hidden.hidden_eval("dispatch"):
        calls = fam.solve(ex.model_dump())["calls"]
        ticket, rules, *teams = calls
        assert f"category: {rules['arguments']['category']}" in ticket["result"]
        if teams:
            assert teams[0]["arguments"]["team"] in rules["result"]
        for prev, call in zip(teams, teams[1:]):
            assert f"overflow: {call['arguments']['team']}" in prev["result"]


def test_overflow_skills_match_the_chain():
    for row in fam.generate("chain", 60, difficulty=3):
        hops = len(fam.solve(row)["calls"]) - 3
        assert ("double_overflow" in row["skills"]) == (hops == 2) and "overflow" in row["skills"]


def test_checker_normalisation():
    assert fam.check("Answer: billing-core", "billing-core")
    assert fam.check("**Answer:** Billing Core.", "billing-core")
    assert fam.check("Answer: `billing_core`", "billing-core")
    assert fam.check("Answer: the billing-core team", "billing-core")
    assert fam.check("<think>Answer: refunds-desk</think>\nAnswer: billing-core", "billing-core")
    assert not fam.check("<think>Answer: billing-core</think>no idea", "billing-core")
    assert not fam.check("Answer: billing-core\nAnswer: refunds-desk", "billing-core")
    assert not fam.check("billing-core", "billing-core")
    assert not fam.check("Answer:", "billing-core")
    assert not fam.check("", "billing-core")


def test_tools_report_unknown_keys():
    world = fam.generate(0, 1)[0]["world"]
    assert items.get_ticket(world, "T-0") == "error: no ticket 'T-0'"
    assert items.get_rules(world, "weather").startswith("error: no routing rules for category 'weather'")
    assert items.get_team(world, "Zed") == "error: no team named 'Zed'"
    ticket_id = next(iter(world["tickets"]))
    assert items.get_ticket(world, ticket_id.lower()) == items.get_ticket(world, ticket_id)


def _world(status_a: str, overflow_a: str = "b") -> dict:
    return {"tickets": {"T-1000": {"category": "billing", "priority": 4, "region": "EU", "customer_tier": "gold",
                                   "channel": "chat"}},
            "rules": {"billing": [{"if": [["region", "==", "NA"]], "team": "x"},
                                  {"if": [["priority", ">=", 3], ["customer_tier", "in", ["gold", "silver"]]], "team": "a"},
                                  {"if": [], "team": "x"}]},
            "teams": {"a": {"status": status_a, "overflow": overflow_a}, "b": {"status": "at capacity", "overflow": "c"},
                      "c": {"status": "available", "overflow": "a"}, "x": {"status": "available", "overflow": "a"}}}


def test_skills_come_from_the_route_the_world_gives():
    prompt = "Route ticket T-1000: which team must handle it? Use the dispatch tools."
    assert fam.skills({"prompt": prompt, "world": _world("available")}) == {
        "rule_match", "region_condition", "priority_condition", "tier_condition"}
    row = {"prompt": prompt, "world": _world("at capacity")}
    assert fam.skills(row) == {"rule_match", "region_condition", "priority_condition", "tier_condition", "overflow",
                               "double_overflow"}
    assert fam.solve(row)["reply"] == "Answer: c"
    for bad in ({"prompt": "What is 2 + 2?", "world": _world("available")},  # no ticket named
                {"prompt": "Route the ticket by its priority and region.", "world": _world("available")},
                {"prompt": "Route ticket T-9999: which team?", "world": _world("available")},  # not in the world
                {"prompt": prompt, "world": {**_world("at capacity"), "teams": {"a": {"status": "at capacity",
                                                                                        "overflow": "a"}}}},  # a loop
                {"prompt": prompt + " " + items._ALL_FREE, "world": _world("at capacity")},  # says free, is full
                {"prompt": prompt, "world": _world("at capacity", overflow_a="nobody")}):  # overflow to no team
        with pytest.raises(ValueError):
            fam.skills(bad)
