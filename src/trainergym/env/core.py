"""The WriteTrainingJob environment.

`AsyncTrainerEnv` is the episode state machine (async, for agents and RL loops that run
many episodes at once); `TrainerEnv` is its `gymnasium.Env` face, registered as
`trainergym/WriteTrainingJob-v0` with `ScoreTruncated` on top, so an episode that a wrapper
cuts (`TimeLimit`) is ended and scored too.

One episode: `reset` lays out a workspace for a task and returns the task observation. Each
`step` takes one agent message (one or more tool calls, in any format `actions` accepts),
runs the calls in order and returns their results as text; a malformed message is an error
observation and still costs a turn. `submit_job` validates the job; a valid job is trained by
the backend and scored, which ends the episode (terminated). Running out of submit attempts
also terminates; running out of turns truncates. The final step carries the episode reward,
and `info["reward_breakdown"]` its terms; `info["calls"]` gives each call's own result. A
caller that must stop early (a spent budget, a cancelled rollout) calls `end(reason)`: the
episode is truncated and scored as it stands, and a job in flight is cancelled.

`render_mode="ansi"` renders the transcript so far (`trainergym.env.transcript`, which also
reads a saved run's trajectory.jsonl).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
import re
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NotRequired, TypedDict

import gymnasium as gym

from trainergym.task import baselines
from trainergym.env.actions import MAX_ACTION_CHARS, ActionError, ToolCall, parse_action
from trainergym.backends import Backend, make_backend
from trainergym.job.result import RunResult
from trainergym.job.bundle import JOB_FILE, content_hash, parse_job
from trainergym.probe.checks import ProbeReport, probe
from trainergym.env.reward import RewardBreakdown, episode_reward
from trainergym.task.spec import TaskSpec, load_task
from trainergym.env import transcript
from trainergym.env.spaces import AnyText
from trainergym.env.tools import TOOLS, ToolOutcome, run_workspace_tool, validate_args
from trainergym.env.workspace import Limits, Workspace, WorkspaceError, lay_out

ENV_ID = "trainergym/WriteTrainingJob-v0"
DEFAULT_TASK = "calc_chain"


class CallResult(TypedDict):
    """One tool call of a step, for callers that answer each `tool_call_id`."""

    id: str | None  # the call's id in the message (None for a message that did not parse)
    name: str | None
    ok: bool
    content: str  # what the tool returned, or the error


class ResetInfo(TypedDict):
    """`info` of `reset`."""

    episode_id: str  # also the name of runs/<episode-id>/
    task_id: str
    family: str
    seed: int | None
    tool_schemas: list[dict]  # the agent's tools, as OpenAI function schemas
    workspace: str  # the episode's workspace directory on this host
    turns_left: int
    attempts_left: int  # submit_job attempts


class StepInfo(TypedDict):
    """`info` of `step` (and, with `truncated_reason`, of `end`). The last step of an episode
    adds `reward_breakdown` (the terms of the reward, `RewardBreakdown`) and `result` (the
    job's `RunResult` as JSON, or None if no job was trained)."""

    tool: list[str | None]  # the tools called, in order
    ok: bool  # every call succeeded
    error: str | None  # the first call's error, if any
    calls: list[CallResult]
    turns_left: int
    attempts_left: int
    reward_breakdown: NotRequired[dict]
    result: NotRequired[dict | None]
    truncated_reason: NotRequired[str]


@dataclass
class Episode:
    """Everything that happened in one episode so far."""

    id: str
    task: TaskSpec
    workspace: Workspace
    dir: Path
    seed: int | None = None
    turns: int = 0
    attempts: int = 0
    parseable: bool = False
    valid_on_attempt: int | None = None
    failed_hashes: dict[str, ProbeReport] = field(default_factory=dict)
    manifest: dict | None = None
    result: RunResult | None = None
    reward: RewardBreakdown | None = None
    done: bool = False
    trajectory: list[dict] = field(default_factory=list)
    cancelled_jobs: list[str] = field(default_factory=list)  # jobs cancelled before their result

    @property
    def turns_left(self) -> int:
        """Turns the agent may still take; the episode is truncated at 0."""
        return max(0, self.task.max_turns - self.turns)

    @property
    def attempts_left(self) -> int:
        """`submit_job` calls the agent may still make; the episode terminates at 0."""
        return max(0, self.task.max_submit_attempts - self.attempts)


class AsyncTrainerEnv:
    """The episode state machine. One instance runs one episode at a time."""

    def __init__(self, task: str | Path | TaskSpec | None = None, backend: Backend | str = "mock",
                 workdir: Path | None = None, runs_dir: Path | None = None, limits: Limits = Limits(),
                 job_timeout: float | None = None, reward_noise: bool = True):
        self.default_task = task or DEFAULT_TASK
        # Off: a surrogate job's reward uses its noise-free expected post (a lower-variance RL
        # signal). A measured post keeps its eval's sampling noise: there is no other value.
        self.reward_noise = reward_noise
        self.backend = make_backend(backend) if isinstance(backend, str) else backend
        self.workdir = Path(workdir) if workdir else None
        self.runs_dir = Path(runs_dir) if runs_dir else None
        self.limits = limits
        self.job_timeout = job_timeout
        self.episode: Episode | None = None
        self._pending = None  # the handle of a job in flight

    @property
    def tool_schemas(self) -> list[dict]:
        """The agent's tools in OpenAI function-calling format."""
        return [spec.schema for spec in TOOLS.values()]

    # --- reset ---------------------------------------------------------------------------
    async def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, ResetInfo]:
        """Start an episode. `options`: {"task": TaskSpec | task file path | family id} or
        {"family": id}. The seed is recorded; the task observation does not depend on it. An unknown
        option is a ValueError (a misspelt "famly" must not silently run the default task), and so
        is a baselines file that cannot be trusted: found now, not after the GPU job."""
        options = options or {}
        unknown = set(options) - {"task", "family"}
        if unknown:
            raise ValueError(f"unknown reset option(s) {', '.join(sorted(map(repr, unknown)))}: "
                             "the options are 'task' (a TaskSpec, task file or family id) and 'family'")
        self.close()
        task = load_task(options.get("task") or options.get("family") or self.default_task)
        baselines.best_pre(task.family)
        # The id names the run's folder: a task id is not trusted to be a safe file name.
        safe = re.sub(r"[^A-Za-z0-9_-]+", "_", task.id)[:64] or "task"
        episode_id = f"{safe}-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
        root = Path(tempfile.mkdtemp(prefix="tg-episode-", dir=self.workdir))
        ws = lay_out(root / "workspace", task, self.limits)
        self.episode = Episode(id=episode_id, task=task, workspace=ws, dir=root, seed=seed)
        obs = task.brief()
        info: ResetInfo = {"episode_id": episode_id, "task_id": task.id, "family": task.family, "seed": seed,
                           "tool_schemas": self.tool_schemas, "workspace": str(ws.root), **self._counters()}
        self.episode.trajectory.append({"event": "reset", "observation": obs, "seed": seed, "task": task.id})
        return obs, info

    def _counters(self) -> dict:
        ep = self.episode
        return {"turns_left": ep.turns_left, "attempts_left": ep.attempts_left} if ep else {}

    # --- step ----------------------------------------------------------------------------
    async def step(self, action: Any) -> tuple[str, float, bool, bool, StepInfo]:
        """Run one agent message; one turn, however many tool calls it holds.

        Returns (observation, reward, terminated, truncated, info):
        - observation: the tool results as text (each call's under its name when several).
        - reward: 0 until the episode ends, then the episode reward (`info["reward_breakdown"]`).
        - terminated: a valid job was trained and scored, or the submit attempts ran out.
        - truncated: the turns ran out (the episode is scored as it stands).
        - info: a `StepInfo`.
        A step after the episode ended returns (message, 0.0, True, False, {"ok": False, ...})."""
        ep = self.episode
        if ep is None:
            return "No episode is running: call reset() first.", 0.0, True, False, {"ok": False, "error": "no episode"}
        if ep.done:
            return "The episode is over: call reset() to start another.", 0.0, True, False, {"ok": False, "error": "episode over"}
        ep.turns += 1
        parsed = parse_action(action)
        outcomes: list[tuple[ToolCall | None, ToolOutcome]] = []
        if isinstance(parsed, ActionError):
            outcomes.append((None, ToolOutcome(ok=False, content=f"error: {parsed.message}")))
        else:
            for call in parsed:
                outcomes.append((call, await self._run_call(call)))
                if ep.done:
                    break  # the rest of the message is moot once the episode has ended
        terminated = ep.done
        truncated = not terminated and ep.turns >= ep.task.max_turns
        if truncated:
            self._finish(note="out of turns")
        obs = self._render(outcomes)
        if truncated:
            obs += "\n\nOut of turns: the episode is over."
        info: StepInfo = {
            "tool": [c.name if c else None for c, _ in outcomes],
            "ok": all(o.ok for _, o in outcomes),
            "error": next((o.content for _, o in outcomes if not o.ok), None),
            # per call, for callers that answer each tool_call_id (an unparseable message has id None)
            "calls": [{"id": c.id if c else None, "name": c.name if c else None, "ok": o.ok, "content": o.content}
                      for c, o in outcomes],
            **self._counters(),
        }
        reward = 0.0
        if ep.done:
            info["reward_breakdown"] = ep.reward.model_dump()
            info["result"] = ep.result.model_dump(mode="json") if ep.result else None
            reward = ep.reward.total
        ep.trajectory.append({"event": "step", "turn": ep.turns, "action": _jsonable(action), "observation": obs,
                              "reward": reward, "terminated": terminated, "truncated": truncated,
                              "info": {k: v for k, v in info.items() if k != "reward_breakdown"}})
        if ep.done:
            self._save_run()
        return obs, reward, terminated, truncated, info

    @staticmethod
    def _render(outcomes: list[tuple[ToolCall | None, ToolOutcome]]) -> str:
        if len(outcomes) == 1:
            return outcomes[0][1].content
        return "\n\n".join(f"[{c.name if c else 'error'}] {o.content}" for c, o in outcomes)

    async def _run_call(self, call: ToolCall) -> ToolOutcome:
        ep = self.episode
        args = validate_args(call.name, call.arguments)
        if isinstance(args, str):
            return ToolOutcome(ok=False, content=f"error: {args}")
        if call.name == "submit_job":
            return await self._submit()
        return run_workspace_tool(ep.workspace, ep.task, call.name, args)

    def _unsubmittable(self, problem: str) -> ToolOutcome:
        return ToolOutcome(ok=False, content=f"error: submit_job refused: {problem}. This did not use a submit "
                                             f"attempt (attempts left: {self.episode.attempts_left}).")

    async def _submit(self) -> ToolOutcome:
        ep = self.episode
        # File names and contents that are not UTF-8 cannot be hashed, bundled or shown: refuse
        # them before spending an attempt (the file tools already keep them out).
        try:
            problem = ep.workspace.encoding_problem()
        except WorkspaceError as e:
            problem = str(e)
        if problem:
            return self._unsubmittable(problem)
        ep.attempts += 1
        cached = bundle = None
        try:
            digest = content_hash(ep.workspace.root)
            cached = ep.failed_hashes.get(digest)  # identical to a submission that already failed
            if cached is None:
                report, bundle = await asyncio.to_thread(probe, ep.workspace.root, ep.task, ep.dir / "bundle")
        except UnicodeError as e:  # defence in depth: text the check above missed; the attempt is refunded
            ep.attempts -= 1
            return self._unsubmittable(f"the job holds text that is not valid UTF-8 ({e.reason})")
        job_text = ep.workspace.root / JOB_FILE
        if job_text.is_file() and parse_job(job_text.read_text(errors="replace"))[0] is not None:
            ep.parseable = True
        if cached is not None:
            report = cached
            note = "This job is byte-identical to an earlier failed submission; the cached report follows.\n"
        elif report.infra:  # the host failed the probe, not the job: no attempt spent, nothing cached
            ep.attempts -= 1
            return ToolOutcome(ok=False, content=f"{report.render()}\n\nThe probe could not judge this job for a reason "
                                                 f"of the host's, not the job's: this did not use a submit attempt "
                                                 f"(attempts left: {ep.attempts_left}).")
        else:
            note = ""
            if bundle is not None:
                ep.valid_on_attempt = ep.attempts
                ep.manifest = bundle.manifest.model_dump(mode="json")
                return await self._train(report, bundle)
            ep.failed_hashes[digest] = report
        left = ep.attempts_left
        text = f"{note}{report.render()}\n\nAttempts left: {left}."
        if left == 0:  # the note names what failed, so a batch's table says why an agent never validated
            failed = [i.check for i in report.items if i.status == "fail"]
            self._finish(note="submit attempts exhausted" + (f"; the last failed {', '.join(failed)}" if failed else ""))
            text += " No attempts left: the episode is over."
        return ToolOutcome(ok=False, content=text)

    async def _train(self, report: ProbeReport, bundle) -> ToolOutcome:
        ep = self.episode
        # What a surrogate draws its eval noise from: the episode (its seed, else its id), never
        # the bundle's bytes, so no comment or whitespace is luckier than another.
        bundle.manifest.episode = f"seed:{ep.seed}" if ep.seed is not None else f"episode:{ep.id}"
        bundle.manifest.episode_id = ep.id
        submitting = asyncio.ensure_future(self.backend.submit(bundle, ep.task))
        try:
            handle = await asyncio.shield(submitting)
        except asyncio.CancelledError:  # let the submit land, record and cancel it: no job runs unknown
            handle = await submitting
            self._record_job(handle)
            await self._cancel(handle)
            raise
        self._pending = handle
        self._record_job(handle)
        try:
            result = await self.backend.result(handle, timeout=self.job_timeout)
        except (TimeoutError, asyncio.TimeoutError):
            await self._cancel(handle)
            result = None
        except asyncio.CancelledError:  # the caller gave up on the episode: the job must not run on
            await asyncio.shield(self._cancel(handle))
            raise
        finally:
            self._pending = None
        ep.result = result
        self._finish()
        r = ep.reward
        if result is None:
            summary = "The job did not finish within the time limit."
        elif result.status != "succeeded":
            summary = f"The job failed on the GPU: {result.failure_reason}.\n{result.log_tail}"
        else:
            expected = f", expected {r.post_expected:.3f}" if r.post_expected is not None else ""
            summary = (f"The job trained {result.steps_done} steps on {result.gpu_count}x {result.gpu}: hidden-eval score "
                       f"{result.post:.3f}{expected} (untrained {result.base_model}: {result.pre:.3f}; best untrained: "
                       f"{r.best_pre:.3f}) [{result.source_label}]" + ("" if r.reward_noise else "; the reward uses the expected "
                                                                   "score (reward_noise off)") + ".")
        return ToolOutcome(ok=True, content=f"{report.render()}\n\n{summary}\nEpisode reward {r.total:.3f} "
                                            f"(validation {r.validation:.2f}, job quality {r.job_quality:.3f}, speed {r.speed:.2f}).")

    def _record_job(self, handle) -> None:
        """runs/<episode-id>/job.json, as soon as a job is submitted: should this process die
        before the episode ends, the record still names the job that may be running."""
        if self.runs_dir is None:
            return
        out = self.runs_dir / self.episode.id
        out.mkdir(parents=True, exist_ok=True)
        (out / "job.json").write_text(json.dumps({"job_id": handle.job_id, "backend": handle.backend,
                                                  "content_hash": handle.content_hash, "submitted_at": time.time()}))

    async def _cancel(self, handle) -> None:
        """Cancel a job, and record it in the episode (the run's end record names it)."""
        await self.backend.cancel(handle)
        if self.episode is not None and handle.job_id not in self.episode.cancelled_jobs:
            self.episode.cancelled_jobs.append(handle.job_id)

    def reward_now(self) -> RewardBreakdown:
        """The reward of the episode as it stands: its final reward once over, else what ending
        it now would score (what `end()` gives; adapters that cannot call `end` report it)."""
        ep = self.episode
        if ep.done:
            return ep.reward
        res = ep.result
        expected = res.details.get("post_expected") if res and res.source == "surrogate" else None
        post = res.post if res else None
        if not self.reward_noise and expected is not None and post is not None:
            post = expected
        best_score, best_source, best_model = _best_pre(ep.task.family, res)
        r = episode_reward(
            attempts=ep.attempts, parseable=ep.parseable, valid_on_attempt=ep.valid_on_attempt,
            job_succeeded=res is not None and res.status == "succeeded", post=post,
            best_pre=best_score, train_seconds=res.train_seconds if res else None,
            budget_seconds=ep.task.bounds.gpu_hours * 3600 / ep.task.bounds.gpu_count,
            job_status=res.status if res else None,
        )
        r.best_pre_source, r.best_pre_model = best_source, best_model
        if r.post is not None:
            r.post_expected, r.source, r.reward_noise = expected, res.source_label, self.reward_noise or expected is None
        return r

    def _finish(self, note: str = "") -> None:
        ep = self.episode
        ep.reward = self.reward_now()
        if note and not ep.reward.note:
            ep.reward.note = note
        ep.done = True

    # --- records -------------------------------------------------------------------------
    def _save_run(self) -> None:
        """runs/<episode-id>/: trajectory.jsonl, workspace/, manifest.json, result.json, reward.json
        (and job.json, written when the job was submitted)."""
        ep = self.episode
        if self.runs_dir is None:
            return
        out = self.runs_dir / ep.id
        out.mkdir(parents=True, exist_ok=True)
        with open(out / "trajectory.jsonl", "w") as f:
            for row in ep.trajectory:
                f.write(json.dumps(row, default=str) + "\n")
        ep.workspace.snapshot(out / "workspace")
        if ep.manifest:
            (out / "manifest.json").write_text(json.dumps(ep.manifest, indent=2))
        if ep.result:
            (out / "result.json").write_text(ep.result.model_dump_json(indent=2))
        (out / "reward.json").write_text(ep.reward.model_dump_json(indent=2))

    async def end(self, reason: str) -> dict:
        """End the episode early on the caller's behalf (a spent budget, a cancelled rollout):
        truncated with `reason`, scored as it stands, its job cancelled if one is in flight.
        Returns the final info, like the last step's."""
        ep = self.episode
        if ep is None:
            return {"ok": False, "error": "no episode"}
        if self._pending is not None:
            await self._cancel(self._pending)
        if not ep.done:
            self._finish(note=reason)
            ep.trajectory.append({"event": "end", "reason": reason, "reward": ep.reward.total,
                                  **({"cancelled_jobs": list(ep.cancelled_jobs)} if ep.cancelled_jobs else {})})
            self._save_run()
        return {"reward_breakdown": ep.reward.model_dump(), "truncated_reason": reason,
                "result": ep.result.model_dump(mode="json") if ep.result else None, **self._counters()}

    @property
    def run_path(self) -> Path | None:
        """runs/<episode-id>/ of the current episode, or None without a `runs_dir`."""
        return self.runs_dir / self.episode.id if self.runs_dir and self.episode else None

    def close(self) -> None:
        """Remove the current episode's workspace (a saved run under `runs_dir` stays)."""
        if self.episode is not None:
            shutil.rmtree(self.episode.dir, ignore_errors=True)


