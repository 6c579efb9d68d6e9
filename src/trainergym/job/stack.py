"""The one pinned training-stack generation every job targets.

Jobs are written against the verifiers v1 authoring API as released in verifiers 0.4.0 and
trained by prime-rl at a commit whose vendored verifiers shares that authoring core
(docs/design.md, "The stack pin"). The pin is recorded in every job manifest and result.
pyproject.toml requires exactly `VERIFIERS_VERSION` (tests/job/test_stack.py keeps them equal).
"""

from importlib import metadata

from pydantic import BaseModel, ConfigDict

VERIFIERS_VERSION = "0.4.0"
PRIME_RL_REPO = "https://github.com/PrimeIntellect-ai/prime-rl"
# prime-rl HEAD of 2026-08-21 (v0.8.1.dev67): v1-only, vendors verifiers a60a606.
PRIME_RL_COMMIT = "559b447"
PRIME_RL_VENDORED_VERIFIERS = "a60a606"
PRIME_RL_PYTHON = "3.12"


class StackPin(BaseModel):
    """The stack generation a job targets: the verifiers release, the prime-rl commit, and the
    verifiers commit and Python that prime-rl uses. Recorded in every manifest and result."""

    model_config = ConfigDict(frozen=True)

    verifiers: str = VERIFIERS_VERSION
    prime_rl_commit: str = PRIME_RL_COMMIT
    prime_rl_vendored_verifiers: str = PRIME_RL_VENDORED_VERIFIERS
    prime_rl_python: str = PRIME_RL_PYTHON


PIN = StackPin()


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
    host (prime-rl's): its local directory when it was installed from one (a checkout or
    workspace member), else `name==version`."""
    import json

    dist = metadata.distribution(distribution)
    direct = dist.read_text("direct_url.json")
    if direct:
        url = json.loads(direct).get("url", "")
        if url.startswith("file://"):
            return url.removeprefix("file://")
    return f"{dist.metadata['Name']}=={dist.version}"


def install_specs(family_id: str) -> str:
    """What a job's setup installs into prime-rl's env beside the job: trainergym (its scorer)
    and the family's package (its taskset, tools and rewards), as installed here, with those of
    its requirements installed from local directories (the family kit, in a checkout): no
    index has them."""
    import os
    import re

    family = _family_distributions().get(family_id)
    if family is None:
        raise KeyError(f"unknown family {family_id!r}")
    specs = [install_spec("trainergym"), install_spec(family.name)]
    for requirement in family.requires or []:
        try:
            spec = install_spec(re.match(r"[A-Za-z0-9._-]+", requirement).group())
        except metadata.PackageNotFoundError:
            continue  # not installed here (an environment marker left it out)
        if os.path.isdir(spec):
            specs.append(spec)
    return " ".join(specs)


def pod_install() -> str:
    """What a pod installs (trainergym and every installed family): `TRAINERGYM_INSTALL` if set
    (e.g. wheel URLs or a git URL while trainergym is unpublished), else name==version of each."""
    import os

    if os.environ.get("TRAINERGYM_INSTALL"):
        return os.environ["TRAINERGYM_INSTALL"]
    dists = {"trainergym": metadata.version("trainergym")}
    dists |= {d.name: d.version for d in _family_distributions().values()}
    return " ".join(f"{name}=={version}" for name, version in sorted(dists.items()))
