"""The job runner: what executes one job on a GPU host.

    setup -> train (confined) -> (training processes killed) -> hidden eval written -> pre -> post -> result.json

Before anything is installed the runner counts the host's GPUs (at least two: one trains, one
serves) and writes its own `rl.toml`: the bundle's plus the `[deployment]` split of those GPUs
(`trainergym.host.deployment`). `setup` installs what the host's jobs share, under `host/`:
prime-rl at the pinned commit with all its submodules (`uv sync --locked`), the scorer's own
install (trainergym and the families, built once, its family packages hashed:
`trainergym.host.scorer_install`), then the family and the job's package into prime-rl's env
without moving a pinned package (`stack.keep_pinned`), and the base model into a shared cache.
`train` runs prime-rl on the runner's `rl.toml` with agent code confined
(`trainergym.host.confinement`): it may write only the job's `outputs/` and `home/`, not the
scorer's install, the families, prime-rl's env, the caches or the job's root. `pre` and `post`
score the base model and the trained weights on the hidden eval with the family's own scorer,
from its own install. The hidden eval is written to the host only after every training process
is gone, into a directory the job's code never saw, and agent code does not run while scoring.
Every phase has a timeout and a named failure reason. `status.json` carries a heartbeat and
progress for the pod service to report.

A runner in mode `pre` (or `pre-fresh`) is a baseline-only job, what `trainergym baselines
measure` runs: no bundle and nothing trained, so nothing of an agent's runs on the host. Setup
(without a job package) -> the hidden eval -> pre only, through the same scorer and pre-score
cache as a training job's (`pre-fresh` scores again and replaces the cached score); one GPU
suffices, since nothing trains beside the served model.

The real commands are the defaults (`Commands`); tests and dry runs swap in fake executables to
exercise the orchestration (in code, or as the host's owner with `TRAINERGYM_HOST_COMMANDS`).
Placeholders in a command: {root} {host} {prime_rl} {scorer} {hub} {rl_toml} {package} {family}
{model} {weights} {eval_file} {score_file} {run_dir} {home} {install}.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path

from trainergym.host.checkpoints import CheckpointRefused, Ledger
from trainergym.host.confinement import Confinement, ConfinementError
from trainergym.host.deployment import MIN_GPUS, visible_gpus, write_rl_toml
from trainergym.job.result import FailureReason, RunResult
from trainergym.job.stack import PRIME_RL_COMMIT, PRIME_RL_PYTHON, PRIME_RL_REPO, keep_pinned
from trainergym.paths import data_dir

BOOTSTRAP = f"""set -euo pipefail
umask 022  # everything setup installs stays read-only to a job's trainer
# Interpreters and the base model where the trainer's uid can read them (not under /root).
export UV_PYTHON_INSTALL_DIR={{host}}/python HF_HUB_CACHE={{hub}}
exec 9>{{host}}/setup.lock && flock 9  # a host's jobs share the checkout, the scorer and the caches
command -v uv >/dev/null || python3 -m pip install --quiet uv
if [ ! -d {{prime_rl}}/.git ]; then
  git clone --filter=blob:none {PRIME_RL_REPO} {{prime_rl}}
fi
cd {{prime_rl}} && git fetch --quiet origin && git checkout --quiet {PRIME_RL_COMMIT}
# Every submodule: the workspace lists deps/prime-envs/environments/*/*, so leaving one out makes
# uv re-lock. Over HTTPS: .gitmodules names SSH URLs and a pod has no key.
git -c url."https://github.com/".insteadOf=git@github.com: \\
  -c url."https://github.com/".insteadOf=ssh://git@github.com/ submodule update --init --recursive --quiet
uv sync --locked --inexact --all-extras --quiet  # --inexact: keep what other jobs installed beside it
# The scorer's own install, built once per install spec; its family packages hashed as installed.
if [ ! -f {{scorer}}/installed ]; then
  rm -rf {{scorer}} && uv venv --quiet --python {PRIME_RL_PYTHON} {{scorer}}
  uv pip install --quiet --python {{scorer}}/bin/python {{install}}
  {{scorer}}/bin/python -I -m trainergym.host.scorer_install record
  touch {{scorer}}/installed
