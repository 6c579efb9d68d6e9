"""The mini backend: real GRPO of a tiny Qwen3 per family, here, on one GPU or the CPU.

What it trains is the submitted job itself, at a small scale (`trainergym.mini`, the engine):
the job's own tasks, its own reward functions, its `[prime_rl]` knobs (learning rates relative to
the family reference job's, so a tiny model stands in for a full-scale one), from the family's
warmed-up mini base model (or a user's `base_model` directory), with the family's eval tools in
the rollout loop; several seeds side by side; pre and post scored greedy on the hidden eval by
the family's `check`. Its results say `source="measured"` and `scale="mini"`: measured, but at the
mini scale, and shown as `measured (mini scale)` everywhere.

Agent code stays where the probe keeps it. The job's tasks come from, and its rewards are
computed in, the probe's confined child (`trainergym.probe.sandbox`, `child.py`'s `load` and
`score` requests): this process never imports the job. A reward batch travels as the probe's
rollouts (each task by its index among the loaded tasks, the tool calls with their results, the
final reply); a reward that raises, answers garbage or outlives its sandbox counts 0 for those
rollouts and leaves a note in the result. The hidden eval never reaches the child: the library
scores pre and post itself.

Seeds: side by side in this process, a trainer each, their rollouts decoded as one batch
(`trainergym.mini.grpo.train_seeds`); they share one confined session, their reward calls
taking turns. Were the engine told to split them over processes (`train(parallel=...)`), each
would open a session of its own (the reward object pickles as its configuration only,
`ConfinedReward`). Notes go to one folder the backend reads at the end.

The bar a mini job is paid against (`best_pre`) is the mini base's own pre score on the same eval
(`RunResult.pre`), never baselines.toml's full-scale figures: `env.core` reads `scale`.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import math
import os
import queue as queue_mod
import secrets
import shutil
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

from trainergym.backends import BackendOptions, BackendUnavailable, JobHandle
from trainergym.job import gpu as gpus
from trainergym.job import stack_env
from trainergym.job.bundle import JobBundle
from trainergym.job.result import FailureReason, RunResult
from trainergym.task import hidden
from trainergym.task.spec import TaskSpec, get_family

EXTRA_MESSAGE = "the mini backend needs the mini extra: uv sync --extra mini"
EXTRA_MODULES = ("torch", "transformers", "trl", "datasets")
SEEDS = {"cuda": 8, "cpu": 2}  # default seeds per job, side by side
SCALE = {"cuda": "gpu", "cpu": "micro"}  # default scale per device
REWARD_CALL_SECONDS = 10.0  # CPU seconds one reward call may take in the child (the probe's per-call limit)
SESSION_CPU_BASE = 120.0  # CPU seconds of a confined session: import and load, plus ...
SESSION_CPU_PER_ROLLOUT = 0.02  # ... this per rollout it scores (measured: 0.3 ms a rollout for the calc_chain
# reference reward, 256 per request, round trip included; a slow reward gets 60 times that)
NOTE_KINDS = 8  # distinct reward notes kept per job


def missing_extra() -> str | None:
    """The one-line reason the mini backend cannot run here, or None."""
    missing = [m for m in EXTRA_MODULES if importlib.util.find_spec(m) is None]
    return f"{EXTRA_MESSAGE} ({', '.join(missing)} missing)" if missing else None


def detect_device() -> str:
    """"cuda" when torch sees a GPU, else "cpu"."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def device_name(device: str) -> str:
    """The GPU's name (e.g. "NVIDIA H200"), or "cpu"."""
    if not device.startswith("cuda"):
        return "cpu"
    import torch

    return torch.cuda.get_device_name(torch.device(device))


def gpu_price(name: str) -> float:
    """On-demand $/h of the GPU called `name` from job/gpu.py's list (by its full name or an alias
    it contains); 0.0 when the list has no price for it."""
    price = gpus.list_price(name)
    if price:
        return price
    for alias in sorted(gpus.ALIASES, key=len, reverse=True):
        if alias in name:
            return gpus.list_price(alias)
    return 0.0


