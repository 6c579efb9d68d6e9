"""The job runner: what executes one job on a GPU host.

    setup -> train -> (training processes killed) -> hidden eval written -> pre -> post -> result.json

`setup` installs the pinned stack (uv, prime-rl at the pinned commit, the family's package and
the job's taskset package; the checkout is shared by the host's jobs); `train` runs prime-rl on the bundle's `rl.toml`; `pre` and `post`
score the base model and the trained weights on the hidden eval through the family's own
scorer. The hidden eval is written to the host only after every training process is gone,
into a directory the job's code never saw, and agent code does not run while scoring: the
scorer uses the family's taskset, not the job's. Every phase has a timeout and a named failure
reason. `status.json` carries a heartbeat and progress for the pod service to report.

The real commands are the defaults (`Commands`); tests swap in fake executables to exercise
the orchestration. Placeholders in a command: {root} {prime_rl} {rl_toml} {package} {family}
{model} {weights} {eval_file} {score_file} {run_dir} {install}.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from trainergym.job.result import FailureReason, RunResult
from trainergym.job.stack import PRIME_RL_COMMIT, PRIME_RL_REPO

BOOTSTRAP = f"""set -euo pipefail
exec 9>{{prime_rl}}.lock && flock 9  # jobs on one host share the checkout
command -v uv >/dev/null || python3 -m pip install --quiet uv
if [ ! -d {{prime_rl}}/.git ]; then
  git clone --filter=blob:none {PRIME_RL_REPO} {{prime_rl}}
