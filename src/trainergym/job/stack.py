"""The one pinned training-stack generation every job targets: one record, here.

prime-rl trains jobs with the verifiers it vendors (a submodule, not a PyPI release); the
library, its agents and adapters run verifiers 0.4.0 from PyPI. Both share the v1 authoring
API jobs are written against, so families and jobs declare `VERIFIERS_RANGE`, which both
satisfy, and the probe runs agent code under the trainer's own verifiers
(`trainergym.job.stack_env`). The pin is recorded in every job manifest and result
(docs/design.md, "The stack pin"). pyproject.toml requires exactly `VERIFIERS_VERSION`;
tests/job/test_stack.py keeps the declarations and this record equal.
"""

from importlib import metadata

from pydantic import BaseModel, ConfigDict

VERIFIERS_VERSION = "0.4.0"  # the library's own (PyPI): what the probe falls back to
VERIFIERS_RANGE = ">=0.3.1.dev62,<0.5"  # what families and jobs declare: both stacks satisfy it
PRIME_RL_REPO = "https://github.com/PrimeIntellect-ai/prime-rl"
# prime-rl HEAD of 2026-08-21 (v0.8.1.dev67): v1-only; its submodule deps/verifiers is at a60a606.
PRIME_RL_COMMIT = "559b44772e471d1538537b8805cc77f3824a5e64"
PRIME_RL_VERIFIERS_COMMIT = "a60a606ecc4d309247edf9ff92c3eabca362781f"
PRIME_RL_VERIFIERS_VERSION = "0.3.1.dev62"  # `git describe` v0.3.0-62 of that commit
PRIME_RL_RENDERERS_COMMIT = "2846a3dcd29318c1fc98de3498bab4190997af9e"  # deps/renderers
PRIME_RL_PYDANTIC_CONFIG_COMMIT = "65b15dffba82d4be19efdaf8b2b9705cc1756be8"  # deps/pydantic-config
PRIME_RL_PYTHON = "3.12"
# What prime-rl's lock resolves at the pin for what its config classes import (no torch).
PRIME_RL_CONFIGS_VERSION = "0.4.0"  # packages/prime-rl-configs, the `prime_rl.configs` classes
RENDERERS_VERSION = "0.1.12"
PYDANTIC_CONFIG_VERSION = "0.4.3"
PYDANTIC_VERSION = "2.13.4"


class StackPin(BaseModel):
    """The stack generation a job targets: the prime-rl commit, the verifiers commit (and its
    version) prime-rl trains with, its renderers and Python, and the library's own verifiers
    release. Recorded in every manifest and result."""

    model_config = ConfigDict(frozen=True)

    prime_rl_commit: str = PRIME_RL_COMMIT
    prime_rl_verifiers_commit: str = PRIME_RL_VERIFIERS_COMMIT
    prime_rl_verifiers: str = PRIME_RL_VERIFIERS_VERSION
    renderers: str = RENDERERS_VERSION
    prime_rl_python: str = PRIME_RL_PYTHON
    verifiers: str = VERIFIERS_VERSION


PIN = StackPin()


def short_stack(pin: StackPin = PIN) -> str:
    """The stack pin as a measured baseline row records it, e.g. "prime-rl 559b447, verifiers
    0.3.1.dev62 (a60a606), python 3.12"."""
    return (f"prime-rl {pin.prime_rl_commit[:7]}, verifiers {pin.prime_rl_verifiers} "
            f"({pin.prime_rl_verifiers_commit[:7]}), python {pin.prime_rl_python}")


def requirements(source: str) -> list[str]:
    """The pin as requirements for an environment that validates jobs the way prime-rl loads them
    (its config classes and its verifiers, no torch). `source` is "git" (the pinned commits) or
    "wheels" (`verifiers` and `prime-rl-configs` wheels built at them, found with --find-links)."""
    if source == "git":  # prime-rl's submodules at the pin, as its workspace sources them
        github = "git+https://github.com/PrimeIntellect-ai"
        pinned = [f"verifiers @ {github}/verifiers@{PRIME_RL_VERIFIERS_COMMIT}",
                  f"prime-rl-configs @ {github}/prime-rl@{PRIME_RL_COMMIT}#subdirectory=packages/prime-rl-configs",
                  f"renderers @ {github}/renderers@{PRIME_RL_RENDERERS_COMMIT}",
                  f"prime-pydantic-config[toml] @ {github}/pydantic-config@{PRIME_RL_PYDANTIC_CONFIG_COMMIT}"]
    else:
        pinned = [f"verifiers=={PRIME_RL_VERIFIERS_VERSION}", f"prime-rl-configs=={PRIME_RL_CONFIGS_VERSION}",
                  f"renderers=={RENDERERS_VERSION}", f"prime-pydantic-config[toml]=={PYDANTIC_CONFIG_VERSION}"]
    return [*pinned, f"pydantic=={PYDANTIC_VERSION}", "tomli", "tomli-w"]