def _best_pre(family: str, result: RunResult | None) -> tuple[float, str, str]:
    """(score, source, model) of the bar the uplift is measured against. A mini-scale result is
    paid against its own base's pre score on the same hidden-eval items (the best, and only,
    untrained model at that scale), never the full-scale baselines of baselines.toml: a tiny model
    at 0.3 against a reported 0.742 would measure nothing."""
    if result is not None and result.scale == "mini" and result.pre is not None:
        return result.pre, "measured (mini scale: the mini base's own pre on the same eval)", result.base_model
    best = baselines.best_pre(family)
    return best.score, best.source, best.model


def _jsonable(action: Any) -> Any:
    """The action as the trajectory records it (whatever the agent handed over)."""
    try:
        if hasattr(action, "model_dump"):
            return action.model_dump()
        json.dumps(action)
        return action
    except (TypeError, ValueError, RecursionError):
        try:
            return repr(action)[:MAX_ACTION_CHARS]
        except RecursionError:
            return f"<a {type(action).__name__} nested too deep to record>"


class TrainerEnv(gym.Env):
    """Gymnasium face of `AsyncTrainerEnv`: actions and observations are text.

    Runs the async env on a private event loop (made again if `close` ended it); inside a running
    event loop use `AsyncTrainerEnv` directly. `step` also accepts dicts and OpenAI messages.
    `render_mode="ansi"`: `render()` returns the episode's transcript so far. An episode still
    open when `reset` or `close` comes is ended first (`end`), so its record is saved."""

    # render_fps only quiets Gymnasium's checker: a transcript has no frame rate.
    metadata = {"render_modes": ["ansi"], "render_fps": 1}

    def __init__(self, task: str | Path | TaskSpec | None = None, backend: Backend | str = "mock",
                 render_mode: str | None = None, **kwargs):
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode {render_mode!r} is not one of {self.metadata['render_modes']}")
        self.render_mode = render_mode
        self.inner = AsyncTrainerEnv(task=task, backend=backend, **kwargs)
        self.observation_space = AnyText()
        self.action_space = AnyText()
        self._loop = asyncio.new_event_loop()

    @property
    def tool_schemas(self) -> list[dict]:
        """The agent's tools as OpenAI function schemas (the same for every episode)."""
        return self.inner.tool_schemas

    @property
    def episode_open(self) -> bool:
        """An episode has started and not yet ended."""
        return self.inner.episode is not None and not self.inner.episode.done

    def _run(self, coroutine):
        if self._loop.is_closed():  # closed by close(): a closed env may be reset again
            self._loop = asyncio.new_event_loop()
        return self._loop.run_until_complete(coroutine)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[str, ResetInfo]:
        """Start an episode: `options` is {"task": TaskSpec | task file | family id} or
        {"family": id}. Returns (the task text, a `ResetInfo`)."""
        super().reset(seed=seed)
        if self.episode_open:
            self._run(self.inner.end("reset before the episode ended"))
        return self._run(self.inner.reset(seed=seed, options=options))

    def step(self, action) -> tuple[str, float, bool, bool, StepInfo]:
        """One agent message; see `AsyncTrainerEnv.step` for what it returns."""
        return self._run(self.inner.step(action))

    def end(self, reason: str) -> dict:
        """End the episode on the caller's behalf, scored as it stands (`AsyncTrainerEnv.end`):
        what a wrapper that truncates the episode calls. Returns the final info."""
        return self._run(self.inner.end(reason))

    def render(self) -> str | None:
        """`render_mode="ansi"`: the transcript of the episode so far (`transcript.render`); None
        without a render mode."""
        if self.render_mode != "ansi":
            return None
        ep = self.inner.episode
        return transcript.render(ep.trajectory) if ep else ""

    def close(self):
        """End an open episode, remove its workspace, and close the private event loop (a later
        `reset` makes a new one)."""
        if self.episode_open and not self._loop.is_closed():
            self._run(self.inner.end("the env was closed"))
        self.inner.close()
        if not self._loop.is_closed():
            self._loop.close()


