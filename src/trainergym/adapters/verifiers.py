"""The trainer task as a verifiers v1 environment: our tools as its tools, our reward as its reward.

`vf-eval trainergym ...` scores a model as a trainer and prime-rl trains a trainer agent from the
same taskset (the id resolves to `TrainerTaskset` through the `trainergym` package's `__all__`).
Each task is one trainer task (a family, or a task file) at one seed; its prompt is the env's
task observation. `TrainerToolset` is the agent's tools (`trainergym.env.tools.TOOLS`, advertised
under their own names): each rollout gets a fresh `AsyncTrainerEnv`, and each tool call is one
env step, so under verifiers every call costs a turn of the task's budget.

The reward crosses a process boundary. verifiers serves the toolset as an MCP server in its own
process and scores in the main one, so the reward cannot read the env: the toolset states the
episode's outcome in its tool results instead, as a last line `[trainergym-episode] {json} <hmac>`
after each `submit_job` and when the episode ends. The HMAC is keyed by a per-task secret in
the task data, which is never in the prompt: a model cannot forge an outcome, neither in its own
text (never read) nor by writing the line into a file and reading it back (unsigned). The
reward is the latest signed outcome (a final one beats any provisional one, so replaying an old
line changes nothing), which is what `AsyncTrainerEnv.end("the model stopped")` gives at that
point: an episode the model leaves unfinished scores as the env scores it truncated there
(-0.1 with no submission). A `@vf.stop` ends the rollout when the episode ends.

A rollout abandoned mid-call does not leave its GPU job running. A cancelled call (in process,
the scorer's rollout cancelled) cancels the job and ends the episode. In its own process the
tool server is stopped with SIGTERM (verifiers' runtime teardown, SIGKILL 5 s later) and uvicorn
waits for the call in flight, so the toolset chains its own SIGTERM handler before uvicorn's:
it cancels the call in flight, which cancels the job, and the episode is ended and recorded.

The hidden-eval scorer (`trainergym.host.scorer.play`) plays this taskset in process as well, which
is how the tests evaluate it offline: `vf-eval`'s harness needs PyPI for its uv script.
"""

import asyncio
import hashlib
import hmac
import json
import re
import secrets
import signal
import weakref
from pathlib import Path
from typing import Annotated, Any, ClassVar

from trainergym.adapters import requires_extra

with requires_extra("verifiers", None):
    import verifiers.v1 as vf
    from pydantic import Field
    from verifiers.v1.task import task_key
    from verifiers.v1.types import content_text

from trainergym.agents.prompt import SYSTEM_PROMPT as AGENT_SYSTEM_PROMPT
from trainergym.backends import make_backend
from trainergym.env.core import AsyncTrainerEnv
from trainergym.env.reward import NO_SUBMISSION_TOTAL, RewardBreakdown
from trainergym.task.spec import TaskSpec, families, load_task
from trainergym.env.tools import TOOLS, EditFile, ListFiles, ReadFile, WriteFile

__all__ = ["TrainerTaskset"]

SYSTEM_PROMPT = AGENT_SYSTEM_PROMPT + " Every tool call counts as one turn of your budget."
MARKER = "[trainergym-episode]"
_MARKER_LINE = re.compile(r"^\[trainergym-episode\] (\{.*\}) ([0-9a-f]{64})$", re.MULTILINE)


# --- the episode outcome, as the toolset states it and the reward reads it ----------------------
def _sign(key: str, body: str) -> str:
    return hmac.new(key.encode(), body.encode(), hashlib.sha256).hexdigest()


def seal(key: str, outcome: dict) -> str:
    """The marker line stating `outcome`, signed with the task's secret."""
    body = json.dumps(outcome, sort_keys=True, separators=(",", ":"))
    return f"{MARKER} {body} {_sign(key, body)}"


def outcomes(key: str, texts: list[str]) -> list[dict]:
    """The genuine outcomes stated in `texts` (tool results), in order; forged lines are ignored."""
    found = []
    for text in texts:
        for body, sig in _MARKER_LINE.findall(text):
            if key and hmac.compare_digest(sig, _sign(key, body)):
                found.append(json.loads(body))
    return found


def _outcome(r: RewardBreakdown, turn: int, done: bool) -> dict:
    return {"turn": turn, "done": done, "reward": r.total, "validated": r.validated,
            "job_succeeded": r.job_status == "succeeded", "attempts": r.attempts, "post": r.post, "uplift": r.uplift,
            "surrogate": r.source == "surrogate"}


