"""The stack pin (trainergym.job.stack) agrees with what the project declares and installs:
pyproject.toml's requirement, the lock file, and the verifiers this environment runs."""

import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from trainergym.job import stack

ROOT = Path(__file__).resolve().parents[2]


def test_pyproject_requires_exactly_the_pinned_verifiers():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    verifiers = [r for r in map(Requirement, deps) if r.name == "verifiers"]
    assert len(verifiers) == 1, verifiers
    assert str(verifiers[0].specifier) == f"=={stack.VERIFIERS_VERSION}"
    assert verifiers[0].marker is None and not verifiers[0].extras  # no platform or extra escapes the pin


def test_the_lock_resolves_the_pinned_verifiers():
    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    versions = {p["version"] for p in lock["package"] if p["name"] == "verifiers"}
    assert versions == {stack.VERIFIERS_VERSION}


def test_this_environment_runs_the_pinned_verifiers():
    assert stack.installed_verifiers() == stack.VERIFIERS_VERSION
    assert stack.check_installed() is None


@pytest.mark.parametrize("found, says", [("0.3.9", "verifiers 0.3.9 is installed"), (None, "verifiers missing is installed")])
def test_any_other_verifiers_is_a_reason_not_to_validate(monkeypatch, found, says):
    monkeypatch.setattr(stack, "installed_verifiers", lambda: found)
    assert stack.check_installed() == f"{says}; jobs target verifiers {stack.VERIFIERS_VERSION}"


def _declared_verifiers(pyproject: Path) -> str:
    deps = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    return next(str(r.specifier) for r in map(Requirement, deps) if r.name == "verifiers")


def test_families_and_the_kit_declare_the_range_both_stacks_satisfy():
    """A family that asked for verifiers>=0.4.0 would make setup replace prime-rl's verifiers."""
    from packaging.specifiers import SpecifierSet

    projects = sorted((ROOT / "envs").glob("*/pyproject.toml")) + [ROOT / "tests/families/seventh/pyproject.toml"]
    assert len(projects) >= 7
    for project in projects:
        assert SpecifierSet(_declared_verifiers(project)) == SpecifierSet(stack.VERIFIERS_RANGE), project
    for version in (stack.PRIME_RL_VERIFIERS_VERSION, stack.VERIFIERS_VERSION):
        assert SpecifierSet(stack.VERIFIERS_RANGE).contains(version, prereleases=True), version


def test_the_record_names_full_commits():
    for commit in (stack.PRIME_RL_COMMIT, stack.PRIME_RL_VERIFIERS_COMMIT, stack.PRIME_RL_RENDERERS_COMMIT,
                   stack.PRIME_RL_PYDANTIC_CONFIG_COMMIT):
        assert len(commit) == 40 and int(commit, 16) >= 0
    assert all(commit in " ".join(stack.requirements("git")) for commit in (stack.PRIME_RL_COMMIT,
                                                                            stack.PRIME_RL_VERIFIERS_COMMIT))
