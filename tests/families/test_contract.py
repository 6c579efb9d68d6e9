"""The family contract: what every installed family meets, and what a new family made by the
recipe in docs/families.md meets too (`tests/families/seventh/`, the `clock` family, is that
recipe followed; it is installed for this module only). Family specifics live beside this file
(`test_<family>.py`); the kit's own guarantees in test_kit.py."""

import asyncio
import importlib
import inspect
import json
import os
import random
import string
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from trainergym.task import baselines, hidden
from trainergym.probe.sandbox import public_packages
from trainergym.task.spec import families, load_task

INSTALLED = sorted(families())
SEVENTH = Path(__file__).parent / "seventh"  # the worked example of docs/families.md's recipe


@pytest.fixture(scope="module")
def seventh(tmp_path_factory):
    """The seventh family installed as its pyproject says, for this module: its source on
    sys.path and a dist-info naming its entry point, so `families()` finds it as it would
    after `pip install`."""
    project = tomllib.loads((SEVENTH / "pyproject.toml").read_text())["project"]
    (entry_id, target), = project["entry-points"]["trainergym.families"].items()
    site = tmp_path_factory.mktemp("site")
    info = site / f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n")
    (info / "entry_points.txt").write_text(f"[trainergym.families]\n{entry_id} = {target}\n")
    sys.path[:0] = [str(SEVENTH), str(site)]
    families.cache_clear()
    try:
        yield families()[entry_id]
    finally:
        sys.path[:] = [p for p in sys.path if p not in (str(SEVENTH), str(site))]
        for name in [m for m in sys.modules if m.partition(".")[0] == target.partition(".")[0]]:
            del sys.modules[name]
        families.cache_clear()


@pytest.fixture(params=[*INSTALLED, "seventh"])
def fam(request):
    """Each installed family, then the seventh: every test taking `fam` is the family contract."""
    return request.getfixturevalue("seventh") if request.param == "seventh" else families()[request.param]


@pytest.fixture(params=INSTALLED)
def installed(request):
    """Each family this repository ships (what it registers beyond the contract)."""
    return families()[request.param]


def _subprocess_env() -> dict:
    # The seventh family is on no site-packages: child interpreters find it on PYTHONPATH.
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(SEVENTH), os.environ.get("PYTHONPATH")]))}


# --- what this repository registers -------------------------------------------------------------

def test_six_families_one_held_out():
    assert set(INSTALLED) >= {"calc_chain", "multi_hop", "string_pipeline", "ledger", "dispatch", "triage"}
    assert [f for f in INSTALLED if families()[f].HELD_OUT] == ["triage"]


def test_task_file_matches_family_default(installed):
    path = Path(__file__).parents[2] / "examples" / "tasks" / f"{installed.ID}.toml"
    assert load_task(path) == load_task(installed.ID)


def test_baselines_with_provenance(installed):
    rows = baselines.for_family(installed.ID)
    assert {r.source for r in rows} <= {"reported", "measured", "surrogate"}
    assert baselines.best_pre(installed.ID).source in ("reported", "measured")


def test_names_cannot_collide():
    """Distributions are `trainergym-<id>` and import names `trainergym_<id>`: no PyPI project
    or trainergym module (such as `trainergym.infra.costs`) shares them."""
    from importlib.metadata import entry_points

    for ep in entry_points(group="trainergym.families"):
        dashed = ep.name.replace("_", "-")
        assert ep.dist.name == f"trainergym-{dashed}" and ep.value == f"trainergym_{ep.name}.family", ep


# --- the family contract ----------------------------------------------------------------------

def test_metadata(fam):
    for name in ("ID", "TITLE", "TEACH", "ANSWER", "EVAL_TOOLSET", "SKILL_TAGS", "DIFFICULTY_LEVELS", "EVAL_TOOLS"):
        assert getattr(fam, name), name
    assert fam.WORLD is None or isinstance(fam.WORLD, str)
    assert Path(fam.REFERENCE_JOB, "job.toml").is_file() and Path(fam.REFERENCE_JOB, "taskset", "__init__.py").is_file()
    assert isinstance(fam.READ_FORM, str) and len(fam.READ_FORM) > 40
    for tool in fam.EVAL_TOOLS:
        assert tool["type"] == "function" and tool["function"]["parameters"]["type"] == "object"


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