def eval_rows(family_id: str, scale: str, n: int | None = None) -> list[dict]:
    """The hidden-eval items a mini job is scored on: those at the scale's difficulty level when it
    fixes one (a micro-scale model is warmed up at level 1, and longer items do not fit its context;
    calc_chain has 58 such items of 200), the first `n` of them. Library-side only: these never reach
    the job's code."""
    from trainergym.mini.scale import get_scale

    level = get_scale(scale).difficulty
    rows = [ex.model_dump() for ex in hidden.hidden_eval(family_id)]
    rows = [r for r in rows if level is None or r.get("difficulty") in (None, level)]
    return rows[:n] if n else rows


FIT_SAMPLE = 500  # job tasks whose solver rollout is measured against the base's length cap


def fitting_share(family, base, rows: list[dict]) -> tuple[float, int]:
    """(share of the job's tasks whose family-solver rollout fits the base's caps, the cap on what
    follows the prompt), on up to FIT_SAMPLE tasks spread over the taskset. A task that does not fit
    is cut before it can be answered and earns nothing in training: a job of long tasks teaches a
    small-context mini model nothing (the family's code reads the job's data here, as the probe's
    does; an unreadable task counts as not fitting)."""
    from trainergym.mini.base import trace_ids
    from trainergym.mini.scale import get_scale
    from trainergym.mini.tokenizer import load_tokenizer

    caps = base.caps() if hasattr(base, "caps") else {"max_len": get_scale(base.scale).max_len}
    total = int(caps["max_len"])
    new = int(caps.get("max_new", total))  # the engine's cap on tokens after the prompt, where it has one
    step = max(1, len(rows) // FIT_SAMPLE)
    sample = rows[::step][:FIT_SAMPLE]
    tokenizer = load_tokenizer(base.path)
    fits = 0
    for row in sample:
        try:
            traced = trace_ids(tokenizer, family, {**row, "world": row.get("world") or {}})
        except Exception:  # noqa: BLE001 - family code on the job's data: unreadable
            traced = None
        if traced is not None:
            ids, mask = traced
            prompt = mask.index(1) if 1 in mask else len(ids)
            fits += len(ids) <= total and len(ids) - prompt <= new
    return (fits / len(sample) if sample else 0.0), min(total, new)


def to_probe_rollout(messages: list[dict]) -> dict:
    """A rollout's verifiers-style messages as the probe sends rollouts to the child: the tool calls
    in order, each with its arguments and result, and the final reply ("" when it ended on a call).
    Text an assistant wrote before a call is not carried (the probe's traces have none)."""
    results = {m.get("tool_call_id"): str(m.get("content") or "") for m in messages if m.get("role") == "tool"}
    calls, reply = [], ""
    for m in messages:
        if m.get("role") != "assistant":
            continue
        made = m.get("tool_calls") or []
        reply = "" if made else str(m.get("content") or "")
        for tc in made:
            fn = tc.get("function") or {}
            try:
                arguments = json.loads(fn.get("arguments") or "{}")
            except ValueError:
                arguments = {}
            calls.append({"tool": str(fn.get("name", "")), "arguments": arguments if isinstance(arguments, dict) else {},
                          "result": results.get(tc.get("id"), "")})
    return {"calls": calls, "reply": reply}


class SessionEnded(RuntimeError):
    """The confined session is over (the child died, ran out of time, or was closed)."""


class Cancelled(RuntimeError):
    """The job was cancelled while it trained."""


class _Session:
    """One conversation with the job's code in the probe's sandbox, driven from this side: the
    sandbox's `WarmWorker.run` calls `follow` with each answer and waits for the next request,
    so it runs in a thread of its own and `ask` hands requests across."""

    def __init__(self, package_dir: Path, module: str, max_tasks: int, cpu_seconds: float):
        from trainergym.probe.sandbox import Limits, Sandbox, WarmWorker

        wall = 3 * cpu_seconds  # the job's time holding the floor; the training between requests does not count
        self.sandbox = Sandbox(Limits(wall_seconds=wall, cpu_seconds=int(cpu_seconds)), runtime=stack_env.ensure())
        if self.sandbox.kind == "unavailable":
            raise BackendUnavailable(f"the mini backend runs the job's rewards in the probe's sandbox, and none works "
                                     f"here: {self.sandbox.why_not}")
        self.worker = WarmWorker(self.sandbox)
        self._requests: queue_mod.Queue = queue_mod.Queue()
        self._answers: queue_mod.Queue = queue_mod.Queue()
        self.end: dict | None = None
        self._lock = threading.Lock()
        request = {"nonce": secrets.token_hex(8), "module": module, "max_tasks": max_tasks, "timeout": cpu_seconds,
                   "wall": wall}
        self._thread = threading.Thread(target=self._run, args=(package_dir, request), daemon=True)
        self._thread.start()

    def _run(self, package_dir: Path, request: dict) -> None:
        try:
            end = self.worker.run(package_dir, request, self._follow)
        except Exception as e:  # noqa: BLE001 - WorkerError and the like: the session is over
            end = {"stage": "crash", "error": f"{type(e).__name__}: {e}"}
        finally:
            self.worker.close()
        self.end = end
        self._answers.put(None)

    def _follow(self, answer: dict | str) -> dict | None:
        if isinstance(answer, str):  # the sandbox relays an answer's JSON text (or, before, the parsed answer)
            try:
                answer = json.loads(answer)
            except ValueError:
                answer = {"error": "the answer was not JSON"}
        self._answers.put(answer)
        return self._requests.get()  # None: done

    def first(self) -> dict:
        """The answer to the opening request (`load`)."""
        answer = self._answers.get()
        if answer is None:
            raise SessionEnded(self.why())
        return answer

    def ask(self, request: dict) -> dict:
        """Send `request`, return its answer; SessionEnded when the session is over."""
        with self._lock:
            if self.end is not None:
                raise SessionEnded(self.why())
            self._requests.put(request)
            answer = self._answers.get()
            if answer is None:
                raise SessionEnded(self.why())
            return answer

    def why(self) -> str:
        end = self.end or {}
        return f"{end.get('stage', 'closed')}: {str(end.get('error') or 'the session ended')[:300]}"

    def close(self) -> None:
        if self.end is None and self._thread.is_alive():
            self._requests.put(None)
        self._thread.join(timeout=30)


def _rows(answer: dict, cap: int) -> list[dict]:
    """The job's tasks from the child's `load` answer, type-checked here (it is agent code's word):
    prompt, answer, world, system prompt; ValueError when it is not a load answer."""
    if not isinstance(answer, dict) or answer.get("stage") != "loaded":
        error = answer.get("error") if isinstance(answer, dict) else None
        stage = answer.get("stage", "?") if isinstance(answer, dict) else "?"
        raise ValueError(f"the job's taskset did not load in the sandbox ({stage}): "
                         f"{str(error or 'no answer')[-600:]}")
    tasks = answer.get("tasks")
    if not isinstance(tasks, list) or not tasks:
        raise ValueError("the job's taskset loaded no tasks")
    rows = []
    for i, t in enumerate(tasks[:cap]):
        if not isinstance(t, dict) or not isinstance(t.get("prompt"), str) or not isinstance(t.get("answer"), str):
            raise ValueError(f"task {i} of the job's load answer is malformed")
        world = t.get("world")
        system = t.get("system_prompt")
        rows.append({"id": str(i), "prompt": t["prompt"], "answer": t["answer"],
                     "world": world if isinstance(world, dict) else None,
                     "system_prompt": system if isinstance(system, str) and system else None})
    return rows


class ConfinedReward:
    """The job's reward functions, run in the probe's sandbox: `reward(tasks, completions)` with the
    engine's `Task`s (their `id` is the task's index among the job's loaded tasks) and verifiers-style
    message lists, one float per completion. A bad answer (an exception, a non-number, a dead
    session) is 0 and a note. Pickles as its configuration: a process that unpickles it opens a
    session of its own on first use, loads the job again and checks that it yields the same tasks
    (else it sends each task's data along, as the probe does for fresh items)."""

    def __init__(self, package_dir: Path, module: str, max_tasks: int, cpu_seconds: float, notes_dir: Path,
                 model: str | None = None):
        self.package_dir, self.module, self.max_tasks, self.model = Path(package_dir), module, max_tasks, model
        self.cpu_seconds, self.notes_dir = cpu_seconds, Path(notes_dir)
        self.rows: list[dict] = []
        self.cancel_file = self.notes_dir / "cancelled"
        self._session: _Session | None = None
        self._same = True
        self.confinement = ""

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "_session"} | {"_session": None}

    def open(self) -> list[dict]:
        """Start the session and load the job's tasks (the first call, in the process that owns them)."""
        self._session = _Session(self.package_dir, self.module, self.max_tasks, self.cpu_seconds)
        self.confinement = self._session.sandbox.describe()
        try:
            rows = _rows(self._session.first(), self.max_tasks)
        except SessionEnded as e:
            raise ValueError(f"the job's taskset did not load in the sandbox: {e}") from None
        if not self.rows:
            self.rows = rows
        else:  # a worker process: the same tasks, or their data goes along with each request
            self._same = [(r["prompt"], r["answer"]) for r in rows] == [(r["prompt"], r["answer"]) for r in self.rows]
        return self.rows

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None

    def _note(self, text: str, count: int) -> None:
        self.notes_dir.mkdir(parents=True, exist_ok=True)
        with open(self.notes_dir / f"notes-{os.getpid()}.jsonl", "a") as f:
            f.write(json.dumps({"note": text[:300], "count": count}) + "\n")

    def __call__(self, tasks, completions: list[list[dict]]) -> list[float]:
        if self.cancel_file.exists():
            raise Cancelled("the job was cancelled")
        if self._session is None:
            try:
                self.open()
            except (ValueError, BackendUnavailable) as e:
                self._note(f"the job's reward could not start in this process: {e}", len(completions))
                return [0.0] * len(completions)
        slots: dict[int, int] = {}
        for t in tasks:
            slots.setdefault(int(t.id), len(slots))
        request = {"op": "score", "timeout": REWARD_CALL_SECONDS, "model": self.model,  # the policy, as training names it
                   "tasks": [{"base": i, "data": {} if self._same else
                              {"prompt": self.rows[i]["prompt"], "answer": self.rows[i]["answer"],
                               **({"world": self.rows[i]["world"]} if self.rows[i]["world"] is not None else {})}}
                             for i in slots],
                   "rollouts": [{"task": slots[int(t.id)], **to_probe_rollout(m)} for t, m in zip(tasks, completions, strict=True)]}
        try:
            answer = self._session.ask(request)
        except SessionEnded as e:
            self._note(f"the job's reward process ended ({e}): rewards 0", len(completions))
            return [0.0] * len(completions)
        rewards, errors = (answer.get("rewards"), answer.get("errors")) if isinstance(answer, dict) else (None, None)
        if not isinstance(rewards, list) or len(rewards) != len(completions):
            why = answer.get("error") if isinstance(answer, dict) and answer.get("error") else "not one reward per rollout"
            self._note(f"the job's reward answered garbage ({str(why)[-200:]}): rewards 0", len(completions))
            return [0.0] * len(completions)
        errors = errors if isinstance(errors, list) and len(errors) == len(rewards) else [None] * len(rewards)
        out, bad = [], Counter()
        for value, error in zip(rewards, errors, strict=True):
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                out.append(float(value))
            else:
                out.append(0.0)
                bad[f"the job's reward failed ({str(error or 'not a finite number')[:200]}): reward 0"] += 1
        for text, count in bad.items():
            self._note(text, count)
        return out