class ScoreTruncated(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Ends and scores an episode that a wrapper beneath it cut short.

    `TimeLimit` (`gym.make(..., max_episode_steps=N)`) returns `truncated=True` without telling the
    env, which left the episode open and unscored: reward 0 and no breakdown. This wrapper sees
    the cut and ends the episode as the LLM agent's budget stop does (`end(reason)`): the step
    then carries the episode reward, `reward_breakdown` and `truncated_reason`. The registered id
    puts it outermost; a time limit applied by hand goes beneath it: `ScoreTruncated(TimeLimit(
    TrainerEnv(), N))`."""

    def __init__(self, env: gym.Env):
        gym.utils.RecordConstructorArgs.__init__(self)
        gym.Wrapper.__init__(self, env)

    def step(self, action):
        """The wrapped step; a cut the env did not make ends the episode, scored as it stands."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        trainer = self.env.unwrapped
        if (terminated or truncated) and isinstance(trainer, TrainerEnv) and trainer.episode_open:
            final = trainer.end(self._reason())
            reward = final["reward_breakdown"]["total"]
            info = {**info, **final}
        return obs, reward, terminated, truncated, info

    def _reason(self) -> str:
        env = self.env
        while isinstance(env, gym.Wrapper):
            if isinstance(env, gym.wrappers.TimeLimit):
                return f"time limit: {env._max_episode_steps} steps (TimeLimit)"
            env = env.env
        return "truncated by a wrapper"


def register() -> None:
    """Register `trainergym/WriteTrainingJob-v0` with Gymnasium (done on `import trainergym`),
    with `ScoreTruncated` outermost, above any `TimeLimit` that `gym.make` adds."""
    if ENV_ID not in gym.registry:
        gym.register(id=ENV_ID, entry_point="trainergym.env.core:TrainerEnv", disable_env_checker=False,
                     additional_wrappers=(gym.envs.registration.WrapperSpec(
                         name="ScoreTruncated", entry_point="trainergym.env.core:ScoreTruncated", kwargs={}),))
