"""Every family and every reference job under both verifiers a job meets: prime-rl's vendored
a60a606 (0.3.1.dev62), which trains it, and the library's 0.4.0, which agents and adapters run.
The contract's verifiers-facing half (the eval toolset replays the family's solver; verifiers'
own model-free validation passes gold) runs in each stack's own
interpreter; the reference jobs go through the whole probe in each."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainergym.job import stack, stack_env
from trainergym.probe import checks
from trainergym.task.spec import families, load_task

FAMILIES = sorted(families())

# In the stack's interpreter: each family's eval toolset, set up on a row's world, answers the
# family solver's calls as recorded (rows and calls computed here, in the library).
_REPLAY = """
import asyncio, importlib, inspect, json, sys
import verifiers.v1 as vf
from verifiers.v1.task import WireTaskData

async def replay(spec):
    for row in spec["rows"]:
        module, _, cls = spec["toolset"].partition(":")
        server = getattr(importlib.import_module(module), cls)(vf.ToolsetConfig())
        await server.setup_task(WireTaskData(prompt=row["prompt"], answer=row["answer"], world=row["world"]))
        for call in row["calls"]:
            result = getattr(server, call["tool"].removeprefix(f"{server.server_name}_"))(**call["arguments"])
            if inspect.isawaitable(result):
                result = await result
            if str(result) != call["result"]:
                return f"{row['id']}: {call['tool']} answered {str(result)!r}, the solver recorded {call['result']!r}"
    return None

from importlib.metadata import version
print(json.dumps({"verifiers": version("verifiers"),
                  "wrong": {s["family"]: asyncio.run(replay(s)) for s in json.load(sys.stdin)}}))
"""


@pytest.fixture(params=[pytest.param("prime-rl", marks=pytest.mark.stack), "library"])
def runtime(request):
    """The stack under test, made the probe's for the test."""
    chosen = request.getfixturevalue("pinned_stack") if request.param == "prime-rl" else stack_env.library()
    stack_env.reset()
    stack_env._current = chosen
    yield chosen
    stack_env.reset()


def test_the_eval_toolsets_replay_the_solvers(runtime):
    specs = []
    for family in FAMILIES:
        fam = families()[family]
        rows = fam.generate("replay", 25)
        specs.append({"family": family, "toolset": fam.EVAL_TOOLSET,
                      "rows": [{**row, "world": row.get("world") or {}, "calls": fam.solve(row)["calls"]} for row in rows]})
    done = subprocess.run([runtime.python, "-I", "-c", _REPLAY], input=json.dumps(specs, default=str), capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout)
    assert out["verifiers"] == runtime.verifiers
    assert out["wrong"] == {family: None for family in FAMILIES}


@pytest.mark.slow  # tests/families/test_contract.py runs vf-validate on every family in the first tier
@pytest.mark.parametrize("family", FAMILIES)
def test_verifiers_own_validation_passes_gold(runtime, family, tmp_path):
    # `validate` in prime-rl's verifiers (gold and setup), `vf-validate` in 0.4.0 (also noop:
    # an untouched task must fail).
    exe = next(p for p in (Path(runtime.python).with_name("vf-validate"), Path(runtime.python).with_name("validate"))
               if p.exists())
    taskset_id = families()[family].__name__.partition(".")[0]
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    count = "--taskset.num-tasks" if exe.name == "vf-validate" else "--num-tasks"  # where each keeps it
    out = subprocess.run([str(exe), taskset_id, "--runtime.type", "subprocess", count, "6", "--rich", "False",
                          "-o", str(tmp_path)], capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    summaries = list(tmp_path.rglob("summary.json"))
    assert summaries, out.stdout[-2000:] + out.stderr[-2000:]
    summary = json.loads(summaries[0].read_text())
    assert summary["valid_rate"] == 1.0 and summary["checks"]["gold"]["valid"] == 6, summary
    assert summary["checks"].get("noop", {"valid": 6})["valid"] == 6, summary


@pytest.mark.parametrize("family", FAMILIES)
def test_the_reference_job_passes_the_probe(runtime, family, tmp_path):
    fam = families()[family]
    report, bundle = checks.probe(Path(fam.REFERENCE_JOB), load_task(family), tmp_path / "bundle")
    assert report.ok, report.render()
    line = next(i for i in report.items if i.check == "stack")
    schema = next(i for i in report.items if i.check == "config.prime_rl")
    if runtime.pinned:
        assert line.status == "pass" and stack.PRIME_RL_VERIFIERS_VERSION in line.message
        assert schema.status == "pass", schema
    else:
        assert line.status == "warn" and f"verifiers {stack.VERIFIERS_VERSION}" in line.message
        assert schema.status == "skip"
    assert bundle.manifest.stack == stack.PIN


def test_a_config_prime_rl_refuses_fails_the_probe_with_its_message(pinned_stack, monkeypatch, tmp_path):
    """What prime-rl's classes say reaches the report: a rendered key it does not know."""
    from trainergym.job import bundle as bundle_module

    render = bundle_module.render_rl_toml
    monkeypatch.setattr(bundle_module, "render_rl_toml", lambda *a: {**render(*a), "max_stepz": 3})
    stack_env.reset()
    stack_env._current = pinned_stack
    try:
        report, bundle = checks.probe(Path(families()["calc_chain"].REFERENCE_JOB), load_task("calc_chain"), tmp_path / "b")
    finally:
        stack_env.reset()
    item = next(i for i in report.items if i.check == "config.prime_rl")
    assert not report.ok and bundle is None and item.status == "fail" and "stepz" in item.message, report.render()
    assert sys.executable != pinned_stack.python
