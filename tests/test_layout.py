"""The package boundaries of docs/design.md, read from the imports of every module.

Each zone may import only the zones listed for it (function-level imports included): the GPU
host never imports env or probe; the code that runs inside the sandbox imports nothing of
trainergym; infra never imports backends. A new import across a boundary fails here.
"""

import ast
import shutil
from pathlib import Path

import trainergym
from trainergym.paths import LIBRARY

# zone -> the zones it may import (its own is always allowed)
ALLOWED = {
    "paths": set(),
    "task": {"paths"},
    "job": {"task", "paths"},
    "probe": {"task", "job", "paths"},
    "infra": {"task", "job", "paths"},
    "host": {"task", "job", "paths"},
    "mini": {"task", "job", "paths"},
    "backends": {"task", "job", "infra", "host", "mini", "paths"},
    "env": {"task", "job", "probe", "backends", "paths"},
    "agents": {"task", "job", "infra", "backends", "env", "paths"},
    "adapters": {"task", "job", "backends", "env", "agents", "paths"},
    "__init__": {"task", "env", "adapters"},
    "doctor": {"job", "probe", "infra", "host", "paths"},
    "cli": {"task", "job", "probe", "infra", "host", "mini", "backends", "env", "agents", "adapters", "doctor", "paths"},
}
# Single modules a zone may import beyond its zones: leaf records that import nothing of trainergym,
# or modules whose every trainergym import is open to that zone too (so nothing beyond comes along).
MODULES = {
    "task": {"trainergym.job.stack"},  # the pin: measured baselines are the bar only on the stack jobs run on
    # the mini backend runs a job's rewards in the probe's own sandbox, confined exactly as the probe
    # confines it (the sandbox and its cgroups; no check, no judge of the probe)
    "backends": {"trainergym.probe.sandbox", "trainergym.probe.cgroup", "trainergym.probe.seccomp"},
}
SEALED = {"probe/child.py", "probe/confine.py"}  # run inside the sandbox: no trainergym at all


def _zone(rel: Path) -> str:
    return rel.parts[0].removesuffix(".py")


def _imports(tree: ast.AST) -> list[tuple[int, str, str]]:
    """(line, trainergym zone or "" for the package itself, module) of every trainergym import."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [f"{node.module}.{a.name}" if node.module == "trainergym" else node.module for a in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "trainergym":
                found.append((node.lineno, parts[1] if len(parts) > 1 else "", name))
    return found


def violations(root: Path) -> list[str]:
    """Every import in the package at `root` that crosses a boundary, as `path:line: message`."""
    out = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        zone = _zone(rel)
        for line, target, module in _imports(ast.parse(path.read_text(), str(path))):
            where = f"{rel}:{line}"
            if rel.as_posix() in SEALED:
                out.append(f"{where}: runs inside the sandbox and must not import trainergym")
            elif zone not in ALLOWED:
                out.append(f"{where}: {zone!r} is not a zone of docs/design.md")
            elif target != zone and target not in ALLOWED[zone] and module not in MODULES.get(zone, ()):
                out.append(f"{where}: {zone} may not import {target or 'the trainergym package'}")
    return out


def test_the_library_keeps_its_boundaries():
    assert LIBRARY == Path(trainergym.__file__).resolve().parent
    assert violations(LIBRARY) == []


def test_every_zone_is_a_package_or_module_of_the_library():
    zones = {_zone(p.relative_to(LIBRARY)) for p in LIBRARY.rglob("*.py")}
    assert zones == set(ALLOWED)


def test_a_crossing_made_on_purpose_is_caught(tmp_path):
    copy = tmp_path / "trainergym"
    shutil.copytree(LIBRARY, copy, ignore=shutil.ignore_patterns("__pycache__"))
    with open(copy / "host" / "runner.py", "a") as f:
        f.write("\n\ndef _late():\n    from trainergym.env.core import TrainerEnv  # noqa\n")
    with open(copy / "probe" / "child.py", "a") as f:
        f.write("\nimport trainergym.paths  # noqa\n")
    with open(copy / "infra" / "pool.py", "a") as f:
        f.write("\nfrom trainergym import backends  # noqa\n")
    with open(copy / "task" / "hidden.py", "a") as f:  # the pin is open to task; the rest of job is not
        f.write("\nfrom trainergym.job.stack import PIN  # noqa\nfrom trainergym.job.bundle import JobBundle  # noqa\n")
    found = violations(copy)
    assert any(v.startswith("host/runner.py:") and "host may not import env" in v for v in found), found
    assert any(v.startswith("probe/child.py:") and "must not import trainergym" in v for v in found), found
    assert any(v.startswith("infra/pool.py:") and "infra may not import backends" in v for v in found), found
    assert any(v.startswith("task/hidden.py:") and "task may not import job" in v for v in found), found
    assert len(found) == 4


def test_the_single_modules_open_to_a_zone_are_leaves():
    # What makes an exception in MODULES safe: the module imports nothing of trainergym, or only what
    # the zone it is opened to may import anyway (its zones and its other opened modules).
    for zone, modules in MODULES.items():
        for module in modules:
            path = LIBRARY.joinpath(*module.split(".")[1:]).with_suffix(".py")
            for _, target, name in _imports(ast.parse(path.read_text())):
                assert target == zone or target in ALLOWED[zone] or name in modules, (module, name)
