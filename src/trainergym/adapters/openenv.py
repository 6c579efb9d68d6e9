"""The trainer task as an OpenEnv environment server: `trainergym serve`.

OpenEnv (the `openenv` package, pinned to 0.4.1 by the `openenv` extra) is the environment
contract TRL, torchforge, SkyRL, ART, Unsloth, Oumi and verifiers' `OpenEnvTaskset` consume: a
FastAPI app (`create_app`) with `/health`, `/schema`, `/metadata` and a WebSocket `/ws` on which
each connection is one session with an environment instance of its own.

- `TrainerEnvironment`: one `AsyncTrainerEnv` per session, so one isolated episode (its own
  workspace and, on the mock, its own backend); `SUPPORTS_CONCURRENT_SESSIONS` is therefore
  true. Steps are `async` and the probe runs in a thread, so a `submit_job` (the probe's ~10 s,
  then the backend's job) never blocks other sessions.
- `TrainerAction`: one model message, one turn, in any format the Gymnasium env accepts (text
  with `<tool_call>` markup or JSON, a `{"name", "arguments"}` call, an OpenAI assistant message,
  a list of calls). A payload without `message` is taken as the message itself (a bare tool
  call, MCP's `call_tool` shape), so the env's parser, not pydantic, judges it: a malformed
  action is an error observation that costs a turn, as in the Gymnasium env.
- `TrainerObservation`: the observation text, `info` (the env's `ResetInfo`/`StepInfo`: tool
  schemas on reset, `reward_breakdown` on the last step), `terminated`/`truncated`; `reward` is 0
  until the last step, then the episode reward, so a sum of step rewards is the episode reward.
- `TrainerState`: the episode's counters and, once over, its reward.
- `TrainerEnvClient`: OpenEnv's `EnvClient` typed for these models (OpenEnv's `GenericEnvClient`
  works too, with dicts).

`serve(host, port, ...)` runs the app with uvicorn; `app` (module attribute, built on first
access from `TRAINERGYM_SERVE_*` variables) is what `openenv.yaml` and plain uvicorn load.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
from dataclasses import dataclass, field, fields
from importlib import metadata
from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

try:
    from openenv.core.client_types import StepResult
    from openenv.core.env_client import EnvClient
    from openenv.core.env_server import Action, Environment, Observation, State, create_app
    from openenv.core.env_server.types import EnvironmentMetadata
except ImportError as e:  # the extra is missing (or broken): say which extra, not which module
    raise ImportError(
        "trainergym.adapters.openenv needs the openenv extra: pip install 'trainergym[openenv]' "
        f"(in this repository: uv sync --extra openenv) [{type(e).__name__}: {e}]"
    ) from e

from trainergym.backends import BackendOptions, shared_backend
from trainergym.env.core import AsyncTrainerEnv
from trainergym.task.spec import families

__all__ = ["ServeSettings", "TrainerAction", "TrainerEnvClient", "TrainerEnvironment", "TrainerObservation",
           "TrainerState", "build_app", "serve"]

ENV_NAME = "trainergym"
MESSAGE_DESCRIPTION = (
    "One model message (one turn): text holding tool calls as JSON or <tool_call>{...}</tool_call> markup, "
    'a tool call {"name": ..., "arguments": {...}}, an OpenAI assistant message with tool_calls, or a list '
    "of calls (run in order). Tools: read_file, write_file, edit_file, list_files, get_baseline_scores, "
    "submit_job (their schemas are in the reset observation's info.tool_schemas).")


# --- the wire models ----------------------------------------------------------------------------
class TrainerAction(Action):
    """One model message for one env step: whatever `AsyncTrainerEnv.step` accepts."""

    message: str | dict[str, Any] | list[Any] = Field(description=MESSAGE_DESCRIPTION)

    @model_validator(mode="before")
    @classmethod
    def _whole_payload_is_the_message(cls, data: Any) -> Any:
        # Generic clients (and verifiers' OpenEnvTaskset, which sends a model's JSON reply as the
        # action) send the call itself. Whatever is not exactly {"message"[, "metadata"]} becomes
        # the message, so the env's parser judges it and a bad one is an error observation.
        if not isinstance(data, dict):
            return data
        if "message" in data and set(data) <= {"message", "metadata"} and isinstance(data.get("metadata", {}), dict):
            if not isinstance(data["message"], (str, dict, list)):  # 5, None: let the env say so
                return {**data, "message": json.dumps(data["message"])}
            return data
        if data.get("type") == "call_tool" and "tool_name" in data:  # MCP's CallToolAction shape
            return {"message": {"name": data["tool_name"], "arguments": data.get("arguments") or {}}}
        return {"message": data}


class TrainerObservation(Observation):
    """What a reset or step returns. `done` is `terminated or truncated`; `reward` is None on
    reset, 0.0 on every step but the last, then the episode reward."""

    text: str = Field(default="", description="The observation: the task on reset, the tool results on a step.")
    info: dict[str, Any] = Field(default_factory=dict, description=(
        "The env's info: on reset episode_id, task_id, family, seed, tool_schemas, turns_left, attempts_left; on a "
        "step tool, ok, error, calls (each call's own result), turns_left, attempts_left, and on the last step "
        "reward_breakdown and result."))
    terminated: bool = Field(default=False, description="A valid job was trained and scored, or submit attempts ran out.")
    truncated: bool = Field(default=False, description="The turns ran out; the episode was scored as it stands.")


class TrainerState(State):
    """The session's episode: OpenEnv's `episode_id` and `step_count` (turns taken), plus ours."""

    run_id: str | None = Field(default=None, description="trainergym's episode id (runs/<run_id>/ with a runs dir).")
    task_id: str | None = None
    family: str | None = None
    seed: int | None = None
    turns_left: int = 0
    attempts_left: int = 0
    done: bool = False
    reward: float | None = Field(default=None, description="The episode reward, once the episode is over.")
    reward_breakdown: dict[str, Any] | None = None


# --- the server's settings ----------------------------------------------------------------------
@dataclass(frozen=True)
class ServeSettings:
    """What every session's env is built with. `from_env()` reads `TRAINERGYM_SERVE_<FIELD>`
    (upper case; `backend_options` as JSON), which is how `app`, uvicorn and containers set them."""

    backend: str = "mock"  # mock (a surrogate), local, runpod: as everywhere in trainergym
    task: str | None = None  # a reset without `family`/`task` plays this (family id or task file); None: calc_chain
    max_sessions: int = 16  # concurrent WebSocket sessions (episodes)
    job_timeout: float | None = None  # seconds a submitted job may take
    reward_noise: bool = True  # as `AsyncTrainerEnv`: off pays a surrogate's noise-free expected post
    runs_dir: Path | None = None  # runs/<episode-id>/ records; None keeps none
    backend_options: dict[str, Any] = field(default_factory=dict)  # BackendOptions fields (mock latency, seed, ...)

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> ServeSettings:
        """The settings from `TRAINERGYM_SERVE_*` environment variables; unset ones keep defaults."""
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in fields(cls):
            raw = environ.get(f"TRAINERGYM_SERVE_{f.name.upper()}")
            if raw is None or raw == "":
                continue
            if f.name == "max_sessions":
                values[f.name] = int(raw)
            elif f.name == "job_timeout":
                values[f.name] = float(raw)
            elif f.name == "reward_noise":
                values[f.name] = raw.strip().lower() not in {"0", "false", "no", "off"}
            elif f.name == "runs_dir":
                values[f.name] = Path(raw)
            elif f.name == "backend_options":
                values[f.name] = json.loads(raw)
            else:
                values[f.name] = raw
        return cls(**values)

    def make_backend(self):
        """The backend a session's env trains with: a fresh mock per session (as the Gymnasium env
        has), any GPU backend shared by every session of the process (one queue, one cap)."""
        return shared_backend(self.backend, BackendOptions.model_validate(self.backend_options))


# --- the environment ----------------------------------------------------------------------------
def _jsonable(info: dict) -> dict:
    return json.loads(json.dumps(info, default=str))


class TrainerEnvironment(Environment[TrainerAction, TrainerObservation, TrainerState]):
    """One OpenEnv session: one `AsyncTrainerEnv`, so one episode at a time, isolated from every
    other session (own workspace directory, own mock backend; GPU backends are built to be shared).
    The server awaits `reset_async`/`step_async` on its event loop; the sync `reset`/`step` run
    them on a private loop, for callers outside one."""

    # Honest: nothing mutable is shared between instances but what the Backend protocol requires
    # to be shareable (a GPU backend's queue), and each episode lives in its own temporary directory.
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, settings: ServeSettings | None = None):
        super().__init__()
        self.settings = settings or ServeSettings()
        self.env = AsyncTrainerEnv(task=self.settings.task, backend=self.settings.make_backend(),
                                   runs_dir=self.settings.runs_dir, job_timeout=self.settings.job_timeout,
                                   reward_noise=self.settings.reward_noise)
        self._episode_id: str | None = None  # the caller's id for the episode, if it gave one
        self._loop: asyncio.AbstractEventLoop | None = None

    async def reset_async(self, seed: int | None = None, episode_id: str | None = None, family: str | None = None,
                          **kwargs: Any) -> TrainerObservation:
        """Start an episode of `family` (an installed family id), else the server's default task.
        Anything else is refused: the task (and with it the bounds, tools and baselines the reward
        is paid against) is the operator's to choose, with `--task`/`--family`, never a client's."""
        if kwargs:
            raise ValueError(f"unknown reset arguments: {', '.join(sorted(kwargs))}; accepted: seed, episode_id, family "
                             "(a client cannot pass a task: the operator sets it with --task)")
        if family is not None and family not in families():
            raise ValueError(f"unknown family {family!r}; installed: {', '.join(families())}")
        options = {"family": family} if family is not None else None
        obs, info = await self.env.reset(seed=seed, options=options)
        self._episode_id = episode_id
        info = {k: v for k, v in info.items() if k != "workspace"}  # a path on the server's host: not a client's
        return TrainerObservation(text=obs, info=_jsonable(info), reward=None, done=False)

    async def step_async(self, action: TrainerAction, timeout_s: float | None = None, **kwargs: Any) -> TrainerObservation:
        """One turn: the action's message through `AsyncTrainerEnv.step`."""
        obs, reward, terminated, truncated, info = await self.env.step(action.message)
        return TrainerObservation(text=obs, info=_jsonable(info), reward=reward, done=terminated or truncated,
                                  terminated=terminated, truncated=truncated)

    def _run(self, coro):
        if self._loop is None or self._loop.is_closed():
            self._loop = asyncio.new_event_loop()
        return self._loop.run_until_complete(coro)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> TrainerObservation:
        """`reset_async` for callers without an event loop."""
        return self._run(self.reset_async(seed=seed, episode_id=episode_id, **kwargs))

    def step(self, action: TrainerAction, timeout_s: float | None = None, **kwargs: Any) -> TrainerObservation:
        """`step_async` for callers without an event loop."""
        return self._run(self.step_async(action, timeout_s=timeout_s, **kwargs))

    @property
    def state(self) -> TrainerState:
        """The session's episode as it stands (empty before the first reset)."""
        ep = self.env.episode
        if ep is None:
            return TrainerState()
        return TrainerState(episode_id=self._episode_id or ep.id, step_count=ep.turns, run_id=ep.id, task_id=ep.task.id,
                            family=ep.task.family, seed=ep.seed, turns_left=ep.turns_left,
                            attempts_left=ep.attempts_left, done=ep.done,
                            reward=ep.reward.total if ep.done and ep.reward else None,
                            reward_breakdown=ep.reward.model_dump(mode="json") if ep.done and ep.reward else None)

    def get_metadata(self) -> EnvironmentMetadata:
        """Name, description, version and docs of the environment (OpenEnv's `/metadata`)."""
        try:
            version = metadata.version("trainergym")
        except metadata.PackageNotFoundError:
            version = None
        return EnvironmentMetadata(
            name=ENV_NAME, version=version,
            description="Write an RL training job (a verifiers taskset, its data, a bounded prime-rl GRPO config) "
                        "with file tools and submit_job; the reward is the uplift the trained job produces.",
            documentation_url="https://github.com/trainergym/trainergym/blob/main/docs/adapters.md")

    def close(self) -> None:
        """Remove the episode's workspace (a saved run stays) and the private loop, if any."""
        self.env.close()
        if self._loop is not None and not self._loop.is_closed():
            self._loop.close()


