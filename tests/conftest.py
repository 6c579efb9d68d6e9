"""Shared fixtures. Tests never touch the user's data directory: it is a per-session
temporary directory."""

import atexit
import os
import shutil
import tempfile
from pathlib import Path

os.environ["TRAINERGYM_DATA_DIR"] = tempfile.mkdtemp(prefix="tg-test-data-")
atexit.register(shutil.rmtree, os.environ["TRAINERGYM_DATA_DIR"], ignore_errors=True)
# Fixed secrets keep the suite deterministic; tests/task/test_hidden.py covers the secret files. Both
# are 128+ bits (32+ hex characters), so pinning them draws no WeakSeedWarning.
os.environ["TRAINERGYM_HIDDEN_SEED"] = "7e57c0ffee5eed0f0a1e09e05c17e00d"
os.environ["TRAINERGYM_INSTALL_SECRET"] = "1757a11c0ffee5ec7e70f7e57ea1e0d0" * 2

# Probes run agent code under prime-rl's own stack, built (offline: tests never reach an index)
# from the pin's wheels beside the checkout, as CI does (trainergym.job.stack_env).
_PIN_WHEELS = Path(__file__).resolve().parents[2] / "shared" / "prime-rl-pin"
if "TRAINERGYM_STACK_WHEELS" not in os.environ and _PIN_WHEELS.is_dir():
    os.environ["TRAINERGYM_STACK_WHEELS"] = str(_PIN_WHEELS)
os.environ["UV_OFFLINE"] = "1"

import pytest  # noqa: E402

from trainergym.task.spec import load_task  # noqa: E402


@pytest.fixture(scope="session")
def task():
    return load_task("calc_chain")


@pytest.fixture(scope="session")
def reference_files():
    from trainergym.agents.reference import reference_job_files

    return reference_job_files("calc_chain")




def _missing_extra(report) -> bool:
    from tests.marks import EXTRA_HINT

    return report.skipped and EXTRA_HINT in str(report.longrepr)


# A newcomer's bare `uv run pytest` skips the tests of extras it lacks, naming the extra; under
# CI=true every extra is installed, so such a skip means an install step is missing: a failure.
if os.environ.get("CI") == "true":

    @pytest.hookimpl(hookwrapper=True)
    def pytest_make_collect_report(collector):
        report = (yield).get_result()
        if _missing_extra(report):
            report.outcome = "failed"

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(item, call):
        report = (yield).get_result()
        if _missing_extra(report):
            report.outcome = "failed"


@pytest.hookimpl(tryfirst=True)  # before `-m` selects
def pytest_collection_modifyitems(items):
    """A test of prime-rl's stack is marked `stack`: a bare clone cannot build it offline (the first
    tier skips it), and CI's second tier runs it once `trainergym stack --build` has."""
    for item in items:
        if "pinned_stack" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.stack)


@pytest.fixture(scope="session")
def pinned_stack():
    """prime-rl's stack (its verifiers and config classes) built from the pin's wheels. Skipped
    with the reason where they are absent; under CI=true that is a failure."""
    from trainergym.job import stack_env

    wheels = stack_env.wheels_dir()
    try:
        if wheels is None or not wheels.is_dir():
            raise stack_env.StackUnavailable(f"the pin's wheels are absent ({_PIN_WHEELS}; set TRAINERGYM_STACK_WHEELS)")
        return stack_env.build(offline=True)
    except stack_env.StackUnavailable as e:
        if os.environ.get("CI") == "true":
            pytest.fail(f"prime-rl's stack is required under CI: {e}")
        pytest.skip(f"prime-rl's stack is not available: {e}")
