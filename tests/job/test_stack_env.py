"""The stack environment (trainergym.job.stack_env) against code no one here wrote: prime-rl's
own config classes and the verifiers prime-rl trains with, from the pin's wheels."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainergym.job import stack, stack_env
from trainergym.job.bundle import build_bundle, parse_job
from trainergym.task.spec import families, load_task

# Parses each rendered rl.toml as prime-rl's `rl @ rl.toml` does, with the bundle's package
# importable (prime-rl narrows the env config by taskset id, which imports the taskset).
_VALIDATE = """
import contextlib, io, json, sys
from pydantic_config import cli
from prime_rl.configs.rl import RLConfig

out = {}
for package, rl_toml in json.loads(sys.argv[1]):
    sys.path.insert(0, package)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            config = cli(RLConfig, args=["@", rl_toml])
        env = config.orchestrator.train.source[0].env
        from verifiers.v1.utils.loaders import environment_class  # the class verifiers will run
        ran = environment_class(env.taskset.id, env.id)
        out[rl_toml] = {"ok": True, "steps": config.max_steps, "seq_len": config.seq_len,
                        "env": f"{ran.__module__}.{ran.__name__}"}
    except BaseException as e:
        out[rl_toml] = {"ok": False, "error": f"{type(e).__name__}: {e}"[-600:]}
    sys.path.remove(package)
print(json.dumps(out))
"""


def _reference_bundles(tmp_path) -> dict[str, Path]:
    out = {}
    for family, fam in sorted(families().items()):
        job, _ = parse_job((Path(fam.REFERENCE_JOB) / "job.toml").read_text())
        out[family] = build_bundle(Path(fam.REFERENCE_JOB), tmp_path / family, job, load_task(family)).root
    return out


def _validate(stack_python: str, bundles: list[Path]) -> dict:
    pairs = [[str(b / "package"), str(b / "rl.toml")] for b in bundles]
    done = subprocess.run([stack_python, "-I", "-c", _VALIDATE, json.dumps(pairs)], capture_output=True, text=True,
                          timeout=600, cwd=bundles[0])
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def test_every_family_reference_rl_toml_validates_with_prime_rl_config_classes(pinned_stack, tmp_path):
    bundles = _reference_bundles(tmp_path)
    verdicts = _validate(pinned_stack.python, list(bundles.values()))
    for family, root in bundles.items():
        verdict = verdicts[str(root / "rl.toml")]
        assert verdict["ok"], (family, verdict)
        assert verdict["seq_len"] == parse_job((root / "workspace" / "job.toml").read_text())[0].prime_rl.seq_len


def test_an_env_the_job_exports_is_not_the_env_that_trains_it(pinned_stack, tmp_path):
    """With no env id, verifiers runs an `Env` the taskset's package exports: its run() and its
    finalize() (cross-trace rewards) would train a job the probe never sees. The rendered
    rl.toml pins verifiers' own single-agent env."""
    root = _reference_bundles(tmp_path)["calc_chain"]
    (init,) = (root / "package").glob("job_*/__init__.py")
    init.write_text(init.read_text() + (
        "\nfrom verifiers.v1.envs.single_agent import SingleAgentEnv as _Base\n"
        "class PaysEveryone(_Base):\n"
        "    async def finalize(self, task, episode):\n"
        "        for t in episode.traces:\n"
        "            t.record_reward('bonus', 1.0)\n"
        "__all__ = [*globals().get('__all__', []), 'PaysEveryone']\n"))
    verdict = _validate(pinned_stack.python, [root])[str(root / "rl.toml")]
    assert verdict["ok"], verdict
    assert verdict["env"] == "verifiers.v1.envs.single_agent.env.SingleAgentEnv", verdict
    # ... where an unpinned config would have run the job's own
    text = (root / "rl.toml").read_text()
    (root / "rl.toml").write_text(text.replace('id = "single_agent"', 'id = ""', 1))
    assert _validate(pinned_stack.python, [root])[str(root / "rl.toml")]["env"].endswith("PaysEveryone")


def test_prime_rl_config_classes_refuse_what_they_should(pinned_stack, tmp_path):
    """The check has teeth: a key prime-rl does not know, and a value of the wrong type."""
    root = _reference_bundles(tmp_path)["calc_chain"]
    text = (root / "rl.toml").read_text()
    (root / "rl.toml").write_text(text.replace("max_steps =", "max_stepz =", 1))
    bad_key = _validate(pinned_stack.python, [root])[str(root / "rl.toml")]
    (root / "rl.toml").write_text(text.replace("seq_len =", 'seq_len = "long"\nxseq_len =', 1))
    bad_type = _validate(pinned_stack.python, [root])[str(root / "rl.toml")]
    assert not bad_key["ok"] and "stepz" in bad_key["error"], bad_key  # prime-rl names it --max-stepz
    assert not bad_type["ok"] and "seq" in bad_type["error"] and "long" in bad_type["error"], bad_type


def _stack_verifiers(python: str) -> str:
    return subprocess.run([python, "-I", "-c", "from importlib.metadata import version; print(version('verifiers'))"],
                          capture_output=True, text=True, timeout=60, check=True).stdout.strip()