def read_notes(notes_dir: Path) -> dict[str, int]:
    """The reward notes every process wrote, with how many rollouts each concerned (the first
    NOTE_KINDS kinds)."""
    counts: Counter = Counter()
    for path in sorted(Path(notes_dir).glob("notes-*.jsonl")):
        for line in path.read_text().splitlines():
            try:
                row = json.loads(line)
                counts[row["note"]] += int(row["count"])
            except (ValueError, KeyError, TypeError):
                continue
    return dict(counts.most_common(NOTE_KINDS))


def quiet() -> None:
    """No per-step deprecation warnings or weight-loading bars from transformers on the user's
    terminal (an episode's output is the reward table): process-wide, and only these."""
    import warnings

    warnings.filterwarnings("ignore", message=r".*gradient_checkpointing.* is deprecated", category=FutureWarning)
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()


class MiniBackend:
    """Backend protocol over the mini engine. Jobs run in a worker thread, `max_jobs` at a time
    (default 1: the seeds of one job already fill the device)."""

    name = "mini"

    def __init__(self, device: str | None = None, scale: str | None = None, seeds: int | None = None,
                 eval_n: int | None = None, base_model: Path | None = None, seed: int = 0, max_jobs: int = 1):
        from trainergym.mini.scale import get_scale

        self.device = device or detect_device()
        kind = "cuda" if self.device.startswith("cuda") else "cpu"
        self.scale = scale or SCALE[kind]
        get_scale(self.scale)  # ValueError for an unknown one
        self.seeds = seeds or SEEDS[kind]
        self.eval_n = eval_n  # None: every hidden-eval item at the scale's difficulty
        self.base_model = Path(base_model) if base_model else None
        self.seed = seed
        self._gate = threading.Semaphore(max(1, max_jobs))
        self._bases: dict[tuple[str, str], object] = {}
        self._base_lock = threading.Lock()
        self._jobs: dict[str, asyncio.Future] = {}
        self._cancel: dict[str, Path] = {}
        quiet()

    @classmethod
    def from_options(cls, options: BackendOptions) -> MiniBackend:
        """The registry's constructor (`make_backend("mini", ...)`)."""
        if why := missing_extra():
            raise BackendUnavailable(why)
        if options.base_model is not None and not (Path(options.base_model) / "config.json").is_file():
            raise BackendUnavailable(f"--base-model {options.base_model} is not a Hugging Face model directory "
                                     "(no config.json there)")
        try:
            return cls(device=options.device, scale=options.scale, seeds=options.seeds, eval_n=options.eval_n,
                       base_model=options.base_model, seed=options.seed, max_jobs=options.max_jobs or 1)
        except ValueError as e:
            raise BackendUnavailable(str(e)) from None

    def base(self, family):
        """The family's base at this backend's scale: the user's directory, else the cached build
        (built now, once, when there is none)."""
        from trainergym.mini.base import Base, build_base, find_base

        if self.base_model is not None:
            return Base.from_dir(self.base_model, family.ID, self.scale)
        with self._base_lock:
            key = (family.ID, self.scale)
            if key not in self._bases:
                self._bases[key] = find_base(family, self.scale) or build_base(
                    family, self.scale, device=self.device, log=lambda _: None)
            return self._bases[key]

    async def submit(self, bundle: JobBundle, task: TaskSpec) -> JobHandle:
        """Start training the job in a worker thread; returns at once."""
        job_id = f"mini-{bundle.manifest.content_hash[:12]}-{uuid.uuid4().hex[:6]}"
        notes = Path(tempfile.mkdtemp(prefix="tg-mini-"))
        self._cancel[job_id] = notes / "cancelled"
        loop = asyncio.get_running_loop()
        self._jobs[job_id] = loop.run_in_executor(None, self._run_gated, bundle, task, job_id, notes)
        return JobHandle(job_id=job_id, content_hash=bundle.manifest.content_hash, backend=self.name)

    async def result(self, handle: JobHandle, timeout: float | None = None) -> RunResult:
        """The job's result once it has trained and been scored; TimeoutError after `timeout` s."""
        async with asyncio.timeout(timeout):
            return await asyncio.shield(self._jobs[handle.job_id])

    async def cancel(self, handle: JobHandle) -> None:
        """Stop the job at its next reward batch (a seed in a process of its own stops at its next
        batch too); its result is `cancelled`. Idempotent."""
        flag = self._cancel.get(handle.job_id)
        if flag is not None and flag.parent.is_dir():
            flag.touch()

    def _run_gated(self, bundle: JobBundle, task: TaskSpec, job_id: str, notes: Path) -> RunResult:
        try:
            with self._gate:
                if (notes / "cancelled").exists():
                    return self._failed(bundle, job_id, FailureReason.CANCELLED)
                return self.run(bundle, task, job_id, notes)
        finally:
            shutil.rmtree(notes, ignore_errors=True)

    def _failed(self, bundle: JobBundle, job_id: str, failure: FailureReason, detail: str = "", **fields) -> RunResult:
        return RunResult.failed(failure, detail, job_id=job_id, content_hash=bundle.manifest.content_hash,
                                scale="mini", **fields)

    def run(self, bundle: JobBundle, task: TaskSpec, job_id: str = "", notes: Path | None = None) -> RunResult:
        """Train `bundle` for `task` now, in this thread, and return its result."""
        from trainergym.mini.scale import get_scale
        from trainergym.mini.train import train

        started = time.time()
        notes = Path(notes or tempfile.mkdtemp(prefix="tg-mini-"))
        job_id = job_id or f"mini-{bundle.manifest.content_hash[:12]}-{uuid.uuid4().hex[:6]}"
        family = get_family(task.family)
        p = bundle.job.prime_rl
        rollouts = self.seeds * p.max_steps * p.batch_size  # at most: one session may serve every seed
        reward = ConfinedReward(bundle.root / "package", bundle.manifest.taskset_id, task.bounds.max_items,
                                SESSION_CPU_BASE + SESSION_CPU_PER_ROLLOUT * rollouts, notes, bundle.job.job.base_model)
        try:
            rows = reward.open()
        except BackendUnavailable as e:
            return self._failed(bundle, job_id, FailureReason.RUNNER_ERROR, str(e))
        except ValueError as e:
            reward.close()
            return self._failed(bundle, job_id, FailureReason.TRAINER_CRASHED, str(e), failed_phase="setup")
        try:
            base = self.base(family)
            base_label = str(self.base_model) if self.base_model else f"mini-{self.scale}/{family.ID}@{base.key[:12]}"
            # The hidden eval stays in this process: the engine scores pre and post here.
            rows_eval = eval_rows(task.family, self.scale, self.eval_n)
            seeds = [self.seed + i for i in range(self.seeds)]
            try:
                fit, cap = fitting_share(family, base, rows)
            except Exception:  # noqa: BLE001 - a diagnostic, never the job's failure (e.g. a user's own tokenizer)
                fit, cap = None, 0
            # Quiet: the engine prints nothing without a log function (stdout holds a command's table or JSON).
            mini = train(bundle.job.model_dump(), base, family, rows, reward, rows_eval, seeds=seeds,
                         device=self.device)
        except Cancelled:
            return self._failed(bundle, job_id, FailureReason.CANCELLED, wall_seconds=round(time.time() - started, 1))
        except Exception as e:  # noqa: BLE001 - the engine failed on this job: one line, the job's failure
            if (notes / "cancelled").exists():
                return self._failed(bundle, job_id, FailureReason.CANCELLED)
            return self._failed(bundle, job_id, FailureReason.TRAINER_CRASHED, f"{type(e).__name__}: {e}"[:500],
                                failed_phase="train", wall_seconds=round(time.time() - started, 1))
        finally:
            reward.close()
        if (notes / "cancelled").exists():
            return self._failed(bundle, job_id, FailureReason.CANCELLED)
        wall = round(time.time() - started, 1)
        name = device_name(self.device)
        on_gpu = name != "cpu"
        price = gpu_price(name) if on_gpu else 0.0
        cost = round(mini.seconds / 3600 * price, 6)
        cost_note = (f"{mini.seconds:.0f} GPU-seconds on 1x {name} at ${price}/h (job/gpu.py's list price)" if price else
                     f"{mini.seconds:.0f} GPU-seconds on 1x {name}: job/gpu.py lists no price for it, $0 recorded"
                     if on_gpu else f"{mini.seconds:.0f} s on the CPU: no GPU billed, $0")
        reward_notes = read_notes(notes)
        unhonoured = list(mini.unhonoured)
        if fit is not None and fit < 0.95:
            unhonoured.append(f"{1 - fit:.0%} of the job's tasks need more than the base's {cap} mini tokens after the "
                              "prompt for the family solver's rollout: theirs are cut before an answer and earn nothing")
        details = {
            "scale": mini.scale, "device": mini.device, "base_key": mini.base_key, "base": base_label,
            "base_source": (base.info or {}).get("source", "cache"), "seeds": [s.seed for s in mini.seeds],
            "posts": [s.post for s in mini.seeds], "post_mean": mini.post_mean, "post_se": mini.post_se, "n": mini.n,
            "eval_items": mini.n_eval, "eval_difficulty": get_scale(self.scale).difficulty, "unhonoured": unhonoured,
            "knobs": mini.knobs, "reward_curves": {str(s.seed): s.rewards for s in mini.seeds},
            "rollouts": sum(s.rollouts for s in mini.seeds), "seed_seconds": [s.seconds for s in mini.seeds],
            "job_tasks": len(rows), "job_tasks_fitting": None if fit is None else round(fit, 3),
            "reward_confinement": reward.confinement,
            "reward_notes": reward_notes, "cost": cost_note,
        }
        self._ledger(bundle, job_id, cost, on_gpu and bool(price), cost_note)
        note = f"; {sum(reward_notes.values())} rewards were 0 for a failure of the job's reward" if reward_notes else ""
        if fit is not None and fit < 0.5:
            note += f"; only {fit:.0%} of the job's tasks fit the base's {cap}-token rollouts (the rest earn nothing)"
        return RunResult(
            status="succeeded", job_id=job_id, content_hash=bundle.manifest.content_hash, base_model=base_label,
            pre=round(mini.pre, 4), post=round(mini.post_mean, 4), eval_n=mini.n_eval, train_seconds=mini.seconds,
            wall_seconds=wall, steps_done=mini.knobs.get("max_steps", p.max_steps), gpu=name, gpu_count=1 if on_gpu else 0,
            cost_usd=cost, source="measured", scale="mini", details=details,
            log_tail=(f"[mini scale] {mini.n} seeds of {mini.knobs.get('max_steps')} GRPO steps on {name}: post "
                      f"{mini.post_mean:.3f} ± {mini.post_se:.3f} (mean ± s.e. over seeds) vs the mini base's pre "
                      f"{mini.pre:.3f} on {mini.n_eval} hidden-eval items{note}"))

    # --- the durable queue (`trainergym worker --backend mini`) ---------------------------------
    def drain(self, queue, once: bool = False, poll: float = 5.0, stop: threading.Event | None = None) -> int:
        """Train queued jobs (`trainergym submit`'s) one at a time in this process, heartbeating each
        lease; with `once`, until no job is queued, leased or running. Returns how many jobs ran. A
        lost lease or a cancel stops the job at its next reward batch."""
        from trainergym.task.spec import load_task

        owner, ran = f"mini-{uuid.uuid4().hex[:8]}", 0
        stop = stop or threading.Event()
        while not stop.is_set():
            job = queue.lease(owner)
            if job is None:
                if once and not queue.has_active():  # another worker's (or a dead one's) jobs: wait them out
                    return ran
                stop.wait(poll)
                continue
            ran += 1
            notes = Path(tempfile.mkdtemp(prefix="tg-mini-"))
            beating = threading.Event()

            def heartbeat(job_id=job.id, flag=notes / "cancelled", beating=beating) -> None:
                while not beating.wait(min(30.0, queue.lease_seconds / 3)):
                    if not queue.heartbeat(job_id, owner):
                        flag.touch()  # cancelled, or the lease was lost
                        return

            beat = threading.Thread(target=heartbeat, daemon=True)
            try:
                queue.start(job.id, owner)
                beat.start()
                try:
                    task = load_task(job.task_id)
                except (KeyError, ValueError, OSError):
                    task = load_task(job.family)  # a task file's id: the family's default bounds
                result = self.run(JobBundle.open(job.bundle), task, job.id, notes)
            except Exception as e:  # noqa: BLE001 - a worker reports, never dies with its job leased
                result = RunResult.failed(FailureReason.RUNNER_ERROR, f"{type(e).__name__}: {e}"[:500], scale="mini")
            finally:
                beating.set()
                shutil.rmtree(notes, ignore_errors=True)
            result = result.model_copy(update={"job_id": job.id})
            (queue.complete if result.status == "succeeded" else queue.fail)(job.id, owner, result)
        return ran

    @staticmethod
    def _ledger(bundle: JobBundle, job_id: str, usd: float, priced: bool, note: str) -> None:
        from trainergym.infra.costs import Ledger

        Ledger().record("gpu", usd, "list price" if priced else "measured", episode=bundle.manifest.episode_id or None,
                        note=f"mini job {job_id}: {note}")

