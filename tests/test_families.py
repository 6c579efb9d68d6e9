"""The contract every installed family must meet (tests/test_calc_chain.py has the
calc_chain-specific checks). Parametrized over the `trainergym.families` entry points."""

import asyncio
import importlib
import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest

from trainergym import baselines, hidden
from trainergym.tasks import families, load_task

FAMILIES = sorted(families())


@pytest.fixture(params=FAMILIES)
def fam(request):
    return families()[request.param]


def test_six_families_one_held_out():
    assert set(FAMILIES) >= {"calc_chain", "multi_hop", "string_pipeline", "ledger", "dispatch", "triage"}
    assert [f for f in FAMILIES if families()[f].HELD_OUT] == ["triage"]


def test_metadata(fam):
    for name in ("ID", "TITLE", "TEACH", "ANSWER", "EVAL_TOOLSET", "SKILL_TAGS", "DIFFICULTY_LEVELS", "EVAL_TOOLS"):
        assert getattr(fam, name), name
    assert fam.WORLD is None or isinstance(fam.WORLD, str)
    assert Path(fam.REFERENCE_JOB, "job.toml").is_file() and Path(fam.REFERENCE_JOB, "taskset", "__init__.py").is_file()
    for tool in fam.EVAL_TOOLS:
        assert tool["type"] == "function" and tool["function"]["parameters"]["type"] == "object"


def test_task_file_matches_family_default(fam):
    path = Path(__file__).parents[1] / "examples" / "tasks" / f"{fam.ID}.toml"
    assert load_task(path) == load_task(fam.ID)


def test_items_are_well_formed_and_seeded(fam):
    rows = fam.generate(1, 30)
    assert rows == fam.generate(1, 30) and rows != fam.generate(2, 30)
    assert fam.generate(1, 5) == rows[:5]
    assert fam.generate(1, 5, namespace="a") != fam.generate(1, 5, namespace="b")
    for row in rows:
        assert set(row) >= {"id", "prompt", "answer", "skills", "difficulty", "world"}
        assert row["prompt"].strip() and str(row["answer"]).strip()
        assert row["skills"] and set(row["skills"]) <= set(fam.SKILL_TAGS)
        assert row["difficulty"] in fam.DIFFICULTY_LEVELS
        json.dumps(row["world"])  # JSON-serializable
    levels = {r["difficulty"] for r in fam.generate("mix", 100)}
    assert levels == set(fam.DIFFICULTY_LEVELS)


def test_hardest_level_needs_three_dependent_tool_calls(fam):
    hardest = fam.DIFFICULTY_LEVELS[-1]
    for row in fam.generate("hard", 30, difficulty=hardest):
        assert len(fam.solve(row)["calls"]) >= 3


def test_dev_examples(fam):
    dev = fam.dev_examples()
    assert len(dev) >= 5 and len({d["prompt"] for d in dev}) == len(dev)
    for row in dev:
        assert fam.check(fam.solve(row)["reply"], row["answer"])


def test_reference_solver_correct_on_hidden_and_distractors_fail(fam):
    items = [e.model_dump() for e in hidden.hidden_eval(fam.ID)]
    assert len(items) == 200
    for row in items:
        assert fam.check(fam.solve(row)["reply"], row["answer"]), row["id"]
        ds = fam.distractors(row)
        assert len(ds) >= 2, row["id"]
        assert all(d["kind"] and not fam.check(d["reply"], row["answer"]) for d in ds), row["id"]
        assert not fam.check("", row["answer"])


def test_hidden_items_never_come_from_public_seeds(fam):
    """An item is its prompt and its world: two items are the same only if both match."""
    def key(row):
        return row["prompt"], json.dumps(row["world"], sort_keys=True)

    hidden_items = {key(e.model_dump()) for e in hidden.hidden_eval(fam.ID)}
    public = {key(r) for r in fam.dev_examples()}
    for seed in range(5):
        public |= {key(r) for r in fam.generate(seed, 200)}
    probe = {key(e.model_dump()) for e in hidden.probe_items(fam.ID)}
    assert not public & hidden_items and not probe & hidden_items


def test_tag_text_recovers_generated_skills(fam):
    rows = fam.generate("tags", 40)
    exact = sum(fam.tag_text(r["prompt"]) >= set(r["skills"]) for r in rows)
    assert exact >= 0.9 * len(rows)


def test_baselines_with_provenance(fam):
    rows = baselines.for_family(fam.ID)
    assert {r.source for r in rows} <= {"reported", "measured", "surrogate"}
    assert baselines.best_pre(fam.ID).source in ("reported", "measured")


def _toolset(fam):
    module, _, cls = fam.EVAL_TOOLSET.partition(":")
    import verifiers.v1 as vf

    return getattr(importlib.import_module(module), cls)(vf.ToolsetConfig())


def test_toolset_matches_declared_interface_and_replays_the_solver(fam):
    """The eval Toolset advertises EVAL_TOOLS and, given an item's world, returns exactly what
    the reference trajectory recorded."""
    from verifiers.v1.task import WireTaskData
    from verifiers.v1.utils.decorators import discover_decorated

    server = _toolset(fam)
    methods = {f"{server.server_name}_{fn.__name__}" if server.server_name else fn.__name__: fn
               for fn in discover_decorated(server, "tool")}
    declared = {t["function"]["name"]: t["function"]["parameters"] for t in fam.EVAL_TOOLS}
    assert set(methods) == set(declared)
    for name, fn in methods.items():
        assert sorted(p for p in inspect.signature(fn).parameters) == sorted(declared[name]["properties"]), name

    async def replay(row):
        server = _toolset(fam)
        await server.setup_task(WireTaskData(prompt=row["prompt"], answer=row["answer"], world=row["world"]))
        for call in fam.solve(row)["calls"]:
            result = getattr(server, call["tool"].removeprefix(f"{server.server_name}_"))(**call["arguments"])
            if inspect.isawaitable(result):
                result = await result
            assert str(result) == call["result"], (row["id"], call)

    async def all_rows():
        for row in fam.generate("replay", 25) + [e.model_dump() for e in hidden.hidden_eval(fam.ID)[:25]]:
            await replay(row)

    asyncio.run(all_rows())


def test_family_taskset_passes_vf_validate(fam, tmp_path):
    """verifiers' own model-free validation, offline: gold passes, an untouched task fails."""
    exe = Path(sys.executable).with_name("vf-validate")
    out = subprocess.run([str(exe), fam.ID, "--runtime.type", "subprocess", "--taskset.num-tasks", "6", "--rich", "False",
                          "-o", str(tmp_path)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    summaries = list(tmp_path.rglob("summary.json"))
    assert summaries, out.stdout[-2000:] + out.stderr[-2000:]
    summary = json.loads(summaries[0].read_text())
    assert summary["valid_rate"] == 1.0 and summary["checks"]["gold"]["valid"] == 6 and summary["checks"]["noop"]["valid"] == 6
