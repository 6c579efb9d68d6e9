"""The stack environment: a Python of the pin holding the verifiers prime-rl trains with and
prime-rl's own config classes, where the probe runs agent code and checks the rendered rl.toml.

A job is trained under prime-rl's vendored verifiers (`stack.PRIME_RL_VERIFIERS_VERSION`), not
the library's, so the probe should load, score and configure it there too. The environment is
built once by uv and cached under `TRAINERGYM_STACK_DIR` (default `~/.cache/trainergym/stack`),
keyed by everything it is built from; the family packages go in as installed here (editable
from a checkout, so their source stays where the sandbox masks it) without moving a pinned
package. Its sources, in order:

- `TRAINERGYM_STACK_WHEELS`: a directory of wheels built at the pin (`verifiers` and
  `prime-rl-configs`, as `../shared/prime-rl-pin` holds them), the rest from the index;
- else git at the pinned commits (needs GitHub).

The probe never waits on a network it may not have: it builds offline (`ensure()`, from uv's
cache and the wheels) unless `trainergym stack --build` was asked to fetch; when neither works it
runs under the library's verifiers and says so in one line (`Stack.why_not`).
"""

from __future__ import annotations

import fcntl
import glob
import hashlib
import json
import os
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from trainergym.job import stack

RETRY_SECONDS = 3600.0  # a failed build is not retried by probes for this long (unless its inputs change)
BUILD_TIMEOUT = 900.0


@dataclass(frozen=True)
class Stack:
    """Where agent code runs: `python` and the paths it needs visible (prefix, base prefix,
    site-packages), the verifiers it has, whether prime-rl's config classes are there, what it
    was built from; `why_not` says why this is the library's own environment instead of the pin's."""

    python: str
    paths: tuple[str, ...]
    verifiers: str
    prime_rl_configs: bool
    source: str
    why_not: str = ""

    def __post_init__(self):
        object.__setattr__(self, "paths", tuple(self.paths))  # read back from JSON as a list

    @property
    def pinned(self) -> bool:
        """Whether this is prime-rl's stack (not the library's fallback)."""
        return not self.why_not

    def describe(self) -> str:
        """One line for reports."""
        if self.pinned:
            return (f"prime-rl's stack at {stack.PRIME_RL_COMMIT[:7]} (verifiers {self.verifiers}, built from "
                    f"{self.source})")
        return f"the library's verifiers {self.verifiers}, not prime-rl's {stack.PRIME_RL_VERIFIERS_VERSION}: {self.why_not}"


class StackUnavailable(RuntimeError):
    """The pin's environment cannot be built here; the message says why and what to do."""


def _interpreter_paths(python: str) -> tuple[str, tuple[str, ...]]:
    """(verifiers version or "", the interpreter's prefix, base prefix and site-packages)."""
    code = ("import sys, site, json\ntry:\n from importlib.metadata import version; v = version('verifiers')\n"
            "except Exception:\n v = ''\nprint(json.dumps([v, [sys.prefix, sys.base_prefix, *site.getsitepackages()]]))")
    out = subprocess.run([python, "-I", "-c", code], capture_output=True, text=True, timeout=60, check=True)
    version, paths = json.loads(out.stdout)
    return version, tuple(paths)


def library(why_not: str = "TRAINERGYM_STACK=library") -> Stack:
    """The library's own environment, where the probe runs when the pin's cannot be had."""
    import site
    import sys

    return Stack(python=sys.executable, paths=(sys.prefix, sys.base_prefix, *site.getsitepackages()),
                 verifiers=stack.installed_verifiers() or "missing", prime_rl_configs=False, source="this environment",
                 why_not=why_not)


def cache_dir() -> Path:
    """Where built stacks live."""
    root = os.environ.get("TRAINERGYM_STACK_DIR")
    return Path(root) if root else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "trainergym" / "stack"


def wheels_dir() -> Path | None:
    """`TRAINERGYM_STACK_WHEELS`, when set."""
    value = os.environ.get("TRAINERGYM_STACK_WHEELS")
    return Path(value).expanduser().resolve() if value else None


def find_python() -> str | None:
    """A Python of the pin's minor version: `TRAINERGYM_STACK_PYTHON`, else what uv finds, else
    pyenv's (uv may not look there). What uv and pyenv found is remembered in the cache directory
    for an hour under the same search environment (PATH, working directory, uv and pyenv
    settings), while that interpreter is there: asking uv can take most of a second (it runs
    every interpreter on the PATH, pyenv's shims too), which every process's first probe paid."""
    if os.environ.get("TRAINERGYM_STACK_PYTHON"):
        return os.environ["TRAINERGYM_STACK_PYTHON"]
    uv = shutil.which("uv")
    facts = {"python": stack.PRIME_RL_PYTHON, "cwd": os.getcwd(), "uv": [uv, _mtime(uv)],
             "env": sorted((k, v) for k, v in os.environ.items() if k in ("PATH", "PYENV_ROOT", "PYENV_VERSION", "HOME")
                           or k.startswith("UV_"))}
    memo = cache_dir() / f"python-{_key(facts)}.json"
    try:
        found = json.loads(memo.read_text())
        if time.time() - found["at"] < RETRY_SECONDS and os.access(found["python"], os.X_OK):
            return found["python"]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    python = _search_python(uv)
    if python:
        try:
            memo.parent.mkdir(parents=True, exist_ok=True)
            tmp = memo.with_name(f".{memo.name}.{os.getpid()}")
            tmp.write_text(json.dumps({"python": python, "at": time.time()}))
            os.replace(tmp, memo)
        except OSError:
            pass
    return python


