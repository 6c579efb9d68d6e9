"""The one pinned training-stack generation every job targets.

Jobs are written against the verifiers v1 authoring API as released in verifiers 0.4.0 and
trained by prime-rl at a commit whose vendored verifiers shares that authoring core
(docs/design.md, "The stack pin"). The pin is recorded in every job manifest and result.
pyproject.toml requires exactly `VERIFIERS_VERSION` (tests/test_stack.py keeps them equal).
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
    model_config = ConfigDict(frozen=True)

    verifiers: str = VERIFIERS_VERSION
    prime_rl_commit: str = PRIME_RL_COMMIT
    prime_rl_vendored_verifiers: str = PRIME_RL_VENDORED_VERIFIERS
    prime_rl_python: str = PRIME_RL_PYTHON


PIN = StackPin()


def installed_verifiers() -> str | None:
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
