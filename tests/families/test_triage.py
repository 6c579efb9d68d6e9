"""triage specifics; the contract every family meets is in test_contract.py."""

import json

import pytest

from trainergym_triage import family as fam
from trainergym_triage import items


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


def _world(*deploys) -> dict:
    return {"services": {"api": {"owner": "Ann Lee", "depends_on": ["db"]}, "db": {"owner": "Bo Chen", "depends_on": []},
                         "web": {"owner": "Cy Diaz", "depends_on": ["api"]}},
            "incidents": {"INC-1234": {"service": "api", "started_at": "10:00", "symptom": "slow"}},
            "deploys": [{"id": i, "service": s, "at": at, "author": "Dee Eve"} for i, s, at in deploys]}


def test_skills_are_read_off_the_world_not_the_prompt():
    prompt = "Incident INC-1234 just paged you. Which deploy caused it, and who owns the service it went to?"
    world = _world(("D-1", "db", "09:30"), ("D-2", "db", "07:00"), ("D-3", "api", "10:05"), ("D-4", "web", "09:50"))
    assert fam.skills({"prompt": prompt, "world": world}) == {
        "dependency_deploy", "owner_lookup", "decoy_after_start", "decoy_older", "unrelated_service"}
    assert fam.solve({"prompt": prompt, "world": world})["reply"] == "Answer: D-1, Bo Chen"
    assert fam.skills({"prompt": prompt, "world": _world(("D-1", "api", "09:30"))}) == {"direct_deploy", "owner_lookup"}
    for bad in ({"prompt": "Find the deploy that broke the incident's service.", "world": world},  # no incident id
                {"prompt": prompt + " See also INC-99.", "world": world},  # two incidents
                {"prompt": prompt, "world": _world(("D-1", "db", "06:30"))},  # nothing in the window
                {"prompt": prompt, "world": _world(("D-1", "db", "09:30"), ("D-2", "db", "09:30"))},  # a tie
                {"prompt": prompt, "world": _world(("D-1", "db", "9.30"))},
                {"prompt": prompt, "world": _world(("D-1", "db", "09:30"), ("D-01", "api", "07:00"))}):  # same id
        with pytest.raises(ValueError):
            fam.skills(bad)
