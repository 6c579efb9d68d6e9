"""Train a model on WriteTrainingJob episodes with Tinker, through tinker-cookbook's RL loop.

Install the extra first: `uv sync --extra tinker` (it pins tinker-cookbook==0.6.1, whose
asynchronous semantics docs/adapters.md describes; other releases differ).

The layers, bottom up:

- `Qwen35NoThinkingRenderer`: Qwen3.5's chat format, parsed so that a tool call's string
  arguments are exactly the text the model sampled (the stock parser strips and JSON-decodes
  them), so files round-trip byte for byte and a re-rendered turn equals the sampled one.
- `TrainerMessageEnv`: one `AsyncTrainerEnv` episode as a cookbook `MessageEnv`. The model's
  parsed tool calls become one env action; each call is answered by its own tool message. The
  reward is the env's, and arrives only on the last turn (after the GPU job); every other turn
  pays 0.
- `TrainerTokenEnv`: the cookbook's `EnvFromMessageEnv` over it, whose next observation extends
  the previous prompt and the sampled tokens exactly whenever the model's text survives
  re-rendering, so an episode's turns merge into one training Datum.
- `TrainerEnvGroupBuilder`: one GRPO group (N episodes of one task). It holds only plain
  settings, so it pickles; tokenizer, renderer, backends and envs are built in `make_envs`.
  `compute_group_rewards` gives every trajectory the episode's metrics, also one the cookbook
  ended itself (a reply cut at max_tokens, a parse error); `cleanup` ends every episode it
  built, which cancels any job still in flight.
- `TrainerDatasetBuilder`: batches of groups over families and task files; held-out families
  (triage) never reach training and form the test set instead.
- `train_config` / `main`: the training run with the original's defaults.

`rl.train.main` needs TINKER_API_KEY and the network; everything else here runs offline
(tests/adapters/test_tinker.py drives whole groups with a scripted policy and a toy tokenizer).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import itertools
import json
import logging
import os
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trainergym.adapters import requires_extra

with requires_extra("tinker", "tinker"):
    import chz
    import tinker
    from tinker_cookbook import model_info
    from tinker_cookbook.renderers import (Message, Renderer, ToolCall, ToolSpec, UnparsedToolCall, get_renderer,
                                           get_text_content, register_renderer)
    from tinker_cookbook.renderers.qwen3_5 import Qwen3_5DisableThinkingRenderer
    from tinker_cookbook.rl import train
    from tinker_cookbook.rl.message_env import EnvFromMessageEnv, MessageEnv, MessageStepResult
    from tinker_cookbook.rl.types import (STOP_METRIC_PREFIX, Env, EnvGroupBuilder, Metrics, RLDataset,
                                          RLDatasetBuilder, StepResult, StopReason, Trajectory)
    from tinker_cookbook.tokenizer_utils import get_tokenizer

from trainergym.agents.prompt import SYSTEM_PROMPT as AGENT_SYSTEM_PROMPT
from trainergym.backends import Backend, make_backend, shared_backend
from trainergym.env.core import AsyncTrainerEnv
from trainergym.env.reward import NO_SUBMISSION_TOTAL
from trainergym.task.spec import families as installed_families
from trainergym.task.spec import get_family, load_task

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "Qwen/Qwen3.6-35B-A3B"
# The chat format: recommended for Qwen3.6 by tinker_cookbook/model_info.py (Qwen3.6 reuses
# the Qwen3.5 renderer). Without thinking, a turn's sampled tokens usually extend the next
# prompt, so the cookbook can merge consecutive turns into one Datum; with thinking (`qwen3_5`)
# history drops the thinking and every turn is a Datum of its own, re-encoding the whole prefix.
DEFAULT_RENDERER = "qwen3_5_disable_thinking"
# What the envs render and parse with: the same format, parsed as below.
ENV_RENDERER = "trainergym_qwen3_5_disable_thinking"


# A Qwen3.5 XML tool call (framed as tinker_cookbook/renderers/qwen3_5.py frames it), and one of
# its parameters. The template writes `<parameter=NAME>\nVALUE\n</parameter>`, so exactly one
# newline on each side is framing; a value ends at the `</parameter>` that a further parameter or
# the end of the call follows (a literal `</parameter>` inside a file stays content).
_FUNCTION_BLOCK_RE = re.compile(
    r"^\s*<tool_call>\s*<function=(?P<name>[^>\n]+)>\s*(?P<body>.*?)\s*</function>\s*</tool_call>\s*$", re.DOTALL)
_EXACT_PARAM_RE = re.compile(r"<parameter=(?P<name>[^>\n]+)>\n?(?P<value>.*?)\n?</parameter>(?=\s*(?:<parameter=|$))",
                             re.DOTALL)


class Qwen35NoThinkingRenderer(Qwen3_5DisableThinkingRenderer):
    """`qwen3_5_disable_thinking` with two parsing rules changed; rendering is unchanged.

    - A `</think>` in the reply is content. The cookbook's parser treats everything before a
      sampled `</think>` as thinking. With thinking disabled the prompt has already closed the
      think block, so a `</think>` can only be text the model writes, and a reward function has
      to write it (every family's reference reward strips the trained model's thinking with
      `reply.rsplit("</think>", 1)`); the stock parser swallows that whole tool call as thinking.
    - A tool call's parameter values are the sampled text, unstripped and undecoded: the
      template's framing newline on each side is all that is removed. The stock parser strips
      all surrounding whitespace (a file's trailing newline) and JSON-decodes what it can (a
      file holding `42` or a JSON document), so the files written differed from the files
      sampled, and the re-rendered turn from the sampled turn. Values are therefore strings;
      the env converts those of non-string parameters by the tool's schema
      (`TrainerMessageEnv._arguments`)."""

    def _normalize_response_tokens(self, response: list[int]) -> list[int]:
        return response

    def _parse_qwen3_5_tool_call_xml(self, raw_text: str) -> ToolCall | UnparsedToolCall:
        match = _FUNCTION_BLOCK_RE.match(raw_text)
        if not match or not match.group("name").strip():
            return UnparsedToolCall(raw_text=raw_text, error="Malformed Qwen3.5 tool call XML")
        body, arguments, pos = match.group("body"), {}, 0
        for param in _EXACT_PARAM_RE.finditer(body):
            if body[pos:param.start()].strip():
                return UnparsedToolCall(raw_text=raw_text, error="Unexpected non-parameter content inside <function> block")
            name = param.group("name").strip()
            if not name:
                return UnparsedToolCall(raw_text=raw_text, error="Empty parameter name")
            arguments[name] = param.group("value")
            pos = param.end()
        if body[pos:].strip():
            return UnparsedToolCall(raw_text=raw_text, error="Unexpected trailing content inside <function> block")
        return ToolCall(function=ToolCall.FunctionBody(name=match.group("name").strip(), arguments=json.dumps(arguments)))


register_renderer(ENV_RENDERER, lambda tokenizer, image_processor: Qwen35NoThinkingRenderer(
    tokenizer, image_processor=image_processor))

# The LLM agent's instructions, plus this loop's turn rule (one reply, however many calls, is one turn).
SYSTEM_PROMPT = AGENT_SYSTEM_PROMPT + (" Every reply must call at least one tool; one reply is one turn of your "
                                       "budget, however many tool calls it makes.")
# A reply the renderer cannot frame (no stop token) or a context overflow ends the episode
# without the env scoring it; it pays what an episode with no submission pays, so a broken
# reply is never better than giving up, nor punished far beyond anything the env gives.
BROKEN_REPLY_REWARD = NO_SUBMISSION_TOTAL


# --- one episode ---------------------------------------------------------------------------------
class TrainerMessageEnv(MessageEnv):
    """One `AsyncTrainerEnv` episode at the message level. Single use, like every cookbook env."""

    def __init__(self, env: AsyncTrainerEnv, renderer: Renderer, task: str, seed: int | None = None):
        self.env, self.renderer, self.task, self.seed = env, renderer, task, seed
        self.messages: list[Message] = []
        self.env_seconds = 0.0  # spent awaiting the core env (tools, probe, job): not adapter overhead
        self._call_ids = itertools.count()
        self._string_params: dict[str, set[str]] = {}

    async def initial_observation(self) -> list[Message]:
        """Reset the episode. Returns the conversation so far: the renderer's tool-calling prefix
        (the system prompt and the env's tool schemas), then the task observation as the user's."""
        obs, info = await self.env.reset(seed=self.seed, options={"task": self.task})
        functions = [schema["function"] for schema in info["tool_schemas"]]
        self._string_params = {f["name"]: {p for p, v in f["parameters"].get("properties", {}).items()
                                           if v.get("type") == "string"} for f in functions}
        specs = [ToolSpec(name=f["name"], description=f["description"], parameters=f["parameters"]) for f in functions]
        self.messages = [*self.renderer.create_conversation_prefix_with_tools(specs, SYSTEM_PROMPT),
                         Message(role="user", content=obs)]
        return list(self.messages)

    async def step(self, message: Message) -> MessageStepResult:
        """Apply one assistant `message` as one env step (its parsed tool calls, else its unparsed
        ones, else its prose) and answer each call with its own tool message. The reward is 0 until
        the episode ends; the last step carries the episode reward and its stop reason (the
        episode's metrics come with `TrainerEnvGroupBuilder.compute_group_rewards`)."""
        self.messages.append(message)
        calls = list(message.get("tool_calls") or [])
        unparsed = list(message.get("unparsed_tool_calls") or [])
        # Qwen's format carries no call ids; ours key the env's per-call results.
        ids = [call.id or f"call_{next(self._call_ids)}" for call in calls]
        started = time.perf_counter()
        obs, reward, terminated, truncated, info = await self.env.step(self._action(message, calls, ids, unparsed))
        self.env_seconds += time.perf_counter() - started
        self.messages += self._replies(calls, ids, unparsed, obs, info)
        done = terminated or truncated
        return MessageStepResult(reward=reward if done else 0.0, episode_done=done, next_messages=list(self.messages),
                                 metrics={f"{STOP_METRIC_PREFIX}{_stop_reason(info, truncated)}": 1.0} if done else {})

    def _action(self, message: Message, calls: list, ids: list[str], unparsed: list) -> Any:
        """The env action for one assistant message; a malformed one still reaches the env, so
        it costs the turn it costs any other agent."""
        if calls:
            return {"role": "assistant", "content": get_text_content(message),
                    "tool_calls": [{"id": id_, "type": "function",
                                    "function": {"name": c.function.name, "arguments": self._arguments(c)}}
                                   for c, id_ in zip(calls, ids)]}
        if unparsed:
            # Not the raw text: the env's lenient parser might run a call the renderer rejected,
            # while the model is told it failed. This form holds no call, so nothing runs.
            return {"role": "assistant", "unparsed_tool_calls": [u.raw_text for u in unparsed]}
        return get_text_content(message)  # prose: the env parses what it can and says what it did

    def _arguments(self, call) -> str:
        """The call's arguments typed by the tool's schema. Qwen3.5's XML tool calls carry no
        types: our renderer hands every value over as the sampled text, so a parameter that is not
        a string is JSON-decoded here (left as text if it is not JSON; the env then reports it). A
        renderer that decoded a string parameter's JSON text gets it re-encoded."""
        strings = self._string_params.get(call.function.name)
        try:
            args = json.loads(call.function.arguments or "{}")
        except json.JSONDecodeError:
            return call.function.arguments  # the env reports it
        if strings is None or not isinstance(args, dict):
            return call.function.arguments
        return json.dumps({k: _typed(v, k in strings) for k, v in args.items()})

    @staticmethod
    def _replies(calls: list, ids: list[str], unparsed: list, obs: str, info: dict) -> list[Message]:
        """One tool message per call the model made, in order; a reply with no call at all
        gets the env's observation as a user message (there is no call to answer)."""
        if not calls and not unparsed:
            return [Message(role="user", content=obs)]
        results = info.get("calls") or []
        whole_message_error = next((r["content"] for r in results if r["id"] is None), None)
        by_id = {r["id"]: r["content"] for r in results if r["id"] is not None}
        not_run = "not run: the episode ended before this call."
        replies = [Message(role="tool", tool_call_id=call.id or "", name=call.function.name,
                           content=whole_message_error or by_id.get(id_, not_run))
                   for call, id_ in zip(calls, ids)]
        # The renderer's diagnosis names the model's own format; the env's would not.
        replies += [Message(role="tool", tool_call_id="",
                            content=f"error: the tool call could not be parsed ({u.error}).") for u in unparsed]
        return replies


def _typed(value: Any, is_string: bool) -> Any:
    if is_string:
        return value if isinstance(value, str) else json.dumps(value)
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def _stop_reason(info: dict, truncated: bool) -> StopReason:
    r = info.get("reward_breakdown") or {}
    if truncated:
        return StopReason.MAX_TURNS
    if not r.get("validated") and info.get("attempts_left") == 0:
        return StopReason.MAX_TOOL_CALLS  # the submit budget, the env's only tool budget, ran out
    return StopReason.COMPLETED


def episode_metrics(breakdown: dict, ended_by_env: bool) -> dict[str, float]:
    """The episode's metrics from its reward breakdown: the reward's terms, whether it validated
    and its job succeeded, the attempts, whether the env ended it (0: the cookbook cut it), and
    the job's figures named by their source ("surrogate/post" is the mock's, never a measurement)."""
    r = breakdown
    return {
        "validation": float(r.get("validation", 0.0)),
        "job_quality": float(r.get("job_quality", 0.0)),
        "speed": float(r.get("speed", 0.0)),
        "validated": float(bool(r.get("validated"))),
        "job_succeeded": float(r.get("job_status") == "succeeded"),
        "attempts": float(r.get("attempts", 0)),
        "episode_ended": float(ended_by_env),
        **({f"{r['source']}/{k}": float(r[k]) for k in ("post", "post_expected", "uplift", "speed")
            if r.get(k) is not None} if r.get("source") else {}),
    }


class TrainerTokenEnv(EnvFromMessageEnv):
    """The cookbook's token-level env over a `TrainerMessageEnv`, with merging turns.

    The cookbook merges consecutive turns into one Datum only when each observation begins with
    the previous observation plus the sampled tokens (`data_processing.trajectory_to_data`).
    `EnvFromMessageEnv` re-renders the whole conversation every turn, and a re-rendered reply
    tokenizes canonically, while a sampled one need not (`<tool_call>` spelled out byte by byte,
    another split of the same text): the texts agree, the tokens do not, and every such turn
    started a new Datum whose prompt was prefilled again. Here, when the re-rendered conversation
    up to the end of the reply decodes to the same text as the previous observation plus the
    sampled tokens, the next observation is those tokens followed by the renderer's tokens for
    the rest (after the reply's stop token, so the rest tokenizes alike in either context). When
    the text changed (a reply the renderer normalizes, history the template rewrites), the
    re-rendered observation stands."""

    def __init__(self, renderer: Renderer, message_env: TrainerMessageEnv, **kwargs: Any):
        super().__init__(renderer, message_env, **kwargs)
        self._last_ob: list[int] | None = None

    async def initial_observation(self):
        """The cookbook's first observation, remembered as the prefix of the next."""
        first = await super().initial_observation()
        if isinstance(first, tuple):
            self._last_ob = first[0].to_ints()
        return first

    async def step(self, action: list[int], *, extra=None) -> StepResult:
        """The cookbook's step, its next observation extending this one where the text allows."""
        result = await super().step(action, extra=extra)
        if result.episode_done or self._last_ob is None:
            self._last_ob = None
            return result
        observation = self._extend(self._last_ob + list(action), result.next_observation)
        self._last_ob = observation.to_ints()
        return dataclasses.replace(result, next_observation=observation)

    def _extend(self, sampled: list[int], rendered: tinker.ModelInput) -> tinker.ModelInput:
        tokens = rendered.to_ints()
        if tokens[:len(sampled)] == sampled or not sampled:
            return rendered
        stop = sampled[-1]  # the reply's stop token; the prompt before it holds one per message
        ends = [i for i, t in enumerate(tokens) if t == stop]
        count = sampled.count(stop)
        if len(ends) < count:
            return rendered
        cut = ends[count - 1] + 1
        decode = self.renderer.tokenizer.decode
        if decode(tokens[:cut]) != decode(sampled):
            return rendered
        return tinker.ModelInput.from_ints(sampled + tokens[cut:])


# --- one group ---------------------------------------------------------------------------------
class TrainerEnvGroupBuilder(EnvGroupBuilder):
    """`group_size` episodes of one task. Plain settings only, so plain `pickle` carries it to a
    rollout executor. With `reuse_identical`, the group's envs share one backend, which answers
    a byte-identical bundle with the result it already has instead of training it again (the
    mock backend needs `reuse=True`, its default; the queue backends deduplicate by hash)."""

    def __init__(self, task: str, *, group_size: int = 8, model_name: str = DEFAULT_MODEL,
                 renderer_name: str = ENV_RENDERER, backend: str = "mock", backend_kwargs: dict | None = None,
                 reuse_identical: bool = False, seed: int | None = None, family: str | None = None,
                 max_tokens: int | None = None, max_trajectory_tokens: int | None = None,
                 job_timeout: float | None = None, runs_dir: str | None = None, reward_noise: bool = True):
        self.task = str(task)
        self.family = family or load_task(self.task).family
        self.group_size, self.model_name, self.renderer_name = group_size, model_name, renderer_name
        self.backend, self.backend_kwargs, self.reuse_identical = backend, dict(backend_kwargs or {}), reuse_identical
        self.seed, self.max_tokens, self.max_trajectory_tokens = seed, max_tokens, max_trajectory_tokens
        self.job_timeout, self.runs_dir, self.reward_noise = job_timeout, runs_dir, reward_noise
        self._cores: list[AsyncTrainerEnv] = []  # every env built, across retries: cleanup ends them all
        self._backends: list[Backend] = []

    def __getstate__(self) -> dict:
        # Live envs and backends stay in the process that built them.
        return {**self.__dict__, "_cores": [], "_backends": []}

    @property
    def core_envs(self) -> list[AsyncTrainerEnv]:
        """The `AsyncTrainerEnv`s built so far, in the order of their rollouts."""
        return list(self._cores)

    def _new_backend(self) -> Backend:
        if self.backend != "mock":  # one queue and GPU cap for the whole process, never closed here
            return shared_backend(self.backend, **self.backend_kwargs)
        backend = make_backend(self.backend, **self.backend_kwargs)
        self._backends.append(backend)
        return backend

    async def make_envs(self) -> Sequence[Env]:
        """`group_size` token-level envs of the task, each over a fresh `AsyncTrainerEnv`: on one
        shared backend with `reuse_identical`, else on one each (GPU backends: the process's shared
        one). Every env built is kept for `cleanup`."""
        # The first call may read (or download) a large tokenizer: keep it off the event loop.
        renderer = await asyncio.to_thread(
            lambda: get_renderer(self.renderer_name, get_tokenizer(self.model_name), model_name=self.model_name))
        shared = self._new_backend() if self.reuse_identical else None
        envs = []
        for _ in range(self.group_size):
            core = AsyncTrainerEnv(task=self.task, backend=shared or self._new_backend(), job_timeout=self.job_timeout,
                                   runs_dir=Path(self.runs_dir) if self.runs_dir else None, reward_noise=self.reward_noise)
            self._cores.append(core)
            envs.append(TrainerTokenEnv(renderer, TrainerMessageEnv(core, renderer, self.task, self.seed),
                                        failed_parse_reward=BROKEN_REPLY_REWARD,
                                        context_overflow_reward=BROKEN_REPLY_REWARD,
                                        max_trajectory_tokens=self.max_trajectory_tokens,
                                        max_generation_tokens=self.max_tokens))
        return envs

    async def compute_group_rewards(self, trajectory_group: list[Trajectory],
                                    env_group: Sequence[Env]) -> list[tuple[float, Metrics]]:
        """Every trajectory's episode metrics (`episode_metrics`), whoever ended it. An episode
        the cookbook cut (max_tokens, a parse error, a context overflow, a rollout limit) is ended
        here as it stands, so `env/all/validated` is a share of all episodes, not of those the env
        ended. The reward adds nothing, except for a trajectory with no final step (a runner
        limit cut it between turns): it gets the episode's reward as it stands, as `end()` scores."""
        out: list[tuple[float, Metrics]] = []
        for traj, env in zip(trajectory_group, env_group, strict=True):
            message_env = getattr(env, "message_env", None)
            core = getattr(message_env, "env", None)
            if not isinstance(core, AsyncTrainerEnv) or core.episode is None:
                out.append((0.0, {}))
                continue
            ended_by_env = core.episode.done
            if not ended_by_env:
                await core.end(f"the rollout ended it: {traj.stop_reason or 'unknown'}")
            final_step = bool(traj.transitions) and traj.transitions[-1].episode_done
            reward = 0.0 if final_step or ended_by_env else core.episode.reward.total
            out.append((reward, episode_metrics(core.episode.reward.model_dump(), ended_by_env)))
        return out

    async def cleanup(self) -> None:
        """End every episode built (cancelling its job if one is in flight) and release the
        workspaces and backends. Idempotent; logs and swallows failures, as the cookbook requires."""
        try:
            results = await asyncio.gather(*(core.end("rollout ended") for core in self._cores), return_exceptions=True)
            for result in results:
                if isinstance(result, BaseException):
                    logger.warning("ending a trainergym episode failed: %r", result)
            for core in self._cores:
                core.close()
            backends, self._backends = self._backends, []
            for backend in backends:
                if hasattr(backend, "close"):
                    await asyncio.to_thread(backend.close)
        except Exception:
            logger.exception("trainergym group cleanup failed")

    def logging_tags(self) -> list[str]:
        """The tags the cookbook logs this group's metrics under: `trainergym` and the task's
        family."""
        return ["trainergym", self.family]


# --- the dataset -------------------------------------------------------------------------------
class TrainerDataset(RLDataset):
    """`n_batches` batches of `groups_per_batch` groups, cycling through `tasks`."""

    def __init__(self, tasks: list[tuple[str, str]], groups_per_batch: int, n_batches: int, group: dict, seed: int = 0):
        self.tasks, self.groups_per_batch, self.n_batches = tasks, groups_per_batch, n_batches
        self.group, self.seed = group, seed  # TrainerEnvGroupBuilder settings

    def get_batch(self, index: int) -> Sequence[TrainerEnvGroupBuilder]:
        """Batch `index`: `groups_per_batch` group builders taking the tasks in turn, group k seeded
        with `seed + k`, so a batch is the same whenever it is asked for."""
        builders = []
        for k in range(index * self.groups_per_batch, (index + 1) * self.groups_per_batch):
            task, family = self.tasks[k % len(self.tasks)]
            builders.append(TrainerEnvGroupBuilder(task, family=family, seed=self.seed + k, **self.group))
        return builders

    def __len__(self) -> int:
        return self.n_batches


@chz.chz
class TrainerDatasetBuilder(RLDatasetBuilder):
    """Tasks from `families` (ids; None with no `task_files` means every installed family) and
    `task_files` (paths). Tasks of held-out families (triage) are the test set, never trained on.

    A batch is `groups_per_batch` groups of `group_size` episodes: 5 x 8 = 40 episodes, so
    about 40 GPU jobs per batch (fewer when episodes fail validation or, with
    `reuse_identical`, submit identical bundles)."""

    model_name: str = DEFAULT_MODEL
    renderer_name: str = ENV_RENDERER
    families: list[str] | None = None
    task_files: list[str] = chz.field(default_factory=list)
    group_size: int = 8
    groups_per_batch: int = 5
    n_batches: int = 50
    test_group_size: int = 8
    backend: str = "mock"
    backend_kwargs: dict[str, Any] = chz.field(default_factory=dict)
    reuse_identical: bool = False
    max_tokens: int = 8192
    max_trajectory_tokens: int | None = 65536
    job_timeout: float | None = None
    runs_dir: str | None = None
    reward_noise: bool = True  # off: a mock job's reward uses its expected post (no eval noise)
    seed: int = 0

    def tasks(self) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
        """(train, test) as (task ref, family) pairs."""
        if self.families is not None:
            refs = list(self.families)
        else:
            refs = [] if self.task_files else sorted(installed_families())
        refs += [str(Path(p)) for p in self.task_files]
        train_tasks, test_tasks = [], []
        for ref in refs:
            spec = load_task(ref)
            held_out = spec.held_out or get_family(spec.family).HELD_OUT
            (test_tasks if held_out else train_tasks).append((ref, spec.family))
        return train_tasks, test_tasks

    async def __call__(self) -> tuple[RLDataset, RLDataset | None]:
        train_tasks, test_tasks = self.tasks()
        if not train_tasks:
            raise ValueError("no training task: every task given is of a held-out family")
        group = dict(model_name=self.model_name, renderer_name=self.renderer_name, backend=self.backend,
                     backend_kwargs=dict(self.backend_kwargs), reuse_identical=self.reuse_identical,
                     max_tokens=self.max_tokens, max_trajectory_tokens=self.max_trajectory_tokens,
                     job_timeout=self.job_timeout, runs_dir=self.runs_dir, reward_noise=self.reward_noise)
        train_ds = TrainerDataset(train_tasks, self.groups_per_batch, self.n_batches,
                                  {**group, "group_size": self.group_size}, seed=self.seed)
        test_ds = (TrainerDataset(test_tasks, len(test_tasks), 1, {**group, "group_size": self.test_group_size},
                                  seed=self.seed) if test_tasks else None)
        return train_ds, test_ds


# --- the training run ----------------------------------------------------------------------------
def train_config(log_path: str, *, model_name: str = DEFAULT_MODEL, renderer_name: str | None = None,
                 lora_rank: int = 8, learning_rate: float = 4e-5, group_size: int = 8, groups_per_batch: int = 5,
                 max_steps_off_policy: int = 2, max_tokens: int = 8192, n_batches: int = 50,
                 families: list[str] | None = None, task_files: Sequence[str] = (), backend: str = "mock",
                 backend_kwargs: dict | None = None, reuse_identical: bool = False, job_timeout: float | None = None,
                 reward_noise: bool = True, **config: Any) -> train.Config:
    """The cookbook `train.Config` of the original run: Qwen3.6-35B-A3B, LoRA rank 8, lr 4e-5,
    groups of 8, 5 groups (40 episodes) per step, asynchronous with at most 2 steps off policy
    (tinker-cookbook 0.6.1 semantics: sampling runs at most 2 steps ahead; no group is
    discarded). `config` overrides any other `train.Config` field."""
    if renderer_name is None:
        recommended = model_info.get_recommended_renderer_names(model_name)
        renderer_name = DEFAULT_RENDERER if DEFAULT_RENDERER in recommended else recommended[0]
    dataset = TrainerDatasetBuilder(
        model_name=model_name, renderer_name=ENV_RENDERER if renderer_name == DEFAULT_RENDERER else renderer_name,
        families=families, task_files=list(task_files),
        group_size=group_size, groups_per_batch=groups_per_batch, n_batches=n_batches, backend=backend,
        backend_kwargs=dict(backend_kwargs or {}), reuse_identical=reuse_identical, max_tokens=max_tokens,
        job_timeout=job_timeout, reward_noise=reward_noise)
    defaults: dict[str, Any] = dict(
        # A group whose episodes all score the same has zero advantage: training on it costs a slot, teaches nothing.
        remove_constant_reward_groups=True,
        async_config=train.AsyncConfig(max_steps_off_policy=max_steps_off_policy, groups_per_batch=groups_per_batch),
    )
    return train.Config(learning_rate=learning_rate, dataset_builder=dataset, model_name=model_name,
                        recipe_name="trainergym", max_tokens=max_tokens, log_path=log_path,
                        renderer_name=renderer_name, lora_rank=lora_rank, **{**defaults, **config})


def main(argv: Sequence[str] | None = None) -> None:
    """`python -m trainergym.adapters.tinker --log-path runs/tinker [--backend mock] ...`"""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log-path", required=True)
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--renderer", default=None)
    parser.add_argument("--family", action="append", dest="families", help="repeatable; default: every family")
    parser.add_argument("--task-file", action="append", dest="task_files", default=[])
    parser.add_argument("--backend", default="mock")
    parser.add_argument("--n-batches", type=int, default=50)
    parser.add_argument("--reuse-identical", action="store_true")
    parser.add_argument("--no-reward-noise", dest="reward_noise", action="store_false",
                        help="mock backend: rewards use the surrogate's expected post, without eval noise")
    parser.add_argument("--wandb-project", default=None)
    args = parser.parse_args(argv)
    if not os.environ.get("TINKER_API_KEY"):
        parser.error("TINKER_API_KEY is not set: training runs on the Tinker service")
    config = train_config(args.log_path, model_name=args.model, renderer_name=args.renderer, families=args.families,
                          task_files=args.task_files, backend=args.backend, n_batches=args.n_batches,
                          reuse_identical=args.reuse_identical, reward_noise=args.reward_noise,
                          wandb_project=args.wandb_project)
    asyncio.run(train.main(config))


if __name__ == "__main__":
    main()