def _mtime(path: str | None) -> float | None:
    try:
        return os.stat(path).st_mtime if path else None
    except OSError:
        return None


def _search_python(uv: str | None) -> str | None:
    """What uv finds, else pyenv's newest, of the pin's minor version."""
    if uv:
        found = subprocess.run([uv, "python", "find", "--no-python-downloads", stack.PRIME_RL_PYTHON], capture_output=True,
                               text=True, timeout=60)
        if found.returncode == 0 and found.stdout.strip():
            return found.stdout.strip()
    root = os.environ.get("PYENV_ROOT") or str(Path.home() / ".pyenv")
    found = glob.glob(f"{root}/versions/{stack.PRIME_RL_PYTHON}.*/bin/python{stack.PRIME_RL_PYTHON}")
    return max(found, default=None)


def family_specs() -> list[str]:
    """Every family's part (`stack.family_specs`) as installed here, editable for a source
    directory (its source stays where the sandbox masks it)."""
    specs: list[str] = []
    for family_id in sorted({ep.name for ep in metadata.entry_points(group="trainergym.families")}):
        for spec in stack.family_specs(family_id):
            spec = f"-e {spec}" if os.path.isdir(spec) else spec
            if spec not in specs:
                specs.append(spec)
    return specs


def _inputs(source: str, python: str) -> dict:
    wheels = wheels_dir()
    return {"pin": stack.PIN.model_dump(), "requirements": stack.requirements(source), "python": python,
            "wheels": sorted((p.name, p.stat().st_size) for p in wheels.glob("*.whl")) if wheels else None,
            "families": family_specs()}


def _key(inputs: dict) -> str:
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:16]


def _run(argv: list[str], env: dict, log) -> None:
    log.write(f"$ {' '.join(argv)}\n")
    log.flush()
    done = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, env=env, timeout=BUILD_TIMEOUT)
    if done.returncode != 0:
        raise subprocess.CalledProcessError(done.returncode, argv)


def build(offline: bool = False) -> Stack:
    """The pin's environment, built now unless it already is (then only read back). Raises
    StackUnavailable with a one-line reason and the build log's path."""
    uv = shutil.which("uv")
    python = find_python()
    if uv is None:
        raise StackUnavailable("uv is not on PATH")
    if python is None:
        raise StackUnavailable(f"no Python {stack.PRIME_RL_PYTHON} found (set TRAINERGYM_STACK_PYTHON, or "
                               f"`uv python install {stack.PRIME_RL_PYTHON}`)")
    wheels = wheels_dir()
    if wheels is not None and not any(wheels.glob("verifiers-*.whl")):
        raise StackUnavailable(f"TRAINERGYM_STACK_WHEELS={wheels} holds no verifiers wheel")
    source = "wheels" if wheels else "git"
    inputs = _inputs(source, python)
    key = _key(inputs)
    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    home, ready, failed = root / key, root / key / "ready.json", root / f"{key}.failed"
    with open(root / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build per key on this host; the others wait and read it
        if ready.is_file():
            return Stack(**json.loads(ready.read_text()))
        if offline and failed.is_file() and time.time() - failed.stat().st_mtime < RETRY_SECONDS:
            raise StackUnavailable(failed.read_text().strip())
        shutil.rmtree(home, ignore_errors=True)
        home.mkdir()
        env = {**os.environ, **({"UV_OFFLINE": "1"} if offline else {})}
        env.pop("VIRTUAL_ENV", None)
        venv_python = str(home / "venv" / "bin" / "python")
        log_path = root / f"{key}.log"
        try:
            with open(log_path, "w") as log:
                _run([uv, "venv", "--quiet", "--python", python, str(home / "venv")], env, log)
                _run([uv, "pip", "install", "--quiet", "--python", venv_python,
                      *(["--find-links", str(wheels)] if wheels else []), *stack.requirements(source)], env, log)
                _run(["bash", "-c", stack.keep_pinned(venv_python, " ".join(inputs["families"]))], env, log)
            version, paths = _interpreter_paths(venv_python)
        except (OSError, subprocess.SubprocessError, ValueError) as e:
            tail = log_path.read_text(errors="replace").strip().splitlines()[-1:] if log_path.exists() else []
            why = (f"building it from {source} {'offline ' if offline else ''}failed "
                   f"({tail[0].strip()[:200] if tail else type(e).__name__}; log: {log_path})")
            failed.write_text(why + "\n")
            shutil.rmtree(home, ignore_errors=True)
            raise StackUnavailable(why) from None
        if version != stack.PRIME_RL_VERIFIERS_VERSION:
            raise StackUnavailable(f"the built stack has verifiers {version}, not {stack.PRIME_RL_VERIFIERS_VERSION}")
        built = Stack(python=venv_python, paths=paths, verifiers=version, prime_rl_configs=True,
                      source=f"wheels in {wheels}" if wheels else "git at the pinned commits")
        failed.unlink(missing_ok=True)
        ready.write_text(json.dumps(built.__dict__))
        return built


_lock = threading.Lock()
_current: Stack | None = None


def ensure() -> Stack:
    """The environment the probe runs agent code in, for this process: the pin's (built offline
    on first need), else the library's with the reason. `TRAINERGYM_STACK=library` asks for the
    library's."""
    global _current
    with _lock:
        if _current is None:
            if os.environ.get("TRAINERGYM_STACK", "").strip().lower() == "library":
                _current = library()
            else:
                try:
                    _current = build(offline=True)
                except StackUnavailable as e:
                    _current = library(f"{e}; run `trainergym stack --build`")
        return _current


def reset() -> None:
    """Forget this process's choice (after the environment variables changed)."""
    global _current
    with _lock:
        _current = None