NO_SUBMISSION = {"turn": 0, "done": False, "reward": NO_SUBMISSION_TOTAL, "validated": False,
                 "job_succeeded": False, "attempts": 0, "post": None, "uplift": None, "surrogate": False}


# --- the tools ----------------------------------------------------------------------------------
class TrainerToolsetConfig(vf.ToolsetConfig):
    """The toolset's settings: the backend that trains submitted jobs, how long one may take, and
    whether a mock job's reward keeps the eval's sampling noise."""

    backend: str = "mock"
    """The trainergym backend that trains submitted jobs: mock (a surrogate), local, runpod."""
    backend_options: dict[str, Any] = {}
    """Backend options (`trainergym.backends.BackendOptions` fields), e.g. {"latency": 30} for the mock."""
    runs_dir: str | None = None
    """Where each episode's record is written (runs/<episode-id>/, as `trainergym episode` writes it)."""
    job_timeout: float | None = None
    """Seconds a submitted job may take; keep it under the harness's `tool_timeout`."""
    reward_noise: bool = True
    """Off: a mock job's reward uses the surrogate's expected post, without eval noise."""


def _arg(model, name: str):
    return Field(description=model.model_fields[name].description)


def _tool(fn):
    """`vf.tool`, described as `trainergym.env.tools.TOOLS` describes it (one text for both faces)."""
    fn.__doc__ = TOOLS[fn.__name__].description
    return vf.tool(fn)


class TrainerToolset(vf.Toolset[TrainerToolsetConfig]):
    """The agent's tools as a verifiers toolset. `setup_task` starts a fresh `AsyncTrainerEnv`
    episode per rollout; each tool call is one env step (one at a time) and returns the env's
    observation, plus the signed outcome line after a `submit_job` and when the episode ends.
    `_tool` replaces each tool method's docstring with `TOOLS`' description, which is what the model
    reads."""

    # None advertises the tools bare (read_file, submit_job, ...): the names the task
    # observation, INSTRUCTIONS.md and `AsyncTrainerEnv.tool_schemas` use.
    TOOL_PREFIX = None
    # Set when the toolset is the tool server's process (`python -m trainergym.adapters.verifiers`):
    # a SIGTERM then means the rollout is being torn down.
    OWN_PROCESS: ClassVar[bool] = False
    ABANDONED = "the rollout was abandoned during this call"

    def __init__(self, config: TrainerToolsetConfig) -> None:
        super().__init__(config)
        self.env: AsyncTrainerEnv | None = None
        self.key = ""
        self._lock = asyncio.Lock()  # one env step at a time, even if a harness calls in parallel
        self._calls: set[asyncio.Task] = set()  # the tool calls in flight
        self._hooked = False

    async def setup_task(self, task) -> None:
        """A fresh episode of the task for this rollout."""
        if self.env is not None:
            self.env.close()
        backend = make_backend(self.config.backend, **self.config.backend_options)
        self.env = AsyncTrainerEnv(backend=backend, job_timeout=self.config.job_timeout,
                                   reward_noise=self.config.reward_noise,
                                   runs_dir=Path(self.config.runs_dir) if self.config.runs_dir else None)
        await self.env.reset(seed=task.seed, options={"task": TaskSpec.model_validate(task.spec)})
        self.key = task.episode_key
        # In process (the scorer) nobody tears a toolset down: drop the workspace with it.
        weakref.finalize(self, self.env.close)

    def abandon(self) -> None:
        """Cancel the tool calls in flight: each cancels its job and ends the episode (`_step`).
        What the SIGTERM of a tool server's teardown triggers."""
        for call in list(self._calls):
            call.get_loop().call_soon_threadsafe(call.cancel)

    def _hook_teardown(self) -> None:
        """In the tool server's own process, chain a SIGTERM handler before uvicorn's (installed
        by the time a call arrives): uvicorn alone would wait for a call in flight, a job that
        takes minutes, until verifiers kills the process and the job runs on unowned."""
        if self._hooked or not self.OWN_PROCESS:
            return
        self._hooked = True
        previous = signal.getsignal(signal.SIGTERM)

        def on_sigterm(signum, frame):
            self.abandon()
            if callable(previous):
                previous(signum, frame)
            elif previous == signal.SIG_DFL:  # nobody shuts down gracefully: end once the calls are done
                asyncio.get_running_loop().call_soon(lambda: asyncio.ensure_future(self._terminate()))

        signal.signal(signal.SIGTERM, on_sigterm)

    async def _terminate(self) -> None:
        await asyncio.gather(*self._calls, return_exceptions=True)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.raise_signal(signal.SIGTERM)

    async def _step(self, name: str, **arguments) -> str:
        self._hook_teardown()
        call = asyncio.current_task()
        self._calls.add(call)
        try:
            return await self._locked_step(name, arguments)
        except asyncio.CancelledError:
            # The rollout gave up on this call: its job was cancelled by the env; end the episode
            # so it is scored and recorded as it stands.
            env = self.env
            if env is not None and env.episode is not None and not env.episode.done:
                await asyncio.shield(env.end(self.ABANDONED))
            raise
        finally:
            self._calls.discard(call)

    async def _locked_step(self, name: str, arguments: dict) -> str:
        async with self._lock:
            env = self.env
            if env is None or env.episode is None:
                return "error: the tools were not set up for a task"
            if env.episode.done:
                return "The episode is over: no further tool calls are needed."
            obs, *_ = await env.step({"name": name, "arguments": arguments})
            ep = env.episode
            if ep.done:
                line = seal(self.key, _outcome(env.reward_now(), ep.turns, True))
                env.close()  # the workspace and bundle are no longer needed
            elif name == "submit_job":
                # What `env.end()` would score now, so a rollout the model leaves here gets the env's reward.
                line = seal(self.key, _outcome(env.reward_now(), ep.turns, False))
            else:
                return obs
            return f"{obs}\n\n{line}"

    @_tool
    async def read_file(self, path: Annotated[str, _arg(ReadFile, "path")]) -> str:
        """`read_file` as one env step; returns the env's observation."""
        return await self._step("read_file", path=path)

    @_tool
    async def write_file(self, path: Annotated[str, _arg(WriteFile, "path")],
                         content: Annotated[str, _arg(WriteFile, "content")]) -> str:
        """`write_file` as one env step; returns the env's observation."""
        return await self._step("write_file", path=path, content=content)

    @_tool
    async def edit_file(self, path: Annotated[str, _arg(EditFile, "path")],
                        old_string: Annotated[str, _arg(EditFile, "old_string")],
                        new_string: Annotated[str, _arg(EditFile, "new_string")]) -> str:
        """`edit_file` as one env step; returns the env's observation."""
        return await self._step("edit_file", path=path, old_string=old_string, new_string=new_string)

    @_tool
    async def list_files(self, path: Annotated[str, _arg(ListFiles, "path")] = ".") -> str:
        """`list_files` as one env step; returns the env's observation."""
        return await self._step("list_files", path=path)

    @_tool
    async def get_baseline_scores(self) -> str:
        """`get_baseline_scores` as one env step; returns the env's observation."""
        return await self._step("get_baseline_scores")

    @_tool
    async def submit_job(self) -> str:
        """`submit_job` as one env step (validation, then training and scoring of a valid job);
        returns the env's observation and the signed outcome line, final once the episode has ended.
        """
        return await self._step("submit_job")


