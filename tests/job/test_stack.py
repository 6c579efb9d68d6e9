import tomllib
from pathlib import Path

from trainergym.job import stack


def test_pyproject_pins_the_same_verifiers_as_the_stack_module():
    deps = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]["dependencies"]
    assert f"verifiers=={stack.VERIFIERS_VERSION}" in deps
    assert stack.check_installed() is None
    assert stack.PIN.prime_rl_commit == stack.PRIME_RL_COMMIT