def test_skills_read_the_generated_skills_back(fam):
    rows = fam.generate("skills", 50)
    for row in rows:
        assert fam.skills(row) == set(row["skills"]), row["id"]
        assert fam.skills(row) <= set(fam.SKILL_TAGS)
    for row in fam.dev_examples() + [e.model_dump() for e in hidden.hidden_eval(fam.ID)[:50]]:
        assert fam.skills(row) == set(row["skills"]), row["id"]


def _junk_rows(fam) -> list[dict]:
    rng = random.Random(fam.ID)
    row, other = fam.generate("junk", 2, difficulty=fam.DIFFICULTY_LEVELS[-1])
    junk = [
        {"prompt": "What is 2+2?", "world": {}},
        {"prompt": "".join(rng.choice(string.printable) for _ in range(5000)), "world": {}},
        {"prompt": "".join(rng.choice(string.printable) for _ in range(5000)), "world": row["world"]},
        {"prompt": "7" * 16000, "world": {}},
        {"prompt": "7" * 16000, "world": row["world"]},
        {"prompt": row["prompt"] + "\n" + other["prompt"], "world": row["world"]},  # two items in one prompt
        {"world": row["world"]},
        {"prompt": None, "world": row["world"]},
        {"prompt": 12, "world": row["world"]},
        "not a row",
    ]
    if fam.WORLD is not None:  # the tools need the item's world: without it the family cannot read the item
        junk += [{"prompt": row["prompt"], "world": {}}, {"prompt": row["prompt"]},
                 {"prompt": row["prompt"], "world": None}, {"prompt": row["prompt"], "world": []},
                 {"prompt": row["prompt"], "world": {k: "x" for k in row["world"]}},
                 {"prompt": row["prompt"], "world": {k: [] for k in row["world"]}},
                 {"prompt": row["prompt"], "world": {"_" + k: v for k, v in row["world"].items()}}]
    junk += JUNK.get(fam.ID, [])
    return junk


# Family-specific unreadable items: relation cycles, huge numbers, worlds inconsistent with the prompt.
JUNK = {
    "calc_chain": [
        {"prompt": f"Start with {'9' * 5000}.\nStep 1: add 1 to it.", "world": {}},
        {"prompt": "Start with 5.\nStep 1: integer-divide it by 0 (floor division).", "world": {}},
        {"prompt": "Start with 5.\n" + "".join(f"Step {i}: multiply it by {'9' * 90}.\n" for i in range(1, 160)), "world": {}},
        {"prompt": "Start with 5.\nStep 2: add 1 to it.", "world": {}},
    ],
    "string_pipeline": [
        {"prompt": 'Start with the string "ab".\n' + "".join(f'Step {i}: replace every "a" with "{"a" * 60}".\n'
                                                           for i in range(1, 200)), "world": {}},
        {"prompt": f'Start with the string "ab".\nStep 1: Caesar-shift its letters forward by {"9" * 5000} '
                   "(digits unchanged, case kept).", "world": {}},
    ],
    "multi_hop": [
        {"prompt": "What is the home city of the manager of the manager of the manager of Ada K. Novak?",
         "world": {"people": {"Ada K. Novak": {"attributes": {}, "relations": {"manager": "Bo L. Lund"}},
                              "Bo L. Lund": {"attributes": {}, "relations": {"manager": "Ada K. Novak"}}}}},
        {"prompt": "What is the pet of the manager of the mentor of the sibling of the neighbor of Ada K. Novak?",
         "world": {"people": {"Ada K. Novak": {"attributes": {"pet": "cat"}, "relations": dict.fromkeys(
             ("manager", "mentor", "sibling", "neighbor"), "Ada K. Novak")}}}},
    ],
    "ledger": [
        {"prompt": f"1. Deposit {'9' * 5000} into rent.\nWhat is the balance of rent after all operations?",
         "world": {"accounts": {"rent": 5}, "fees": {"transfer": 1, "withdrawal": 1}, "overdraft_limit": 0}},
        {"prompt": "1. Deposit 5 into travel.\nWhat is the balance of travel after all operations?",
         "world": {"accounts": {"rent": 5}, "fees": {"transfer": 1, "withdrawal": 1}, "overdraft_limit": 0}},
    ],
    "dispatch": [
        {"prompt": "Route ticket T-1000: which team must handle it?",
         "world": {"tickets": {"T-1000": {"category": "billing", "priority": 3, "region": "EU", "customer_tier": "gold",
                                          "channel": "chat"}},
                   "rules": {"billing": [{"if": [], "team": "a"}]},
                   "teams": {"a": {"status": "at capacity", "overflow": "b"},
                             "b": {"status": "at capacity", "overflow": "a"}}}},
        {"prompt": "Route ticket T-1000: which team must handle it?",
         "world": {"tickets": {"T-1000": {"category": "billing", "priority": 3, "region": "EU", "customer_tier": "gold",
                                          "channel": "chat"}},
                   "rules": {"billing": [{"if": [["priority", ">=", 4]], "team": "a"}]},
                   "teams": {"a": {"status": "available", "overflow": "a"}}}},
        {"prompt": "Route ticket T-1000: which team must handle it?",
         "world": {"tickets": {"T-1000": {"category": "billing", "priority": 3, "region": "EU", "customer_tier": "gold",
                                          "channel": "chat"}},
                   "rules": {"billing": [{"if": [], "team": "t0"}]},
                   "teams": {f"t{i}": {"status": "at capacity", "overflow": f"t{i + 1}"} for i in range(2000)}}},
    ],
    "triage": [
        {"prompt": "Incident INC-1234 paged you.",
         "world": {"services": {s: {"owner": "Ann Lee", "depends_on": [t]} for s, t in (("a", "b"), ("b", "c"), ("c", "a"))},
                   "incidents": {"INC-1234": {"service": "a", "started_at": "10:00", "symptom": "slow"}},
                   "deploys": [{"id": "D-1", "service": "a", "at": "06:00", "author": "Bo"}]}},
        {"prompt": "Incident INC-1234 paged you.",
         "world": {"services": {f"s{i}": {"owner": "Ann Lee", "depends_on": [f"s{j}" for j in range(300) if j != i][:40]}
                                for i in range(300)},
                   "incidents": {"INC-1234": {"service": "s0", "started_at": "10:00", "symptom": "slow"}},
                   "deploys": []}},
        {"prompt": "Incident INC-1234 paged you.",
         "world": {"services": {"a": {"owner": "Ann Lee", "depends_on": []}},
                   "incidents": {"INC-1234": {"service": "a", "started_at": "25:00", "symptom": "slow"}},
                   "deploys": [{"id": "D-1", "service": "a", "at": "24:30", "author": "Bo"}]}},
    ],
}