# --- the task -----------------------------------------------------------------------------------
class TrainerData(vf.TaskData):
    """One trainer task's data: its spec, its episode seed and the secret that signs its outcomes.
    """

    spec: dict
    """The TaskSpec, whole: the tool server needs no task file."""
    seed: int = 0
    episode_key: str = ""
    """Secret that signs the episode outcome in tool results; never shown to the model."""


class TrainerTaskConfig(vf.TaskConfig):
    """A trainer task's settings: those of its toolset."""

    tools: TrainerToolsetConfig = TrainerToolsetConfig()


class TrainerTask(vf.Task[TrainerData, vf.State, TrainerTaskConfig]):
    """One trainer task at one seed: `TrainerToolset` as its tools; the latest signed episode
    outcome among its tool results as its reward and metrics."""

    @classmethod
    def toolsets(cls, config: TrainerTaskConfig) -> list[vf.Toolset]:
        """The task's one toolset: `TrainerToolset` with `config.tools`."""
        return [TrainerToolset(config.tools)]

    @property
    def key(self) -> str:
        """The task's identity: a hash of its data without the per-load secret (`episode_key`) and
        `idx`, so it is the same on every load."""
        # The secret is drawn at load time; a task's identity must not change with it.
        return task_key(self.data.model_dump(mode="json", exclude_none=True, exclude={"episode_key", "idx"}))

    def outcome(self, messages) -> dict:
        """The episode's outcome from the tool results among `messages`: the last signed
        statement (final before provisional), else no submission."""
        texts = [content_text(m.content) for m in messages if isinstance(m, vf.ToolMessage)]
        found = outcomes(self.data.episode_key, texts)
        return max(found, key=lambda o: (o["done"], o["turn"]), default=NO_SUBMISSION)

    @vf.stop
    async def episode_over(self, request: vf.Request) -> bool:
        """End the rollout once the env has ended the episode; stopping on the request also
        commits its last tool result, the final outcome, to the trace."""
        return self.outcome(request.messages)["done"]

    @vf.reward(weight=1.0)
    async def trainer_reward(self, trace: vf.Trace) -> float:
        """The episode reward of the latest signed outcome (`NO_SUBMISSION_TOTAL` when there is
        none)."""
        return float(self.outcome(trace.tool_messages)["reward"])

    @vf.metric
    async def validated(self, trace: vf.Trace) -> float:
        """1 if a submitted job passed validation, else 0."""
        return float(self.outcome(trace.tool_messages)["validated"])

    @vf.metric
    async def job_succeeded(self, trace: vf.Trace) -> float:
        """1 if the episode's job trained and was scored, else 0."""
        return float(self.outcome(trace.tool_messages)["job_succeeded"])

    @vf.metric
    async def submit_attempts(self, trace: vf.Trace) -> float:
        """The submit attempts the episode used."""
        return float(self.outcome(trace.tool_messages)["attempts"])

    @vf.metric
    async def post(self, trace: vf.Trace) -> float:
        """The trained model's hidden-eval score (0 when no job succeeded); see `surrogate`."""
        return float(self.outcome(trace.tool_messages)["post"] or 0.0)

    @vf.metric
    async def uplift(self, trace: vf.Trace) -> float:
        """post - best untrained score (0 when no job succeeded); see `surrogate`."""
        return float(self.outcome(trace.tool_messages)["uplift"] or 0.0)

    @vf.metric
    async def surrogate(self, trace: vf.Trace) -> float:
        """1 if post, uplift and speed came from the mock backend's surrogate, not from training."""
        return float(self.outcome(trace.tool_messages)["surrogate"])

    @vf.metric
    async def episode_ended(self, trace: vf.Trace) -> float:
        """1 if the env ended the episode (trained, attempts or turns spent), 0 if the model left it."""
        return float(self.outcome(trace.tool_messages)["done"])