def keep_pinned(python: str, specs: str) -> str:
    """A shell command that installs `specs` into the environment of `python` without moving a
    package already there: every installed version becomes a constraint, so a requirement that
    would replace one (prime-rl's verifiers, say) fails the install instead."""
    return (f'pins=$(mktemp) && uv pip list --python {python} --format freeze > "$pins" && '
            f'uv pip install --quiet --python {python} --constraint "$pins" {specs}')


def installed_verifiers() -> str | None:
    """The installed verifiers version, or None when verifiers is not installed."""
    try:
        return metadata.version("verifiers")
    except metadata.PackageNotFoundError:
        return None


def check_installed() -> str | None:
    """A reason the local stack cannot validate jobs, or None when it matches the pin."""
    found = installed_verifiers()
    if found != VERIFIERS_VERSION:
        return f"verifiers {found or 'missing'} is installed; jobs target verifiers {VERIFIERS_VERSION}"
    return None


def _family_distributions() -> dict[str, metadata.Distribution]:
    """The distribution that provides each installed family, by family id."""
    return {ep.name: ep.dist for ep in metadata.entry_points(group="trainergym.families")}


def install_spec(distribution: str) -> str:
    """How to install `distribution`, as installed here, into another environment on this
    host (prime-rl's): what it was installed from when that was not an index (its local
    directory or wheel, the wheel's URL, the git commit), else `name==version`."""
    import json

    dist = metadata.distribution(distribution)
    direct = dist.read_text("direct_url.json")
    if direct:
        origin = json.loads(direct)
        url = origin.get("url", "")
        if url.startswith("file://"):
            return url.removeprefix("file://")
        vcs = origin.get("vcs_info") or {}
        if vcs.get("vcs") and vcs.get("commit_id"):
            return f"{vcs['vcs']}+{url}@{vcs['commit_id']}"
        if url:
            return url
    return f"{dist.metadata['Name']}=={dist.version}"


def family_specs(family_id: str) -> list[str]:
    """The family's package as installed here, and those of its requirements installed from local
    directories (the family kit, in a checkout): no index has them. What prime-rl's env and the
    stack environment get beside a job; never trainergym."""
    import os
    import re

    family = _family_distributions().get(family_id)
    if family is None:
        raise KeyError(f"unknown family {family_id!r}")
    specs = [install_spec(family.name)]
    for requirement in family.requires or []:
        try:
            spec = install_spec(re.match(r"[A-Za-z0-9._-]+", requirement).group())
        except metadata.PackageNotFoundError:
            continue  # not installed here (an environment marker left it out)
        if os.path.isdir(spec):
            specs.append(spec)
    return specs


def install_specs(family_id: str) -> str:
    """What the scorer's install on a GPU host holds for a job of `family_id`: trainergym (the
    scorer) and the family's part (`family_specs`). prime-rl's env gets the family's part as the
    scorer's install has it (`trainergym.host.scorer_install`), never trainergym."""
    return " ".join([install_spec("trainergym"), *family_specs(family_id)])


def pod_install() -> str:
    """What a pod installs (trainergym and every installed family): `TRAINERGYM_INSTALL` if set
    (e.g. wheel URLs or a git URL while trainergym is unpublished), else name==version of each."""
    import os

    if os.environ.get("TRAINERGYM_INSTALL"):
        return os.environ["TRAINERGYM_INSTALL"]
    dists = {"trainergym": metadata.version("trainergym")}
    dists |= {d.name: d.version for d in _family_distributions().values()}
    return " ".join(f"{name}=={version}" for name, version in sorted(dists.items()))
