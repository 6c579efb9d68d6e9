"""The trainer task as a TRL environment: `GRPOTrainer(environment_factory=TrainerTRLEnv)`.

Install the extra first: `pip install 'trainergym[trl]'` (pins trl==1.16.0; `environment_factory`
exists since TRL 0.29 and needs transformers >= 5.2).

How TRL 1.16 drives an environment (trl/trainer/grpo_trainer.py), and what this module does:

- TRL builds one instance per rollout slot by calling the factory with no arguments and reuses
  the instances across batches (a pool). Every public method other than `reset` and `get_reward`
  is a tool; its schema comes from the type hints and the Google-style docstring
  (`transformers.utils.get_json_schema`). Ours are `trainergym.env.tools.TOOLS`, with their
  descriptions and parameter descriptions, so the model sees the tools the task text names.
- `reset(**row)` gets every column of the dataset row (`prompt`, `task`, `family`, `seed`);
  it starts an `AsyncTrainerEnv` episode and returns the task observation, which TRL appends to
  the row's last prompt message.
- Each tool call is one `env.step`, so every call costs one of the task's turns (as under
  verifiers; in the Gymnasium env one message is one turn, however many calls it makes).
- `get_reward()` is called once per finished rollout and is the episode reward. A rollout can
  end before its episode does (the model stopped calling tools, or TRL's
  `max_completion_length` / `max_tool_calling_iterations` cut it): such an episode is ended with
  `AsyncTrainerEnv.end(...)` and scored as the env scores it there (-0.1 with no submission).

Sync, on purpose. The tools are plain methods that run the episode's coroutines on one
event loop this module owns (a daemon thread, one per process) and block until they finish:
- GRPOTrainer runs sync tools in the order the model called them; async ones of one message
  it `asyncio.gather`s, which would let a `write_file` after a `submit_job` change the
  workspace while the probe reads it.
- Either way GRPOTrainer runs the rollouts' tool calls one rollout after another
  (`_tool_call_loop`), so a `submit_job` (the probe, ~10 s, then the backend's job) holds the
  step for its whole length, whether sync or async; there is no timeout on that path. TRL's
  experimental async GRPO worker runs sync tools in a thread pool, so there the rollouts'
  submissions do overlap.
- One loop for every env keeps a shared GPU backend's queue and concurrency cap on one loop.
"""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from collections.abc import Callable, Coroutine, Iterable, Sequence
from pathlib import Path
from typing import Any

try:
    import trl  # noqa: F401 -- the extra's presence; GRPOTrainer is the caller, not imported here
    from datasets import Dataset
except ImportError as e:  # the extra is missing (or broken): say which extra, not which module
    raise ImportError(
        "trainergym.adapters.trl needs the trl extra: pip install 'trainergym[trl]' "
        f"(in this repository: uv sync --extra trl) [{type(e).__name__}: {e}]"
    ) from e

from trainergym.agents.prompt import SYSTEM_PROMPT as AGENT_SYSTEM_PROMPT
from trainergym.backends import Backend, make_backend, shared_backend
from trainergym.env.core import AsyncTrainerEnv
from trainergym.env.tools import TOOLS
from trainergym.task.spec import families as installed_families
from trainergym.task.spec import get_family, load_task

__all__ = ["SYSTEM_PROMPT", "TrainerTRLEnv", "trainer_datasets"]

# The LLM agent's instructions, plus this route's turn rule (each call is one env step).
SYSTEM_PROMPT = AGENT_SYSTEM_PROMPT + " Every tool call counts as one turn of your budget."
ROLLOUT_ENDED = "the rollout ended before the episode did"