fi
cd {{prime_rl}} && git fetch --quiet origin && git checkout --quiet {PRIME_RL_COMMIT}
git submodule update --init --quiet -- deps/verifiers deps/renderers deps/pydantic-config
uv sync --all-extras --quiet
uv pip install --quiet {{install}} {{package}}
"""


@dataclass
class Commands:
    """The argv of each phase, `{placeholders}` filled by the runner: `setup` installs the pinned
    stack and the job, `train` runs prime-rl on the bundle's rl.toml, `score` scores one model with
    the family's scorer (pre and post)."""

    setup: list[str] = field(default_factory=lambda: ["bash", "-c", BOOTSTRAP])
    train: list[str] = field(default_factory=lambda: ["uv", "run", "--project", "{prime_rl}", "rl", "@", "{rl_toml}",
                                                       "--output-dir", "{run_dir}"])
    # Serves `{weights}` with vLLM and scores the family's own taskset on `{eval_file}`, writing
    # {"score", "n"} to `{score_file}` (trainergym.host.scorer).
    score: list[str] = field(default_factory=lambda: ["uv", "run", "--project", "{prime_rl}", "python", "-m",
                                                       "trainergym.host.scorer", "--family", "{family}", "--weights",
                                                       "{weights}", "--base-model", "{model}", "--items", "{eval_file}",
                                                       "--out", "{score_file}"])


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
    """Runs one bundle under `root` (a job directory on the GPU host)."""

    def __init__(self, bundle: Path, root: Path, hidden_eval: Callable[[], list[dict]], family: str, base_model: str,
                 gpu: str = "unknown", gpu_count: int = 1, usd_per_hour: float = 0.0, commands: Commands | None = None,
                 timeouts: Timeouts | None = None, pre_cache: Path | None = None, heartbeat_seconds: float = 5.0,
                 install: str = "trainergym", stack_dir: Path | None = None):
        self.bundle, self.root = Path(bundle), Path(root)
        self._fetch_eval = hidden_eval  # called only after training: the items are not on the host before
        self._hidden_eval: list[dict] = []
        self.family, self.base_model, self.gpu, self.gpu_count, self.usd_per_hour = family, base_model, gpu, gpu_count, usd_per_hour
        self.commands, self.timeouts = commands or Commands(), timeouts or Timeouts()
        self.pre_cache = Path(pre_cache) if pre_cache else self.root / "pre-cache"
        self.heartbeat_seconds = heartbeat_seconds
        self.install = install  # pip specs for trainergym and the family's package, into prime-rl's env
        self.stack_dir = Path(stack_dir) if stack_dir else self.root / "prime-rl"
        self.root.mkdir(parents=True, exist_ok=True)
        self.log_path = self.root / "runner.log"
        self._phase, self._progress, self._cancel = "created", {}, threading.Event()

    @property
    def phase(self) -> str:
        """The current phase: created, setup, train, awaiting-eval, pre, post, then done."""
        return self._phase

    # --- plumbing ----------------------------------------------------------------------------
    def _fill(self, argv: list[str], **extra: str) -> list[str]:
        values = {"root": self.root, "prime_rl": self.stack_dir, "rl_toml": self.bundle / "rl.toml",
                  "package": self.bundle / "package", "family": self.family, "model": self.base_model,
                  "run_dir": self.root / "outputs", "install": self.install, **extra}
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

    def _run(self, phase: str, argv: list[str], timeout: float) -> None:
        """Run one phase's command, streaming its output to the log, with heartbeats; kill its
        whole process group at the end whatever happened."""
        self._phase = phase
        self._status()
        with open(self.log_path, "a") as log:
            log.write(f"\n== {phase}: {' '.join(argv)}\n")
            log.flush()
            try:
                proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=self.root, start_new_session=True)
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

    def _track_progress(self) -> None:
        """Training progress from prime-rl's file monitor (`metrics.jsonl`), when there is one."""
        for metrics in (self.root / "outputs").rglob("metrics.jsonl") if (self.root / "outputs").exists() else ():
            try:
                last = metrics.read_text().strip().splitlines()[-1]
                self._progress = {"step": json.loads(last).get("step")}
            except (OSError, IndexError, ValueError):
                pass

    def _weights(self) -> Path:
        """The last complete filesystem broadcast (`broadcasts/step_N/` with a STABLE marker)."""
        steps = [p for p in (self.root / "outputs").rglob("step_*") if p.parent.name == "broadcasts" and (p / "STABLE").exists()]
        if not steps:
            raise PhaseFailed(FailureReason.NO_CHECKPOINT, "training ended without publishing weights", self.log_tail())
        return max(steps, key=lambda p: int(p.name.split("_")[-1]))

    def _score(self, phase: str, weights: str, eval_dir: Path) -> float:
        score_file = eval_dir / f"{phase}.json"
        argv = self._fill(self.commands.score, weights=weights, eval_file=eval_dir / "items.jsonl", score_file=score_file)
        self._run(phase, argv, self.timeouts.score)
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
        the result (`status` "succeeded" with `pre` and `post`, else a `failure`)."""
        started = time.monotonic()
        train_seconds, eval_n = None, 0
        outcome: dict = {}
        try:
            self._run("setup", self._fill(self.commands.setup), self.timeouts.setup)
            t = time.monotonic()
            self._run("train", self._fill(self.commands.train), self.timeouts.train)
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
                cached = self.pre_cache / f"{self.family}--{self.base_model.replace('/', '--')}.json"
                if cached.exists():
                    pre = json.loads(cached.read_text())["score"]
                else:
                    pre = self._score("pre", self.base_model, eval_dir)
                    cached.parent.mkdir(parents=True, exist_ok=True)
                    cached.write_text(json.dumps({"score": pre, "n": len(self._hidden_eval)}))
                post = self._score("post", str(weights), eval_dir)
            finally:
                shutil.rmtree(eval_dir, ignore_errors=True)
            outcome = {"status": "succeeded", "pre": pre, "post": post}
        except PhaseFailed as e:
            outcome = {"status": "cancelled" if e.reason is FailureReason.CANCELLED else "failed", "failure": e.reason,
                       "failure_detail": e.detail, "failed_phase": self._phase}
        result = RunResult(**outcome, base_model=self.base_model, gpu=self.gpu, gpu_count=self.gpu_count, eval_n=eval_n,
                           train_seconds=round(train_seconds, 1) if train_seconds is not None else None,
                           wall_seconds=round(time.monotonic() - started, 1), log_tail=self.log_tail(),
                           cost_usd=round((time.monotonic() - started) / 3600 * self.usd_per_hour * self.gpu_count, 4),
                           source="measured")
        self._phase = "done"
        self._status(result=result.status)
        (self.root / "result.json").write_text(result.model_dump_json(indent=2))
        return result

    def cancel(self) -> None:
        """Ask the job to stop; safe from another thread. The phase in progress is killed at its
        next check (about every half second) and `run` returns a cancelled result."""
        self._cancel.set()