# --- the app and the server ---------------------------------------------------------------------
def build_app(settings: ServeSettings | None = None):
    """The OpenEnv FastAPI app: `/health`, `/schema`, `/metadata`, `/ws` (one session, one episode,
    per connection), and OpenEnv's stateless `/reset`, `/step`, `/state` (each on a fresh env, so a
    step there has no episode: use `/ws`). A backend that cannot run here fails now, in one line."""
    settings = settings or ServeSettings.from_env()
    if settings.max_sessions < 1:
        raise ValueError("max_sessions must be at least 1")
    settings.make_backend()  # BackendUnavailable (no GPU, no key) before the first session, not in it
    if os.environ.get("ENABLE_WEB_INTERFACE", "").lower() in {"1", "true", "yes"}:
        # openenv's web UI needs gradio, which the lock excludes (pyproject.toml says why).
        raise RuntimeError("ENABLE_WEB_INTERFACE needs gradio, which trainergym's openenv extra leaves out; unset it")
    app = create_app(functools.partial(TrainerEnvironment, settings), TrainerAction, TrainerObservation,
                     env_name=ENV_NAME, max_concurrent_envs=settings.max_sessions)
    app.add_middleware(_QuietClose)

    async def refused(request, exc):  # a bad reset on the stateless routes is the client's error: 422, never a 500
        from fastapi.responses import JSONResponse

        return JSONResponse({"detail": " ".join(str(exc).split())[:500]}, status_code=422)

    for kind in (ValueError, TypeError, KeyError):
        app.add_exception_handler(kind, refused)
    return app