def test_solve_and_skills_raise_value_error_fast_on_items_the_family_cannot_read(fam):
    for row in _junk_rows(fam):
        for fn in (fam.solve, fam.skills):
            start = time.perf_counter()
            with pytest.raises(ValueError):
                fn(row)
            assert time.perf_counter() - start < 1.0, (fn.__name__, str(row)[:200])


def test_a_stateless_family_reads_items_without_a_world(fam):
    row = fam.generate("noworld", 1)[0]
    if fam.WORLD is None:
        bare = {"prompt": row["prompt"]}
        assert fam.check(fam.solve(bare)["reply"], row["answer"]) and fam.skills(bare) == set(row["skills"])


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


# A vf-validate process per family costs ~8 s: the first tier validates one shipped family and the
# seventh (the example a family author copies); the second tier, every family.
@pytest.mark.parametrize("fam_id", ["calc_chain", "seventh",
                                    *(pytest.param(f, marks=pytest.mark.slow) for f in INSTALLED if f != "calc_chain")])
def test_family_taskset_passes_vf_validate(fam_id, request, tmp_path):
    """verifiers' own model-free validation, offline: gold passes, an untouched task fails."""
    fam = request.getfixturevalue("seventh") if fam_id == "seventh" else families()[fam_id]
    exe = Path(sys.executable).with_name("vf-validate")
    taskset_id = fam.__name__.partition(".")[0]  # a family's package is its verifiers taskset
    out = subprocess.run([str(exe), taskset_id, "--runtime.type", "subprocess", "--taskset.num-tasks", "6", "--rich",
                          "False", "-o", str(tmp_path)], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                         env=_subprocess_env())
    summaries = list(tmp_path.rglob("summary.json"))
    assert summaries, out.stdout[-2000:] + out.stderr[-2000:]
    summary = json.loads(summaries[0].read_text())
    assert summary["valid_rate"] == 1.0 and summary["checks"]["gold"]["valid"] == 6 and summary["checks"]["noop"]["valid"] == 6


# --- what job code may import: the public modules of the family and of the kit ---------------

