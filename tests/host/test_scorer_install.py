"""The scorer's own install (trainergym.host.scorer_install): a family package changed after its
hash was recorded, by whatever route (not the confined trainer, which cannot write it:
tests/host/test_confinement.py), makes the real scorer refuse, and the job fail with the named,
non-transient reason before anything is scored."""

import shutil
import sys
from pathlib import Path

import pytest

from tests.fakes.gpu_host import FAKE_TRAIN, build_scorer_install
from trainergym.host import scorer_install
from trainergym.host.confinement import Confinement
from trainergym.host.runner import Commands, Runner
from trainergym.job.result import FailureReason
from trainergym.task import hidden


def _edit(site: Path, tmp_path: Path) -> str:
    with open(site / "trainergym_calc_chain" / "family.py", "a") as f:
        f.write("\n# edited after the install was recorded\n")
    return "trainergym_calc_chain at"


def _add(site: Path, tmp_path: Path) -> str:
    (site / "trainergym_kit" / "planted.py").write_text("PAY = 1.0\n")
    return "trainergym_kit at"


def _shadow(site: Path, tmp_path: Path) -> str:
    """A copy of the family, changed, found first through a startup hook: its hash may even match
    what it claims to be, but it is not where the install put it."""
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(site / "trainergym_calc_chain", elsewhere / "trainergym_calc_chain")
    (site / "aaa_shadow.pth").write_text(f"import sys; sys.path.insert(0, {str(elsewhere)!r})\n")
    return "trainergym_calc_chain would be imported from"


@pytest.mark.parametrize("tamper", [_edit, _add, _shadow])
def test_a_tampered_family_package_is_refused(tmp_path, tamper):
    (tmp_path / "train.py").write_text(FAKE_TRAIN)
    (tmp_path / "bundle" / "package").mkdir(parents=True)
    (tmp_path / "bundle" / "rl.toml").write_text("max_steps = 3\n")  # the fake trainer publishes step 3
    commands = Commands(setup=["true"], train=[sys.executable, str(tmp_path / "train.py"), "ok", "{run_dir}"],
                        score=[*Commands().score, "--base-url", "http://127.0.0.1:9/v1"])  # refused before any call
    items = [ex.model_dump() for ex in hidden.hidden_eval("calc_chain", 3)]
    runner = Runner(tmp_path / "bundle", tmp_path / "job", lambda: items, "calc_chain", "Qwen/Qwen3-1.7B", gpu_count=2,
                    commands=commands, host=tmp_path / "host", confinement=Confinement.unconfined())
    site = build_scorer_install(runner.scorer_dir)
    named = tamper(site, tmp_path)
    result = runner.run()
    assert result.failure is FailureReason.FAMILY_TAMPERED and result.failed_phase == "pre", result.log_tail
    assert not result.transient and named in result.failure_detail
    assert not (runner.pre_cache / "calc_chain--Qwen--Qwen3-1.7B.json").exists()  # nothing was scored


def test_the_record_ignores_bytecode_and_names_the_kit(tmp_path):
    """The scorer reads bytecode only from its own cache (-X pycache_prefix), so a package's
    __pycache__ is not part of its hash; the family kit is recorded beside every family."""
    site = build_scorer_install(tmp_path / "scorer")
    assert (tmp_path / "scorer" / scorer_install.RECORD_NAME).exists()
    kit = site / "trainergym_kit"
    before = scorer_install._hash_tree([kit])
    (kit / "__pycache__").mkdir(exist_ok=True)
    (kit / "__pycache__" / "answers.cpython-311.pyc").write_bytes(b"not what the source says")
    assert scorer_install._hash_tree([kit]) == before
    (kit / "answers.py").write_text((kit / "answers.py").read_text() + "\n")
    assert scorer_install._hash_tree([kit]) != before
    assert "pycache_prefix={scorer}/pycache" in Commands().score and "-I" in Commands().score
    assert {"trainergym_kit", "trainergym_calc_chain", "trainergym_triage"} <= set(scorer_install.packages())


def test_prime_rls_env_gets_the_family_as_the_scorer_has_it():
    """The family and its kit, never trainergym (it pins a verifiers prime-rl does not train with)."""
    specs = scorer_install.specs("calc_chain").split()
    assert len(specs) == 2 and specs[0].endswith("envs/calc_chain") and specs[1].endswith("envs/kit")
    with pytest.raises(KeyError):
        scorer_install.specs("no_such_family")
