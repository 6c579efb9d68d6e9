"""The family kit's guarantees (envs/kit): the item seeding every family's items rest on, the
strict readers, answer extraction, tool schemas and the taskset/toolset bases."""

import asyncio
import hashlib
import json
import re

import pytest

from trainergym.task.spec import families
from trainergym_kit import PUBLIC_MODULES, answers, items, schema

# sha256 (first 16 hex digits) of `generate(0, 20) + generate("seed", 10, namespace="probe",
# difficulty=3)`, as the families generated before the kit existed. The hidden eval, the probe's
# items and every measured baseline depend on these streams: a change here is never a refactor.
STREAMS = {
    "calc_chain": "5d84f8c9f14d6f51",
    "dispatch": "03577b02dfcb6b42",
    "ledger": "e1d67cbf17266983",
    "multi_hop": "f5268c5c36bd33be",
    "string_pipeline": "cc145abf3dff4515",
    "triage": "19edbc615c18a0a4",
}


@pytest.mark.parametrize("family", sorted(STREAMS))
def test_item_streams_are_pinned(family):
    fam = families()[family]
    rows = fam.generate(0, 20) + fam.generate("seed", 10, namespace="probe", difficulty=3)
    assert hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()[:16] == STREAMS[family]


def test_item_rng_is_keyed_by_family_namespace_seed_and_index():
    item_id, rng = items.item_rng("calc_chain", "public", 0, 0)
    assert item_id == "public-0-0" and rng.random() == 0.7504990178914546
    draws = {items.item_rng(f, ns, s, k)[1].random()
             for f in ("a", "b") for ns in ("public", "hidden") for s in (0, "0x") for k in (0, 1)}
    assert len(draws) == 16


def test_seeded_items_are_a_prefix_stable_stream_with_the_level_mix():
    def make(rng, item_id, level):
        return {"id": item_id, "level": level, "x": rng.random()}

    rows = items.seeded_items("fam", 3, 300, "public", None, make)
    assert items.seeded_items("fam", 3, 5, "public", None, make) == rows[:5]
    assert [r["id"] for r in rows[:2]] == ["public-3-0", "public-3-1"]
    shares = [sum(r["level"] == level for r in rows) / len(rows) for level in items.LEVELS]
    assert all(abs(share - w / 10) < 0.08 for share, w in zip(shares, items.LEVEL_WEIGHTS)), shares
    # a given level is not drawn, so the item's RNG is left whole for `make`
    fixed = items.seeded_items("fam", 3, 1, "public", 2, make)[0]
    assert fixed["level"] == 2 and fixed["x"] == items.item_rng("fam", "public", 3, 0)[1].random()


def test_strict_readers_raise_only_value_error():
    @items.strict("demo", StopIteration)
    def read(row):
        if row == "stop":
            next(iter(()))
        if row == "bug":
            raise RuntimeError("a bug, not a bad row")
        return row["prompt"]

    assert read({"prompt": "p"}) == "p" and read.__name__ == "read"
    for bad in ({}, None, "stop", [1]):
        with pytest.raises(ValueError, match="^demo cannot read this item: "):
            read(bad)
    with pytest.raises(RuntimeError):
        read("bug")


def test_answer_extraction():
    assert answers.after_think("<think>Answer: 1</think>Answer: 2") == "Answer: 2"
    assert answers.after_think("a</think>b</think>c") == "c" and answers.after_think("<think>open") == "<think>open"
    assert answers.after_think(None) == "" and answers.after_think(12) == "12"
    grouped = re.compile(r"answer:\s*(\w*)", re.IGNORECASE)
    assert answers.last_match(grouped, "Answer: a\nanswer: b</think>ANSWER: c\nAnswer: d") == "d"
    assert answers.last_match(grouped, "Answer: x</think>nothing") is None
    assert answers.last_match(grouped, "Answer: ") == ""
    assert answers.last_match(re.compile(r"\d+"), "1 22 333") == "333"


def test_function_tool_titles_and_requires_every_parameter():
    tool = schema.function_tool("desk_get", "Get it.", ticket_id="string", n="integer")
    assert tool == {"type": "function", "function": {"name": "desk_get", "description": "Get it.", "parameters": {
        "type": "object", "required": ["ticket_id", "n"],
        "properties": {"ticket_id": {"title": "Ticket Id", "type": "string"}, "n": {"title": "N", "type": "integer"}}}}}
    assert schema.function_tool("x", "y")["function"]["parameters"] == {"type": "object", "properties": {}, "required": []}


def test_public_modules_import_only_public_modules():
    """What the sandbox exposes of the kit imports none of its other modules (they stay masked)."""
    import ast
    from pathlib import Path

    import trainergym_kit

    root = Path(trainergym_kit.__file__).parent
    assert set(PUBLIC_MODULES) == {"__init__.py", "answers.py", "toolset.py"}
    for name in PUBLIC_MODULES:
        for node in ast.walk(ast.parse((root / name).read_text())):
            if isinstance(node, ast.ImportFrom):
                assert not node.level and not (node.module or "").startswith("trainergym_kit"), (name, node.module)
            elif isinstance(node, ast.Import):
                assert not any(a.name.startswith("trainergym_kit") for a in node.names), name


def test_world_toolset_shares_or_copies_the_world():
    import verifiers.v1 as vf
    from trainergym_kit.toolset import WorldToolset

    class Reader(WorldToolset):
        pass

    class Poster(WorldToolset):
        MUTABLE_WORLD = True

    class Task:
        world = {"n": [1]}

    async def world_of(cls, task):
        tools = cls(vf.ToolsetConfig())
        await tools.setup_task(task)
        return tools.world

    assert asyncio.run(world_of(Reader, Task)) is Task.world
    copied = asyncio.run(world_of(Poster, Task))
    assert copied == Task.world and copied is not Task.world and copied["n"] is not Task.world["n"]
    assert asyncio.run(world_of(Reader, object())) == {}


def test_item_taskset_loads_generated_items_and_items_files(tmp_path):
    from trainergym_calc_chain import items as calc
    from trainergym_calc_chain.taskset import CalcChainTask, CalcChainTaskset
    from trainergym_kit.taskset import ItemData, ItemTasksetConfig

    assert CalcChainTaskset.task_type() is CalcChainTask and CalcChainTask.data_type() is ItemData
    tasks = CalcChainTaskset(ItemTasksetConfig(id="trainergym_calc_chain", num_tasks=4, seed=5)).load()
    rows = calc.generate(5, 4)
    assert [(t.data.id, t.data.prompt, t.data.answer, t.data.skill_tags) for t in tasks] == \
           [(r["id"], r["prompt"], r["answer"], r["skills"]) for r in rows]
    assert tasks[0].data.system_prompt == CalcChainTaskset.SYSTEM_PROMPT and tasks[0].data.world == {}
    path = tmp_path / "items.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows[:2]) + "\n\n")
    from_file = CalcChainTaskset(ItemTasksetConfig(id="trainergym_calc_chain", items_file=str(path))).load()
    assert [t.data.id for t in from_file] == [r["id"] for r in rows[:2]]
    assert all(asyncio.run(t.validate(None)) for t in from_file)