# --- the event loop the envs run on ------------------------------------------------------------
class _Loop:
    """An asyncio loop on a daemon thread, started on first use (and again in a forked child,
    where the parent's thread does not exist)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pid: int | None = None

    def get(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._pid != os.getpid():
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="trainergym-trl-envs", daemon=True).start()
                self._loop, self._pid = loop, os.getpid()
            return self._loop

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """Run `coro` on the loop and wait for it (never call this from the loop's own thread)."""
        return asyncio.run_coroutine_threadsafe(coro, self.get()).result()


_LOOP = _Loop()


# --- the environment ---------------------------------------------------------------------------
class TrainerTRLEnv:
    """One trainer-task episode at a time, for `GRPOTrainer(environment_factory=...)`.

    TRL calls the factory with no arguments; to configure, pass a `functools.partial`
    (picklable, as TRL's async worker needs), e.g. `partial(TrainerTRLEnv, backend="local")`.
    `on_episode_end(record)` is called once per scored episode with its id, task, family, seed,
    reward, `reward_breakdown`, turns and `truncated_reason` (set when the rollout, not the env,
    ended it), for logging. The core env is `self.env`; `self.final_info`
    is the last episode's final info once it has ended."""

    def __init__(self, backend: str = "mock", backend_kwargs: dict[str, Any] | None = None,
                 job_timeout: float | None = None, runs_dir: str | Path | None = None, reward_noise: bool = True,
                 workdir: str | Path | None = None, on_episode_end: Callable[[dict], Any] | None = None,
                 task_files: Sequence[str | Path] = ()):
        """`task_files`: the task files a dataset row may name (the operator's choice, as given to
        `trainer_datasets`); any other row task must be an installed family id."""
        kwargs = dict(backend_kwargs or {})
        self._task_files = {str(Path(f).resolve()): str(f) for f in task_files}
        # The mock is cheap and private; a GPU backend is one per process, so its cap holds across envs.
        self._backend: Backend = make_backend(backend, **kwargs) if backend == "mock" else shared_backend(backend, **kwargs)
        self.env = AsyncTrainerEnv(backend=self._backend, job_timeout=job_timeout, reward_noise=reward_noise,
                                   runs_dir=Path(runs_dir) if runs_dir else None,
                                   workdir=Path(workdir) if workdir else None)
        self.on_episode_end = on_episode_end
        self.final_info: dict | None = None
        self._row: dict[str, Any] = {}
        self._reported = False
        weakref.finalize(self, self.env.close)  # the last episode's workspace; TRL never closes envs

    def reset(self, task: str | None = None, family: str | None = None, seed: int | None = None, **row: Any) -> str:
        """Start an episode of the row's `task` (a family id or task file) or `family`, at `seed`,
        and return its task observation. An episode still open is ended first (as the rollout's end)."""
        if self.env.episode is not None and not self.env.episode.done:
            self._end(ROLLOUT_ENDED)
        self.final_info, self._reported = None, False
        ref = self._allowed(task or family)
        obs, info = _LOOP.run(self.env.reset(seed=seed, options={"task": ref} if ref else None))
        self._row = {"task": ref or info["task_id"], "family": info["family"], "seed": seed}
        return obs

    def _allowed(self, ref: str | None) -> str | None:
        """A row's task: an installed family id, or one of the operator's `task_files`. A dataset
        row is data, so it must not pick any TOML file on the host (bounds it wrote itself)."""
        if ref is None or ref in installed_families():
            return ref
        resolved = str(Path(ref).resolve())
        if resolved in self._task_files:
            return resolved
        raise ValueError(f"dataset row names task {ref!r}, which is neither an installed family ({', '.join(installed_families())}) "
                         "nor one of the task files given to TrainerTRLEnv(task_files=...)")

    def get_reward(self) -> float:
        """The episode reward: final once the episode ended, else what ending it now scores (the
        episode is then ended: a rollout is over when TRL asks for its reward)."""
        if self.env.episode is None:
            raise RuntimeError("get_reward() before reset(): no episode to score")
        if not self.env.episode.done:
            self._end(ROLLOUT_ENDED)
        reward = self.env.episode.reward
        if not self._reported:
            self._reported = True
            if self.on_episode_end is not None:
                self.on_episode_end({"episode_id": self.env.episode.id, **self._row, "reward": reward.total,
                                     "reward_breakdown": reward.model_dump(), "turns": self.env.episode.turns,
                                     "truncated_reason": (self.final_info or {}).get("truncated_reason")})
        return reward.total

    # The tools: each call is one env step; the docstrings are set from TOOLS below.
    def read_file(self, path: str) -> str:
        return self._call("read_file", path=path)

    def write_file(self, path: str, content: str) -> str:
        return self._call("write_file", path=path, content=content)

    def edit_file(self, path: str, old_string: str, new_string: str) -> str:
        return self._call("edit_file", path=path, old_string=old_string, new_string=new_string)

    def list_files(self, path: str = ".") -> str:
        return self._call("list_files", path=path)

    def get_baseline_scores(self) -> str:
        return self._call("get_baseline_scores")

    def submit_job(self) -> str:
        return self._call("submit_job")

    def _call(self, name: str, **arguments: Any) -> str:
        obs, _, terminated, truncated, info = _LOOP.run(self.env.step({"name": name, "arguments": arguments}))
        if (terminated or truncated) and "reward_breakdown" in info:
            self.final_info = dict(info)
        return obs

    def _end(self, reason: str) -> None:
        self.final_info = _LOOP.run(self.env.end(reason))


def _tool_docstring(name: str) -> str:
    """A Google-style docstring from the tool's spec: what `get_json_schema` turns into the schema."""
    spec = TOOLS[name]
    fields = spec.args.model_fields
    args = "".join(f"\n    {field}: {info.description}" for field, info in fields.items())
    return spec.description + (f"\n\nArgs:{args}" if args else "")


for _name in TOOLS:
    getattr(TrainerTRLEnv, _name).__doc__ = _tool_docstring(_name)


# --- the dataset -------------------------------------------------------------------------------
def _split(families: Sequence[str] | None, task_files: Sequence[str]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(train, test) as (task ref, family) pairs; held-out tasks (triage) are the test set."""
    refs = list(families) if families is not None else ([] if task_files else sorted(installed_families()))
    refs += [str(Path(p)) for p in task_files]
    train, test = [], []
    for ref in refs:
        spec = load_task(ref)
        held_out = spec.held_out or get_family(spec.family).HELD_OUT
        (test if held_out else train).append((ref, spec.family))
    return train, test


def _rows(tasks: list[tuple[str, str]], seeds: Iterable[int], system_prompt: str) -> list[dict]:
    # The user message is empty: TRL appends reset()'s observation (the task text) to it.
    prompt = [{"role": "system", "content": system_prompt}, {"role": "user", "content": ""}]
    return [{"prompt": prompt, "task": ref, "family": family, "seed": seed} for seed in seeds for ref, family in tasks]


def trainer_datasets(families: Sequence[str] | None = None, task_files: Sequence[str] = (), *,
                     seeds: Iterable[int] = range(64), test_seeds: Iterable[int] = range(8),
                     system_prompt: str = SYSTEM_PROMPT) -> tuple[Dataset, Dataset | None]:
    """(train, test) datasets of rows {prompt, task, family, seed}: one row per (task, seed),
    tasks in turn within a seed. `families`: ids, None meaning every installed family unless
    `task_files` (TOML paths) are given. Tasks of held-out families (triage), or whose file
    sets `held_out`, never reach the training set: they form the test set (None if there are
    none). GRPO repeats a row `num_generations` times, so a group shares its seed, and with it
    a surrogate's eval noise: identical jobs in a group score alike."""
    train, test = _split(families, task_files)
    if not train:
        raise ValueError("no training task: every task given is of a held-out family")
    train_ds = Dataset.from_list(_rows(train, seeds, system_prompt))
    test_ds = Dataset.from_list(_rows(test, test_seeds, system_prompt)) if test else None
    return train_ds, test_ds
