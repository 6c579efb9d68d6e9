"""Marks for tests that need something this host may not have."""

import pytest

# The reason of every skip for a missing optional extra ends with how to install it; conftest turns
# such a skip into a failure under CI=true, where CI installs every extra.
EXTRA_HINT = "uv sync --extra"


def extra_reason(what: str, extra: str) -> str:
    return f"{what} needs the {extra} extra: {EXTRA_HINT} {extra}"


def import_extra(module: str, what: str, extra: str):
    """Import `module` for a test module of an optional extra, or skip the whole module with a
    reason naming the extra (a newcomer's bare `uv run pytest` has none installed)."""
    return pytest.importorskip(module, reason=extra_reason(what, extra))


def _bwrap() -> bool:
    from trainergym.probe.sandbox import Sandbox

    return Sandbox().kind == "bwrap"


# Tests of what only bubblewrap guarantees (hidden files, process caps) need it installed
# (`apt-get install bubblewrap`; .ci/run does it); elsewhere they are skipped with this reason.
requires_bwrap = pytest.mark.skipif(not _bwrap(), reason="bubblewrap is not installed (apt-get install bubblewrap)")