fi
# The family (as the scorer has it, with the kit) and the job into prime-rl's env, moving none of
# its pinned packages (its own verifiers above all); trainergym itself never goes there.
families=$({{scorer}}/bin/python -I -m trainergym.host.scorer_install specs {{family}})
{keep_pinned("{prime_rl}/.venv/bin/python", "$families {package}")}
# The base model, now: the trainer runs offline from this cache, which it cannot write.
{{prime_rl}}/.venv/bin/python -c "from huggingface_hub import snapshot_download; snapshot_download('{{model}}')"
"""


@dataclass
class Commands:
    """The argv of each phase, `{placeholders}` filled by the runner: `setup` installs the pinned
    stack, the scorer's install and the job; `train` runs prime-rl on the runner's rl.toml (its
    entry point directly: the trainer's uid cannot let `uv run` sync); `score` scores one model
    with the family's scorer (pre and post)."""

    setup: list[str] = field(default_factory=lambda: ["bash", "-c", BOOTSTRAP])
    train: list[str] = field(default_factory=lambda: ["{prime_rl}/.venv/bin/rl", "@", "{rl_toml}",
                                                       "--output-dir", "{run_dir}"])
    # Serves `{weights}` with prime-rl's vLLM and scores the family's own taskset on `{eval_file}`,
    # writing {"score", "n"} to `{score_file}` (trainergym.host.scorer), from the scorer's own
    # install: isolated (-I: no working directory, user site or PYTHON* variables on its path),
    # its bytecode under that install (a package's own __pycache__ is never read).
    score: list[str] = field(default_factory=lambda: [
        "{scorer}/bin/python", "-I", "-X", "pycache_prefix={scorer}/pycache", "-m", "trainergym.host.scorer",
        "--family", "{family}", "--weights", "{weights}", "--base-model", "{model}", "--items", "{eval_file}",
        "--out", "{score_file}", "--vllm", "{prime_rl}/.venv/bin/vllm"])

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> Commands | None:
        """The phase commands a host's owner set in `TRAINERGYM_HOST_COMMANDS` (the pod's older
        `TRAINERGYM_POD_COMMANDS` too): a JSON object of some of setup, train and score, each an
        argv, replacing the real ones with fake executables for tests and dry runs. None when
        unset; ValueError (one line) when it is not such an object. Only the host's environment
        sets it: a job's files never reach it."""
        name = next((n for n in COMMANDS_ENV if environ.get(n)), None)
        if name is None:
            return None
        try:
            given = json.loads(environ[name])
        except ValueError as e:
            raise ValueError(f"{name} is not JSON: {e}") from None
        phases = {f.name for f in fields(cls)}
        if not isinstance(given, dict) or not set(given) <= phases or not all(
                isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv) for argv in given.values()):
            raise ValueError(f"{name} must be a JSON object mapping some of {', '.join(sorted(phases))} to a "
                             "non-empty list of strings")
        return cls(**given)


# What a runner does: train and score pre and post (a job), or score the base model only (a
# baseline measurement; `pre-fresh` ignores the pre-score cache and replaces its entry).
MODES = ("train", "pre", "pre-fresh")


# Where a host's owner replaces the phase commands (`Commands.from_env`): the name for every host,
# then the pod service's older one.
COMMANDS_ENV = ("TRAINERGYM_HOST_COMMANDS", "TRAINERGYM_POD_COMMANDS")


@dataclass
class Timeouts:
    """Seconds each phase may take (`score`: each of pre and post) before it fails as timed out."""

    setup: float = 1800.0
    train: float = 4 * 3600.0
    score: float = 1800.0


class PhaseFailed(Exception):
    """A phase ended without its outcome: the `FailureReason`, a detail and the log's tail."""

    def __init__(self, reason: FailureReason, detail: str = "", log_tail: str = ""):
        super().__init__(f"{reason.value}: {detail}" if detail else reason.value)
        self.reason, self.detail, self.log_tail = reason, detail, log_tail


# Each phase's failure and timeout reasons.
_FAILS = {"setup": (FailureReason.INSTALL_FAILED, FailureReason.SETUP_TIMEOUT),
          "train": (FailureReason.TRAINER_CRASHED, FailureReason.TRAIN_TIMEOUT),
          "pre": (FailureReason.EVAL_FAILED, FailureReason.EVAL_TIMEOUT),
          "post": (FailureReason.EVAL_FAILED, FailureReason.EVAL_TIMEOUT)}


