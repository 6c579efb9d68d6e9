"""The calc_chain family: generator, checker, solver, distractors, hidden eval, taskset."""

import asyncio
import inspect

import pytest

from calc_chain import family as fam
from calc_chain import items
from trainergym import hidden


def test_same_seed_same_items_different_seed_different_items():
    assert fam.generate(1, 20) == fam.generate(1, 20)
    assert fam.generate(1, 20) != fam.generate(2, 20)
    assert fam.generate(1, 5) == fam.generate(1, 20)[:5]  # item k does not depend on n
    assert fam.generate(1, 5, namespace="a") != fam.generate(1, 5, namespace="b")


def test_difficulty_knobs_and_skill_tags():
    for level, (lo, hi, digits, ops) in items.DIFFICULTY.items():
        for row in fam.generate("knobs", 30, difficulty=level):
            calls = fam.solve(row)["calls"]
            assert lo <= len(calls) <= hi
            assert {c["tool"].removeprefix("calc_") for c in calls} <= set(ops)
            assert set(row["skills"]) <= set(fam.SKILL_TAGS) and row["skills"]
    assert min(len(fam.solve(r)["calls"]) for r in fam.generate("x", 50, difficulty=3)) >= 3


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


def test_reference_solver_is_correct_on_dev_and_hidden_items():
    for ex in fam.dev_examples() + [e.model_dump() for e in hidden.hidden_eval("calc_chain")]:
        sol = fam.solve(ex)
        assert fam.check(sol["reply"], ex["answer"])
        # the trajectory is a chain: every call takes the previous result
        for prev, call in zip(sol["calls"], sol["calls"][1:]):
            assert call["arguments"]["a"] == int(prev["result"])


def test_every_distractor_fails_the_checker():
    for ex in hidden.hidden_eval("calc_chain")[:100]:
        ds = fam.distractors(ex.model_dump())
        assert len(ds) >= 3
        assert not any(fam.check(d["reply"], ex.answer) for d in ds)


def test_hidden_eval_is_200_items_disjoint_from_public_seeds():
    hidden_items = hidden.hidden_eval("calc_chain")
    assert len(hidden_items) == hidden.HIDDEN_EVAL_SIZE == 200
    public = {r["prompt"] for r in fam.dev_examples()}
    for seed in range(5):
        public |= {r["prompt"] for r in fam.generate(seed, 200)}
    assert not public & {e.prompt for e in hidden_items}
    assert not {e.prompt for e in hidden.probe_items("calc_chain")} & {e.prompt for e in hidden_items}


def test_secret_seed_lives_in_the_data_dir_and_can_be_pinned(monkeypatch, tmp_path):
    seed_file = hidden.data_dir() / "hidden-seed"
    assert hidden.secret_seed() == seed_file.read_text().strip()
    assert oct(seed_file.stat().st_mode & 0o777) == "0o600"
    monkeypatch.setenv("TRAINERGYM_HIDDEN_SEED", "pinned")
    assert hidden.secret_seed() == "pinned"
    a = hidden.hidden_eval("calc_chain")
    monkeypatch.setenv("TRAINERGYM_HIDDEN_SEED", "other")
    assert hidden.hidden_eval("calc_chain") != a


def test_tag_text_reads_the_family_wording_and_free_text():
    row = fam.generate("tags", 1, difficulty=3)[0]
    assert fam.tag_text(row["prompt"]) == set(row["skills"])
    assert {"add", "mul"} <= fam.tag_text("Compute 12 plus 5, then multiply by 3.")


def test_toolset_matches_the_declared_eval_interface():
    from verifiers.v1.utils.decorators import discover_decorated

    from calc_chain.toolset import CalcChainToolset
    import verifiers.v1 as vf

    server = CalcChainToolset(vf.ToolsetConfig())
    found = {f"{server.server_name}_{fn.__name__}": [p for p in inspect.signature(fn).parameters] for fn in discover_decorated(server, "tool")}
    declared = {t["function"]["name"]: sorted(t["function"]["parameters"]["properties"]) for t in fam.EVAL_TOOLS}
    assert found == declared
    assert server.add(2, 3) == "5" and server.div(7, 2) == "3" and server.mod(-7, 3) == "2"
    with pytest.raises(ZeroDivisionError):
        server.div(1, 0)


def test_family_taskset_model_free_validation():
    """verifiers' gold and noop checks on the family's own taskset, offline."""
    from verifiers.v1.utils.loaders import taskset_class, taskset_config_type

    cls = taskset_class("calc_chain")
    ts = cls(taskset_config_type("calc_chain")(id="calc_chain", num_tasks=10))
    tasks = list(ts)
    assert len(tasks) == 10

    async def check():
        from trainergym.probe_child import _score

        import verifiers.v1 as vf

        for t in tasks:
            assert await t.validate(None) is True
            assert (await _score(vf, t, [], None, 5))["reward"] == 0.0  # untouched
            sol = fam.solve({"prompt": t.data.prompt_text})
            assert (await _score(vf, t, sol["calls"], sol["reply"], 5))["reward"] == 1.0

    asyncio.run(check())