def test_the_built_stack_is_the_pin(pinned_stack):
    assert pinned_stack.pinned and pinned_stack.prime_rl_configs
    assert _stack_verifiers(pinned_stack.python) == stack.PRIME_RL_VERIFIERS_VERSION == pinned_stack.verifiers
    assert stack_env.build(offline=True) == pinned_stack  # built once, then read back


def test_installing_the_families_into_the_pin_leaves_its_verifiers(pinned_stack, tmp_path):
    """Into a fresh environment of the pin: the families go in without moving verifiers, and a
    package that would replace it is refused with verifiers untouched."""
    venv = tmp_path / "venv"
    python = str(venv / "bin" / "python")
    env = {**os.environ, "UV_OFFLINE": "1"}
    env.pop("VIRTUAL_ENV", None)
    subprocess.run(["uv", "venv", "-q", "--python", pinned_stack.paths[1] + "/bin/python3", str(venv)], check=True, env=env)
    subprocess.run(["uv", "pip", "install", "-q", "--python", python, "--find-links", str(stack_env.wheels_dir()),
                    *stack.requirements("wheels")], check=True, env=env)
    families_in = subprocess.run(["bash", "-c", stack.keep_pinned(python, " ".join(stack_env.family_specs()))],
                                 capture_output=True, text=True, env=env)
    assert families_in.returncode == 0, families_in.stderr[-1500:]
    assert _stack_verifiers(python) == stack.PRIME_RL_VERIFIERS_VERSION

    newer = tmp_path / "wants_newer"
    (newer / "wants_newer").mkdir(parents=True)
    (newer / "wants_newer" / "__init__.py").write_text("")
    (newer / "pyproject.toml").write_text('[project]\nname = "wants-newer"\nversion = "0.1"\n'
                                          'dependencies = ["verifiers>=0.4.0"]\n[build-system]\nrequires = ["hatchling"]\n'
                                          'build-backend = "hatchling.build"\n')
    moved = subprocess.run(["bash", "-c", stack.keep_pinned(python, str(newer))], capture_output=True, text=True, env=env)
    assert moved.returncode != 0 and "verifiers" in moved.stderr
    assert _stack_verifiers(python) == stack.PRIME_RL_VERIFIERS_VERSION


def test_without_the_pin_the_library_stack_runs_and_says_why(monkeypatch, tmp_path):
    monkeypatch.setenv("TRAINERGYM_STACK_WHEELS", str(tmp_path))  # holds no wheels
    monkeypatch.setenv("TRAINERGYM_STACK_DIR", str(tmp_path / "cache"))
    stack_env.reset()
    try:
        with pytest.raises(stack_env.StackUnavailable, match="holds no verifiers wheel"):
            stack_env.build(offline=True)
        chosen = stack_env.ensure()
        assert not chosen.pinned and chosen.python == sys.executable and chosen.verifiers == stack.VERIFIERS_VERSION
        line = chosen.describe()
        assert "\n" not in line and "library's verifiers 0.4.0" in line and "trainergym stack --build" in line
    finally:
        stack_env.reset()


def test_a_failed_build_is_not_retried_by_every_probe(monkeypatch, tmp_path):
    """Offline, a failure is remembered for an hour (with its log), so probes do not pay for it."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "verifiers-0.0.1-py3-none-any.whl").write_bytes(b"not a wheel")
    monkeypatch.setenv("TRAINERGYM_STACK_WHEELS", str(wheels))
    monkeypatch.setenv("TRAINERGYM_STACK_DIR", str(tmp_path / "cache"))
    with pytest.raises(stack_env.StackUnavailable, match="failed") as first:
        stack_env.build(offline=True)
    calls = []
    monkeypatch.setattr(stack_env, "_run", lambda *a: calls.append(a))
    with pytest.raises(stack_env.StackUnavailable) as again:
        stack_env.build(offline=True)
    assert not calls and str(again.value) == str(first.value)
    assert "log: " in str(first.value) and Path(str(first.value).rsplit("log: ", 1)[1].rstrip(")")).is_file()


def test_the_python_found_is_remembered_under_the_same_search(monkeypatch, tmp_path):
    """Asking uv for the pin's Python can take most of a second, which every process's first probe
    paid: its answer is remembered under the same search environment while the interpreter is there."""
    monkeypatch.delenv("TRAINERGYM_STACK_PYTHON", raising=False)
    monkeypatch.setenv("TRAINERGYM_STACK_DIR", str(tmp_path / "cache"))
    python = tmp_path / "python3.12"
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    calls = []
    monkeypatch.setattr(stack_env, "_search_python", lambda uv: calls.append(uv) or str(python))
    assert stack_env.find_python() == stack_env.find_python() == str(python) and len(calls) == 1
    monkeypatch.setenv("UV_PYTHON_INSTALL_DIR", str(tmp_path))  # another search: asked again
    assert stack_env.find_python() == str(python) and len(calls) == 2
    python.unlink()  # gone: asked again
    stack_env.find_python()
    assert len(calls) == 3