_OOM = re.compile(r"CUDA out of memory|OutOfMemoryError|torch\.cuda\.OutOfMemoryError", re.IGNORECASE)


class Runner:
    """Runs one bundle under `root` (a job directory on the GPU host). `host` holds what the
    host's jobs share (default `root/host`): prime-rl's checkout, the scorer's install per
    `install` (pip specs for trainergym and the families), the pre-score cache and the base
    models. `gpu_count` is the GPUs the job may use (default: those this host shows);
    `confinement` the train phase's (a mode of `Confinement.choose`, or one already chosen).
    `mode` is one of `MODES`: "train" runs the bundle; "pre" and "pre-fresh" ignore it and only
    score the base model (a baseline measurement)."""

    def __init__(self, bundle: Path, root: Path, hidden_eval: Callable[[], list[dict]], family: str, base_model: str,
                 gpu: str = "unknown", gpu_count: int | None = None, usd_per_hour: float = 0.0,
                 commands: Commands | None = None, timeouts: Timeouts | None = None, host: Path | None = None,
                 heartbeat_seconds: float = 5.0, install: str = "trainergym",
                 confinement: str | Confinement | None = None, mode: str = "train"):
        if mode not in MODES:
            raise ValueError(f"runner mode {mode!r} is not one of {', '.join(MODES)}")
        self.mode = mode
        self.bundle, self.root = Path(bundle), Path(root)
        self._fetch_eval = hidden_eval  # called only after training: the items are not on the host before
        self._hidden_eval: list[dict] = []
        self.family, self.base_model, self.gpu, self.usd_per_hour = family, base_model, gpu, usd_per_hour
        self.gpu_count = gpu_count if gpu_count is not None else (visible_gpus() or 0)
        self.commands, self.timeouts = commands or Commands(), timeouts or Timeouts()
        self.heartbeat_seconds = heartbeat_seconds
        self.install = install
        self.host = Path(host) if host else self.root / "host"
        self.stack_dir, self.pre_cache, self.hub = self.host / "prime-rl", self.host / "pre-cache", self.host / "hf-hub"
        # Our own phases' temporary files: never the shared /tmp, where a trainer (any uid) may
        # have planted what root's tools would pick up (torch's compile cache, say).
        self.tmp = self.host / "tmp"
        # One scorer install per install spec: hosts that serve several families' specs keep each.
        self.scorer_dir = self.host / f"scorer-{hashlib.sha256(install.encode()).hexdigest()[:12]}"
        self.rl_toml = self.root / "rl.toml"  # the bundle's, with this host's [deployment]
        self.outputs, self.home = self.root / "outputs", self.root / "home"  # all the trainer may write
        self.confinement = confinement if isinstance(confinement, Confinement) else Confinement.choose(confinement)
        self.deployment: dict[str, int] = {}
        self.root.mkdir(parents=True, exist_ok=True)
        self.log_path = self.root / "runner.log"
        # The log (the scorer's output) and the result (its tail) are the runner's alone: a later
        # job's trainer may traverse this directory.
        self.log_path.touch(mode=0o600)
        self._phase, self._progress, self._cancel = "created", {}, threading.Event()
        self._pre_cached = False
        self._checkpoints: Ledger | None = None  # the train phase's published steps

    @property
    def phase(self) -> str:
        """The current phase: created, setup, train, awaiting-eval, pre, post, then done."""
        return self._phase

    # --- plumbing ----------------------------------------------------------------------------
    def _fill(self, argv: list[str], **extra: str) -> list[str]:
        package = self.bundle / "package" if self.mode == "train" else ""  # a measurement installs no job
        values = {"root": self.root, "host": self.host, "prime_rl": self.stack_dir, "scorer": self.scorer_dir,
                  "hub": self.hub, "rl_toml": self.rl_toml, "package": package, "family": self.family,
                  "model": self.base_model, "run_dir": self.outputs, "home": self.home, "install": self.install,
                  **extra}
        return [a.format(**{k: str(v) for k, v in values.items()}) for a in argv]

    def _status(self, **extra) -> None:
        status = {"phase": self._phase, "heartbeat": time.time(), "progress": self._progress, **extra}
        tmp = self.root / "status.json.tmp"
        tmp.write_text(json.dumps(status))
        tmp.replace(self.root / "status.json")

    def log_tail(self, chars: int = 4000) -> str:
        """The last `chars` characters of the runner's log ("" before there is one)."""
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def _log(self, line: str) -> None:
        with open(self.log_path, "a") as log:
            log.write(line + "\n")

    def _run(self, phase: str, argv: list[str], timeout: float, env: dict[str, str] | None = None,
             cwd: Path | None = None) -> None:
        """Run one phase's command, streaming its output to the log, with heartbeats; kill its
        whole process group at the end whatever happened."""
        self._phase = phase
        self._status()
        with open(self.log_path, "a") as log:
            log.write(f"\n== {phase}: {' '.join(argv)}\n")
            log.flush()
            try:
                proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=cwd or self.root, env=env,
                                        start_new_session=True)
            except OSError as e:
                raise PhaseFailed(_FAILS[phase][0], str(e)) from None
            deadline = time.monotonic() + timeout
            try:
                while proc.poll() is None:
                    if self._cancel.is_set():
                        raise PhaseFailed(FailureReason.CANCELLED)
                    if time.monotonic() > deadline:
                        raise PhaseFailed(_FAILS[phase][1], f"after {timeout:.0f} s", self.log_tail())
                    self._track_progress()
                    self._status()
                    try:  # returns as soon as the phase's process ends
                        proc.wait(timeout=min(self.heartbeat_seconds, 0.5))
                    except subprocess.TimeoutExpired:
                        pass
            finally:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                proc.wait()
        if proc.returncode != 0:
            tail = self.log_tail()
            if phase == "train" and _OOM.search(tail):
                raise PhaseFailed(FailureReason.OUT_OF_MEMORY, log_tail=tail)
            raise PhaseFailed(_FAILS[phase][0], f"exit status {proc.returncode}", tail)

    def _env(self, **extra: str) -> dict[str, str]:
        """The environment of our own phases (setup, scoring): ours, temporary files in `host/tmp`."""
        return {**os.environ, "TMPDIR": str(self.tmp), **extra}

    def _track_progress(self) -> None:
        """Training progress from prime-rl's file monitor (`metrics.jsonl`), when there is one.
        The trainer owns these files: links and anything but a regular file are skipped, and
        only the tail is read. Checkpoints are fingerprinted as they are published."""
        if self._phase == "train" and self._checkpoints is not None:
            self._checkpoints.watch()
        for metrics in self.outputs.rglob("metrics.jsonl") if self.outputs.exists() else ():
            step = _last_step(metrics)
            if step is not None:
                self._progress = {"step": step}

    def _weights(self) -> Path:
        """The last complete filesystem broadcast of a step the run has, as the run published it
        (`trainergym.host.checkpoints`)."""
        try:
            return self._checkpoints.verified()
        except LookupError as e:
            raise PhaseFailed(FailureReason.NO_CHECKPOINT, str(e), self.log_tail()) from None
        except CheckpointRefused as e:
            raise PhaseFailed(FailureReason.CHECKPOINT_REFUSED, str(e), self.log_tail()) from None

    def _preflight(self) -> None:
        """What fails a job before anything is installed: too few GPUs, an unreadable rl.toml, no
        way to confine the trainer. Writes the runner's rl.toml. A measurement needs one GPU and
        no trainer."""
        self._phase = "setup"
        if self.mode != "train":
            if self.gpu_count < 1:
                raise PhaseFailed(FailureReason.NO_GPU, "scoring serves the base model on a GPU and this host shows none")
            self.host.mkdir(parents=True, exist_ok=True)
            self.tmp.mkdir(mode=0o700, exist_ok=True)
            self._log(f"== {self.gpu_count} GPUs; {self.mode}: the base model scored, nothing trained")
            return
        if self.gpu_count < MIN_GPUS:
            raise PhaseFailed(FailureReason.TOO_FEW_GPUS, f"{self.gpu_count} GPU(s) here; training needs at least "
                                                          f"{MIN_GPUS}: one to train and one to serve")
        try:
            self.deployment = write_rl_toml(self.bundle / "rl.toml", self.rl_toml, self.gpu_count)
        except ValueError as e:
            raise PhaseFailed(FailureReason.RUNNER_ERROR, str(e)) from None
        if self.confinement.kind == "unavailable":
            raise PhaseFailed(FailureReason.RUNNER_ERROR, self.confinement.describe())
        self.host.mkdir(parents=True, exist_ok=True)
        self.tmp.mkdir(mode=0o700, exist_ok=True)
        try:  # now, not after setup: a work directory behind a closed one (a 0700 home) fails at once
            self.confinement.check_reach([self.root, self.host])
        except ConfinementError as e:
            raise PhaseFailed(FailureReason.RUNNER_ERROR, str(e)) from None
        self._log(f"== {self.gpu_count} GPUs: {self.deployment}; trainer: {self.confinement.describe()}")

    def _train(self) -> None:
        """The train phase, confined: the trainer's directories made (and, under setpriv, given to
        its uid), its environment built from scratch, and afterwards every process of it killed."""
        import tomllib

        self._checkpoints = Ledger(self.outputs, tomllib.loads(self.rl_toml.read_text())["max_steps"])
        argv = self._fill(self.commands.train)
        named = [Path(a) for a in argv if a.startswith("/") and Path(a).exists()]
        conf = self.confinement
        try:
            conf.prepare([self.outputs, self.home], run=[*named, self.rl_toml],
                         protected=[self.root, self.host, self.stack_dir, self.scorer_dir, self.pre_cache, self.hub])
        except ConfinementError as e:
            raise PhaseFailed(FailureReason.RUNNER_ERROR, str(e)) from None
        env = conf.env(self.home)
        env.update(PATH=f"{self.stack_dir / '.venv' / 'bin'}:{env.get('PATH', os.defpath)}", HF_HUB_CACHE=str(self.hub),
                   HF_HUB_OFFLINE="1")
        # Nor may it read the scorer's install or the pre-score cache: it needs neither.
        private = [self.scorer_dir, self.pre_cache]
        if conf.uid is not None:
            for path in private:
                if path.is_dir():
                    path.chmod(0o700)
        command = conf.command(argv, writable=[self.outputs, self.home], shown=[*named, self.root, self.host],
                               hidden=[data_dir(), *private])
        try:
            self._run("train", command, self.timeouts.train, env=env, cwd=self.home)
        finally:
            try:
                conf.reap()
            except ConfinementError as e:
                raise PhaseFailed(FailureReason.RUNNER_ERROR, str(e)) from None

    def _score(self, phase: str, weights: str, eval_dir: Path) -> float:
        score_file = eval_dir / f"{phase}.json"
        argv = self._fill(self.commands.score, weights=weights, eval_file=eval_dir / "items.jsonl", score_file=score_file)
        try:
            self._run(phase, argv, self.timeouts.score, env=self._env(HF_HUB_CACHE=str(self.hub)))
        except PhaseFailed as e:
            refused = _refusal(score_file)
            if refused is not None:  # the scorer's packages are not what was installed
                raise PhaseFailed(FailureReason.FAMILY_TAMPERED, refused, e.log_tail) from None
            raise
        try:
            data = json.loads(score_file.read_text())
            score, n = float(data["score"]), int(data["n"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise PhaseFailed(FailureReason.EVAL_FAILED, f"no valid score ({type(e).__name__})", self.log_tail()) from None
        if n != len(self._hidden_eval) or not 0.0 <= score <= 1.0:
            raise PhaseFailed(FailureReason.EVAL_FAILED, f"scored {n} of {len(self._hidden_eval)} items (score {score})",
                              self.log_tail())
        return score

    # --- the job -----------------------------------------------------------------------------
    def run(self) -> RunResult:
        """Set up, train, score; never raises for the job's own failures. Writes and returns
        the result (`status` "succeeded" with `pre` and `post`, else a `failure`); its `details`
        say how the trainer was confined and how the GPUs were split. A measurement (mode `pre`,
        `pre-fresh`) succeeds with `pre` alone; its `details` say whether it came from the cache."""
        started = time.monotonic()
        train_seconds, eval_n = None, 0
        outcome: dict = {}
        try:
            self._preflight()
            self._run("setup", self._fill(self.commands.setup), self.timeouts.setup, env=self._env())
            weights = None
            if self.mode == "train":
                t = time.monotonic()
                self._train()
                train_seconds = time.monotonic() - t
                weights = self._weights()
            # Only now, with every training process gone, does the hidden eval reach the host.
            self._phase = "awaiting-eval"
            self._status()
            try:
                items = self._fetch_eval()
            except TimeoutError as e:  # the dispatcher never sent it: not the job's fault
                raise PhaseFailed(FailureReason.RUNNER_ERROR, str(e)) from None
            if self._cancel.is_set():  # cancelled while waiting for the eval
                raise PhaseFailed(FailureReason.CANCELLED)
            self._hidden_eval = items
            eval_n = len(self._hidden_eval)
            eval_dir = self.root / f"eval-{os.urandom(6).hex()}"
            eval_dir.mkdir(mode=0o700)
            with open(eval_dir / "items.jsonl", "w") as f:
                for item in self._hidden_eval:
                    f.write(json.dumps(item) + "\n")
            try:
                pre = self._pre(eval_dir)
                post = self._score("post", str(weights), eval_dir) if weights is not None else None
            finally:
                shutil.rmtree(eval_dir, ignore_errors=True)
            outcome = {"status": "succeeded", "pre": pre, "post": post}
        except PhaseFailed as e:
            outcome = {"status": "cancelled" if e.reason is FailureReason.CANCELLED else "failed", "failure": e.reason,
                       "failure_detail": e.detail, "failed_phase": self._phase}
        details = {"train_confinement": self.confinement.describe(), "deployment": self.deployment}
        if self.mode != "train":  # a measurement: nothing trained, and whether pre came from the cache
            details = {"mode": self.mode, "pre_cached": self._pre_cached}
        result = RunResult(**outcome, base_model=self.base_model, gpu=self.gpu, gpu_count=self.gpu_count, eval_n=eval_n,
                           train_seconds=round(train_seconds, 1) if train_seconds is not None else None,
                           wall_seconds=round(time.monotonic() - started, 1), log_tail=self.log_tail(),
                           cost_usd=round((time.monotonic() - started) / 3600 * self.usd_per_hour * self.gpu_count, 4),
                           source="measured", details=details)
        self._phase = "done"
        self._status(result=result.status)
        with os.fdopen(os.open(self.root / "result.json", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
            f.write(result.model_dump_json(indent=2))
        return result

    def _pre(self, eval_dir: Path) -> float:
        """The base model's score: from the host's pre-score cache (per family and model), else
        scored and cached; mode `pre-fresh` always scores and replaces the cached entry."""
        cached = self.pre_cache / f"{self.family}--{self.base_model.replace('/', '--')}.json"
        if cached.exists() and self.mode != "pre-fresh":
            self._pre_cached = True
            return json.loads(cached.read_text())["score"]
        pre = self._score("pre", self.base_model, eval_dir)
        cached.parent.mkdir(parents=True, exist_ok=True)
        cached.write_text(json.dumps({"score": pre, "n": len(self._hidden_eval)}))
        return pre

    def cancel(self) -> None:
        """Ask the job to stop; safe from another thread. The phase in progress is killed at its
        next check (about every half second) and `run` returns a cancelled result."""
        self._cancel.set()


def _last_step(path: Path, tail_bytes: int = 1 << 16) -> int | None:
    """The `step` of the last line of a metrics file the trainer wrote, or None. Opened without
    following a link or blocking on a FIFO; only a regular file's tail is read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        f.seek(max(0, info.st_size - tail_bytes))
        lines = f.read().strip().splitlines()
    try:
        step = json.loads(lines[-1]).get("step")
    except (IndexError, ValueError, AttributeError):
        return None
    return step if isinstance(step, int) and not isinstance(step, bool) else None


def _refusal(score_file: Path) -> str | None:
    """Why the scorer refused to score (`{"refused": why}` in its output), or None."""
    try:
        refused = json.loads(score_file.read_text()).get("refused")
    except (OSError, ValueError, AttributeError):
        return None
    return str(refused) if refused else None
