"""Marks for tests that need something this host may not have."""

import pytest


def _bwrap() -> bool:
    from trainergym.probe.sandbox import Sandbox

    return Sandbox().kind == "bwrap"


# Tests of what only bubblewrap guarantees (hidden files, process caps) need it installed
# (`apt-get install bubblewrap`; .ci/run does it); elsewhere they are skipped with this reason.
requires_bwrap = pytest.mark.skipif(not _bwrap(), reason="bubblewrap is not installed (apt-get install bubblewrap)")