_GATED = r"""
import importlib, importlib.abc, itertools, json, os, sys

specs = json.loads(sys.argv[1])  # [{pkg, public: {package: [files]}, toolset, job}] per family
public = {}
for spec in specs:
    for package, names in spec["public"].items():
        public.setdefault(package, set()).update(names)


class Gate(importlib.abc.MetaPathFinder):  # refuses every non-public module of these packages, as the sandbox does
    def find_spec(self, name, path=None, target=None):
        pkg = name.partition(".")[0]
        if pkg not in public:
            return None
        for finder in sys.meta_path:
            if finder is not self and hasattr(finder, "find_spec"):
                spec = finder.find_spec(name, path, target)
                if spec is not None:
                    break
        else:
            return None
        if os.path.basename(spec.origin or "") not in public[pkg]:
            raise ImportError(f"{name} is not a public module of {pkg}")
        return spec


assert not [m for m in sys.modules if m.partition(".")[0] in public]
sys.meta_path.insert(0, Gate())
import verifiers.v1 as vf
from verifiers.v1.utils.loaders import taskset_class, taskset_config_type

out = {}
for spec in specs:
    pkg, result = spec["pkg"], {}
    try:
        module, _, cls = spec["toolset"].partition(":")
        getattr(importlib.import_module(module), cls)(vf.ToolsetConfig())
        sys.path.insert(0, spec["job"])
        config_type = taskset_config_type("taskset")
        config = config_type(id="taskset", **({"num_tasks": 60} if "num_tasks" in config_type.model_fields else {}))
        tasks = list(itertools.islice(iter(taskset_class("taskset")(config)), 60))
        result["rows"] = [{"prompt": t.data.prompt_text, "answer": str(t.data.answer),
                           "world": getattr(t.data, "world", None) or {}} for t in tasks]
    except Exception as e:
        result["error"] = f"{type(e).__name__}: {e}"
    finally:
        sys.path[:] = [p for p in sys.path if p != spec["job"]]
        for name in [m for m in sys.modules if m == "taskset" or m.startswith("taskset.")]:
            del sys.modules[name]
    result["loaded"] = {p: sorted(os.path.basename(getattr(sys.modules[m], "__file__", None) or "")
                                  for m in sys.modules if m.partition(".")[0] == p) for p in spec["public"]}
    result["refused"] = {}
    for name in (f"{pkg}.items", "trainergym_kit.taskset"):  # the gate has teeth: generator and shell stay out
        try:
            importlib.import_module(name)
            result["refused"][name] = "imported"
        except ImportError as e:
            result["refused"][name] = str(e)
    out[pkg] = result
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def gated_imports(seventh) -> dict:
    """One fresh interpreter (importing verifiers is slow) that, behind an import gate refusing
    every module of a family or of the kit not in their PUBLIC_MODULES (what the sandbox
    exposes: `trainergym.probe.sandbox.public_packages`), imports each family's eval toolset and
    loads its reference job."""
    specs = [{"pkg": f.__name__.partition(".")[0], "toolset": f.EVAL_TOOLSET, "job": str(f.REFERENCE_JOB),
              "public": {d.name: list(names) for d, names in public_packages(f).items()}}
             for f in [*families().values()]]
    out = subprocess.run([sys.executable, "-c", _GATED, json.dumps(specs)], capture_output=True, text=True, timeout=600,
                         cwd=Path(__file__).parent, env=_subprocess_env())
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_toolset_and_reference_job_import_only_public_modules(fam, gated_imports):
    """Agent-written jobs see only PUBLIC_MODULES of the family package and of its public
    dependencies (the kit): the eval toolset must import with nothing else, and so must the
    reference job, whose tasks the family can read."""
    pkg = Path(fam.__file__).resolve().parent
    assert {"__init__.py", "toolset.py"} <= set(fam.PUBLIC_MODULES) <= {p.name for p in pkg.glob("*.py")}
    assert len(fam.PUBLIC_MODULES) <= 3 and not {"items.py", "taskset.py", "family.py"} & set(fam.PUBLIC_MODULES)
    assert not Path(fam.REFERENCE_JOB).resolve().is_relative_to(pkg)
    packages = public_packages(fam)
    for dep, names in packages.items():  # a dependency's public modules exist and hold no item logic
        assert {p.name for p in dep.glob("*.py")} >= set(names) and not {"items.py", "taskset.py"} & set(names), dep
    result = gated_imports[pkg.name]
    assert "error" not in result, result.get("error")
    for dep, names in packages.items():
        assert set(result["loaded"][dep.name]) <= set(names), (dep.name, result["loaded"][dep.name])
    assert all("is not a public module" in why for why in result["refused"].values()), result["refused"]
    assert len(result["rows"]) == 60
    for row in result["rows"]:  # the reference job writes tasks in the form the family reads
        assert fam.skills(row) <= set(fam.SKILL_TAGS)
        assert fam.check(fam.solve(row)["reply"], row["answer"]), row["prompt"]