class _QuietClose:
    """ASGI middleware: openenv 0.4.1's `/ws` handler ends every session by closing a socket the
    client already closed, and catches only RuntimeError, while Starlette raises
    WebSocketDisconnect; uvicorn would log that as "Exception in ASGI application" per session."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "websocket":
            return await self.app(scope, receive, send)
        from starlette.websockets import WebSocketDisconnect

        try:
            await self.app(scope, receive, send)
        except WebSocketDisconnect:
            pass  # the session is over either way; its env was closed in the handler's finally


def serve(host: str = "127.0.0.1", port: int = 8000, *, backend: str = "mock", task: str | None = None,
          max_sessions: int = 16, job_timeout: float | None = None, reward_noise: bool = True,
          runs_dir: Path | None = None, log_level: str = "info") -> None:
    """Serve the environment with uvicorn until interrupted (what `trainergym serve` runs)."""
    import uvicorn

    settings = ServeSettings(backend=backend, task=task, max_sessions=max_sessions, job_timeout=job_timeout,
                             reward_noise=reward_noise, runs_dir=runs_dir,
                             backend_options=ServeSettings.from_env().backend_options)
    uvicorn.run(build_app(settings), host=host, port=port, log_level=log_level)


def __getattr__(name: str):
    # `app` for `uvicorn trainergym.adapters.openenv:app` and openenv.yaml, built on first access
    # (from TRAINERGYM_SERVE_*), so importing the client does not build a server.
    if name == "app":
        globals()["app"] = value = build_app()
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --- the client ---------------------------------------------------------------------------------
class TrainerEnvClient(EnvClient[TrainerAction, TrainerObservation, TrainerState]):
    """OpenEnv's WebSocket client typed with our models. A step waits as long as its job:
    `message_timeout_s` defaults to None (no limit; WebSocket pings still detect a dead server)
    where OpenEnv's default of 60 s would give up on a GPU job. Actions may be `TrainerAction`s,
    dicts (`{"message": ...}` or a bare call) or the message itself (a string)."""

    def __init__(self, base_url: str | None = None, message_timeout_s: float | None = None, **kwargs: Any):
        super().__init__(base_url=base_url, message_timeout_s=message_timeout_s, **kwargs)

    def _step_payload(self, action: TrainerAction | dict | str) -> dict[str, Any]:
        if isinstance(action, TrainerAction):
            return action.model_dump()
        return action if isinstance(action, dict) else {"message": action}

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[TrainerObservation]:
        obs = TrainerObservation.model_validate({**payload.get("observation", {}), "reward": payload.get("reward"),
                                                 "done": payload.get("done", False)})
        return StepResult(observation=obs, reward=payload.get("reward"), done=payload.get("done", False),
                          metadata=payload.get("metadata"))

    def _parse_state(self, payload: dict[str, Any]) -> TrainerState:
        return TrainerState.model_validate(payload)


# --- `python -m trainergym.adapters.openenv` (the container's entrypoint) -----------------------
def main(argv: list[str] | None = None) -> None:
    """`serve` from the command line; flags override `TRAINERGYM_SERVE_*`."""
    env = ServeSettings.from_env()
    p = argparse.ArgumentParser(prog="python -m trainergym.adapters.openenv", description=serve.__doc__)
    p.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
    p.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    p.add_argument("--backend", default=env.backend)
    p.add_argument("--task", default=env.task)
    p.add_argument("--max-sessions", type=int, default=env.max_sessions)
    p.add_argument("--job-timeout", type=float, default=env.job_timeout)
    p.add_argument("--no-reward-noise", dest="reward_noise", action="store_false", default=env.reward_noise)
    p.add_argument("--runs-dir", type=Path, default=env.runs_dir)
    p.add_argument("--log-level", default="info")
    a = p.parse_args(argv)
    serve(a.host, a.port, backend=a.backend, task=a.task, max_sessions=a.max_sessions, job_timeout=a.job_timeout,
          reward_noise=a.reward_noise, runs_dir=a.runs_dir, log_level=a.log_level)


if __name__ == "__main__":
    main()
