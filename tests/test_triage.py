"""triage specifics; the contract every family meets is in test_families.py."""

import json

from triage import family as fam
from triage import items


def test_levels_set_the_culprit_depth_and_call_count():
    for level, (lo, hi) in {1: (3, 3), 2: (5, 7), 3: (7, 12)}.items():
        for row in fam.generate("depth", 40, difficulty=level):
            assert items.LEVEL_TAGS[level] in row["skills"]
            assert lo <= len(fam.solve(row)["calls"]) <= hi


def test_reference_trajectory_feeds_each_call_from_earlier_results():
    for row in fam.generate("chain", 40):
        calls = fam.solve(row)["calls"]
        assert calls[0]["tool"] == "ops_get_incident"
        known = {json.loads(calls[0]["result"])["service"]}
        for call in calls[1:]:
            assert call["arguments"]["service"] in known
            result = json.loads(call["result"])
            if call["tool"] == "ops_get_service":
                known |= set(result["depends_on"])


def test_tools_answer_unknown_names_with_errors():
    world = fam.generate("tools", 1)[0]["world"]
    assert items.get_incident(world, "INC-1").startswith("error: no incident")
    assert items.get_service(world, "nope").startswith("error: no service named")
    assert items.list_deploys(world, "nope").startswith("error: no service named")
    name = next(iter(world["services"]))
    assert items.get_service(world, f" {name.upper()} ") == items.get_service(world, name)


def test_checker_normalisation():
    answer = "D-4252, Priya Natarajan"
    assert fam.check("Answer: D-4252, Priya Natarajan", answer)
    assert fam.check("lookups...\n**Answer:** d-4252,  priya   natarajan.", answer)
    assert fam.check("Answer:\nD-4252 (owner: Priya Natarajan)", answer)
    assert fam.check("<think>Answer: D-1, Tom Becker</think>Answer: D-4252, Priya Natarajan", answer)
    assert not fam.check("<think>Answer: D-4252, Priya Natarajan</think>not sure", answer)
    assert not fam.check("Answer: D-4252 or D-1621, Priya Natarajan", answer)  # hedging
    assert not fam.check("Answer: D-4252, Fatima Khan", answer)
    assert not fam.check("Answer: D-42520, Priya Natarajan", answer)
    assert not fam.check("Answer: D-4252, Priya Natarajanova", answer)
    assert not fam.check("", answer)


def test_tag_text_reads_free_text():
    assert fam.tag_text("Find the deploy that broke the incident's service and name its owner.") == {
        "direct_deploy", "owner_lookup"}
    tags = fam.tag_text("Check its dependencies and their dependencies; ignore deploys after the incident "
                        "and older releases, and services that call it.")
    assert {"dependency_deploy", "two_level_dependency", "decoy_after_start", "decoy_older", "unrelated_service"} <= tags