# --- the taskset --------------------------------------------------------------------------------
class TrainerTasksetConfig(vf.TasksetConfig):
    """Which trainer tasks the taskset loads: families and task files, each at every seed of
    `seeds`."""

    families: list[str] | None = None
    """Family ids. None: every installed family (held-out ones only with include_held_out),
    or none if task_files are given."""
    task_files: list[str] = []
    """Task files (examples/tasks/*.toml), after the families."""
    include_held_out: bool = False
    """Held-out tasks (triage) measure generalisation: train on them only on purpose."""
    seeds: list[int] = [0]
    """One task per (task, seed)."""
    task: TrainerTaskConfig = TrainerTaskConfig()


class TrainerTaskset(vf.Taskset[TrainerTask, TrainerTasksetConfig]):
    """The trainer tasks as a verifiers taskset: what `vf-eval trainergym` and prime-rl load."""

    def load(self) -> list[TrainerTask]:
        """One task per (task, seed), families first, then task files; each draws a fresh outcome
        secret. Raises ValueError when a held-out task is named without `include_held_out`."""
        cfg = self.config
        refs = list(cfg.families) if cfg.families is not None else ([] if cfg.task_files else sorted(families()))
        specs = [load_task(ref) for ref in [*refs, *cfg.task_files]]
        if cfg.families is None and not cfg.task_files:
            specs = [s for s in specs if cfg.include_held_out or not s.held_out]
        held = [s.id for s in specs if s.held_out and not cfg.include_held_out]
        if held:
            raise ValueError(f"{', '.join(held)} held out: set include_held_out to use them")
        tasks = []
        for spec in specs:
            prompt = spec.brief()
            tasks += [TrainerTask(TrainerData(id=f"{spec.id}@{seed}", name=spec.id, prompt=prompt,
                                              system_prompt=SYSTEM_PROMPT, spec=spec.model_dump(mode="json"),
                                              seed=seed, episode_key=secrets.token_hex(16)), cfg.task)
                      for seed in cfg.seeds]
        return tasks


if __name__ == "__main__":  # verifiers launches the toolset as `python -m trainergym.adapters.verifiers`
    TrainerToolset.OWN_PROCESS = True  # its own process: a SIGTERM means the rollout is torn down
    TrainerToolset.run()
