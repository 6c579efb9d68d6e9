"""Shared fixtures. Tests never touch the user's data directory: it is a per-session
temporary directory."""

import atexit
import os
import shutil
import tempfile

os.environ["TRAINERGYM_DATA_DIR"] = tempfile.mkdtemp(prefix="tg-test-data-")
atexit.register(shutil.rmtree, os.environ["TRAINERGYM_DATA_DIR"], ignore_errors=True)
# Fixed secrets keep the suite deterministic; tests/task/test_hidden.py covers the secret files. Both
# are 128+ bits (32+ hex characters), so pinning them draws no WeakSeedWarning.
os.environ["TRAINERGYM_HIDDEN_SEED"] = "7e57c0ffee5eed0f0a1e09e05c17e00d"
os.environ["TRAINERGYM_INSTALL_SECRET"] = "1757a11c0ffee5ec7e70f7e57ea1e0d0" * 2

import pytest  # noqa: E402

from trainergym.task.spec import load_task  # noqa: E402


@pytest.fixture(scope="session")
def task():
    return load_task("calc_chain")


@pytest.fixture(scope="session")
def reference_files():
    from trainergym.agents.reference import reference_job_files

    return reference_job_files("calc_chain")


