"""The Tinker adapter, offline: whole groups through tinker-cookbook's own rollout, advantage
and data-assembly code, with a scripted `TokenCompleter` as the policy and the real Qwen3.5
renderer over a byte-level toy tokenizer built here (no hub download, no API key).

Skipped unless the `tinker` extra is installed (`uv sync --extra tinker`)."""

import asyncio
import json
import os
import pickle
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.marks import import_extra

pytestmark = pytest.mark.extras

os.environ["HF_HUB_OFFLINE"] = "1"  # a stray hub lookup fails fast instead of hanging
import_extra("tinker_cookbook", "the Tinker adapter", "tinker")
torch = import_extra("torch", "the Tinker adapter", "tinker")

from tinker_cookbook.completers import TokenCompleter, TokensWithLogprobs  # noqa: E402
from tinker_cookbook.renderers import Message, ToolCall, UnparsedToolCall, get_renderer  # noqa: E402
from tinker_cookbook.rl import train  # noqa: E402
from tinker_cookbook.rl.data_processing import assemble_training_data, compute_advantages  # noqa: E402
from tinker_cookbook.rl.metric_util import compute_trajectory_metrics  # noqa: E402
from tinker_cookbook.rl.rollout_runner import run_rollout  # noqa: E402
from tinker_cookbook.rl.rollouts import do_group_rollout  # noqa: E402
from tinker_cookbook.tokenizer_utils import get_tokenizer, register_tokenizer  # noqa: E402
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers  # noqa: E402
from transformers import PreTrainedTokenizerFast  # noqa: E402

from trainergym.adapters.tinker import (  # noqa: E402
    ENV_RENDERER,
    TrainerDatasetBuilder,
    TrainerEnvGroupBuilder,
    TrainerMessageEnv,
    train_config,
)
from trainergym.agents import make_agent  # noqa: E402
from trainergym.agents.reference import reference_job_files  # noqa: E402
from trainergym.env.core import AsyncTrainerEnv, TrainerEnv  # noqa: E402

TOKENIZER = "offline/tiny-qwen"
RENDERER = ENV_RENDERER


def tiny_qwen_tokenizer() -> PreTrainedTokenizerFast:
    """One token per byte plus Qwen's control tokens. The chat-frame tokens are special; the
    markup tokens are plain added tokens, as in the real Qwen vocabulary (were they special,
    a re-rendered tool call would tokenize differently from the sampled one)."""
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tok = Tokenizer(models.BPE(vocab={ch: i for i, ch in enumerate(alphabet)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, name_or_path=TOKENIZER, eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>")
    fast.add_special_tokens({"additional_special_tokens": [
        "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>",
        "<|video_pad|>"]})
    fast.add_tokens([AddedToken(t, special=False, normalized=False) for t in
                     ("<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>")])
    return fast


register_tokenizer(TOKENIZER, tiny_qwen_tokenizer)


def qwen35_tool_call(name: str, arguments: dict) -> str:
    """A tool call as Qwen3.5/3.6 writes it (XML; strings raw, anything else as JSON)."""
    params = "".join(f"<parameter={k}>\n{v if isinstance(v, str) else json.dumps(v)}\n</parameter>\n"
                     for k, v in arguments.items())
    return f"<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>"


def rendered_reply(name: str, arguments: dict, spelled_out: bool = False) -> list[int]:
    """A reply making one tool call, as the renderer writes it: the trained tokens of a
    supervised example ending in that assistant message (its text and the stop token).
    `spelled_out`: `<tool_call>` as single bytes, a non-canonical tokenization of the same text."""
    renderer = get_renderer(RENDERER, get_tokenizer(TOKENIZER))
    call = ToolCall(function=ToolCall.FunctionBody(name=name, arguments=json.dumps(arguments)))
    model_input, weights = renderer.build_supervised_example(
        [Message(role="user", content="go"), Message(role="assistant", content="", tool_calls=[call])])
    tokens = [t for t, w in zip(model_input.to_ints(), weights.tolist()) if w > 0]
    if spelled_out:
        tag = renderer.tokenizer.convert_tokens_to_ids("<tool_call>")
        bytes_ = renderer.tokenizer.encode("<", add_special_tokens=False) + \
            renderer.tokenizer.encode("tool_call>", add_special_tokens=False)
        assert tag not in bytes_ and len(bytes_) == len("<tool_call>")
        tokens = [x for t in tokens for x in (bytes_ if t == tag else [t])]
    return tokens


def reference_calls(family: str) -> list[tuple[str, dict]]:
    """ReferenceAgent's calls, one per turn."""
    calls = [("list_files", {}), ("read_file", {"path": "INSTRUCTIONS.md"}), ("get_baseline_scores", {})]
    calls += [("write_file", {"path": p, "content": c}) for p, c in reference_job_files(family).items()]
    return calls + [("submit_job", {})]


class ScriptedPolicy(TokenCompleter):
    """Plays `reference` episodes (ReferenceAgent's calls, as the renderer writes them), `idle`
    ones (get_baseline_scores until the turns run out), `cut` ones (a first reply stopped at
    max_tokens) and `broken` ones (a first reply without its stop token). The n-th episode to start
    plays scripts[n % len(scripts)]: a new episode is a prompt with no assistant turn yet; later
    turns read their script off the first. `spelled_out`: every `<tool_call>` sampled byte by byte."""

    def __init__(self, family: str, scripts: tuple[str, ...] = ("reference", "idle"), spelled_out: bool = False):
        self.tokenizer = get_tokenizer(TOKENIZER)
        self.scripts, self.reference, self.started = scripts, reference_calls(family), 0
        self.spelled_out, self.calls = spelled_out, 0

    async def __call__(self, model_input, stop, *, max_tokens=None) -> TokensWithLogprobs:
        self.calls += 1
        turns = self.tokenizer.decode(model_input.to_ints()).split("<|im_start|>assistant\n")[1:-1]
        if not turns:
            script = self.scripts[self.started % len(self.scripts)]
            self.started += 1
        else:
            script = "idle" if "<function=get_baseline_scores>" in turns[0] else "reference"
        stop_reason = "stop"
        if script == "reference":
            name, args = self.reference[min(len(turns), len(self.reference) - 1)]
            tokens = rendered_reply(name, args, spelled_out=self.spelled_out)
        elif script == "idle":
            tokens = rendered_reply("get_baseline_scores", {}, spelled_out=self.spelled_out)
        else:  # cut or broken: a reply that never reaches its stop token
            tokens = self.tokenizer.encode("<tool_call>\n<function=write_file>\n<parameter=path>\njob.toml",
                                           add_special_tokens=False)
            stop_reason = "length" if script == "cut" else "stop"
        return TokensWithLogprobs(tokens=tokens, maybe_logprobs=[-0.5] * len(tokens), stop_reason=stop_reason)


@pytest.fixture
def short_task(tmp_path):
    """calc_chain with 12 turns, so an idle episode runs out quickly."""
    path = tmp_path / "calc_chain_short.toml"
    path.write_text('family = "calc_chain"\nid = "calc_chain_short"\nmax_turns = 12\n')
    return str(path)


def builder(task: str, **kwargs) -> TrainerEnvGroupBuilder:
    return TrainerEnvGroupBuilder(task, model_name=TOKENIZER, renderer_name=RENDERER, **kwargs)


def test_group_rollout_through_cookbook_rollouts_advantages_and_data(short_task):
    group = builder(short_task, group_size=4, backend_kwargs={"latency": 0.2}, reuse_identical=True)
    tg = asyncio.run(do_group_rollout(group, ScriptedPolicy("calc_chain")))

    cores = group.core_envs
    assert len(tg.trajectories_G) == len(cores) == 4
    # which episode plays which script depends on which asked the policy first: read it off the env
    reference = [core.episode.trajectory[1]["info"]["tool"] == ["list_files"] for core in cores]
    assert sorted(reference) == [False, False, True, True]
    for traj, core, is_reference, metrics in zip(tg.trajectories_G, cores, reference, tg.metrics_G):
        steps = traj.transitions
        assert [t.reward for t in steps[:-1]] == [0.0] * (len(steps) - 1)  # reward only at the end
        assert steps[-1].episode_done
        assert steps[-1].reward == pytest.approx(core.episode.reward.total)
        # the episode's metrics come once per trajectory (compute_group_rewards), the stop reason per step
        assert {"validation", "job_quality", "speed", "validated", "job_succeeded", "episode_ended"} <= set(metrics)
        assert metrics["episode_ended"] == 1.0 and not {"validated", "validation"} & set(steps[-1].metrics)
        if is_reference:  # 3 look-arounds, 3 files, 1 submission; the job trains and scores
            assert len(steps) == 7 and traj.stop_reason == "completed" and steps[-1].metrics["stop/completed"] == 1.0
            assert metrics["validated"] == metrics["job_succeeded"] == metrics["validation"] == 1.0
            # named by their source: the mock backend's figures are never logged as measurements
            assert {"surrogate/post", "surrogate/post_expected", "surrogate/uplift", "surrogate/speed"} <= set(metrics)
            assert not any(k.startswith("measured/") for k in metrics)
            assert steps[-1].reward > 0.35
        else:  # idle: never submits, runs out of turns
            assert len(steps) == 12 and traj.stop_reason == "max_turns" and steps[-1].metrics["stop/max_turns"] == 1.0
            assert steps[-1].reward <= 0 and metrics["validated"] == 0.0
    # the identical reference bundles of the group were trained once: one result for both
    results = [core.episode.result for core, is_reference in zip(cores, reference) if is_reference]
    assert results[0].job_id == results[1].job_id and len({id(core.backend) for core in cores}) == 1

    assert tg.final_rewards_G == [0.0] * 4  # the env's reward came with the last step
    advantages = compute_advantages([tg])
    totals = tg.get_total_rewards()
    assert advantages[0].tolist() == pytest.approx([r - sum(totals) / 4 for r in totals])
    assert all((a > 0) == is_reference for a, is_reference in zip(advantages[0].tolist(), reference))
    data, meta = assemble_training_data([tg], advantages)
    assert data and {m["traj_idx"] for m in meta} == {0, 1, 2, 3}
    for datum in data:
        adv = datum.loss_fn_inputs["advantages"].to_torch()
        assert adv.abs().sum() > 0  # every datum carries its trajectory's advantage on sampled tokens
    assert not cores[0].backend.in_flight()


def gym_reference_run(family: str, seed: int, runs: Path) -> tuple[float, Path]:
    """The reference agent through the Gymnasium face: its reward and its run directory."""
    env = TrainerEnv(runs_dir=runs)
    obs, info = env.reset(seed=seed, options={"family": family})
    agent = make_agent("reference")
    agent.reset(obs, info)
    terminated = truncated = False
    while not (terminated or truncated):
        obs, reward, terminated, truncated, info = env.step(agent.act(obs, info))
    run = env.inner.run_path
    env.close()
    return reward, run


def workspace_files(run: Path) -> dict[str, bytes]:
    root = run / "workspace"
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_tool_call_arguments_round_trip_exactly_through_the_renderer():
    """The stock parser strips a value's surrounding whitespace and JSON-decodes what it can; the
    env's renderer hands back exactly what was rendered."""
    renderer = get_renderer(RENDERER, get_tokenizer(TOKENIZER))
    contents = ["ends in a newline\n", "\n\nleading and trailing\n\n", "", "\n", "42", '"quoted"', '{"a":1}',
                "  indented\n\ttabs  ", "a literal </parameter> stays", "x = '</parameter>'\n</parameter>\nmore\n"]
    for content in contents:
        sampled = rendered_reply("write_file", {"path": "f.txt", "content": content})
        message, termination = renderer.parse_response(sampled)
        assert termination.is_clean, content
        (call,) = message["tool_calls"]
        assert json.loads(call.function.arguments) == {"path": "f.txt", "content": content}, content
        # and the parsed reply renders back to the very tokens sampled (what lets turns merge)
        again, weights = renderer.build_supervised_example([Message(role="user", content="go"), message])
        assert [t for t, w in zip(again.to_ints(), weights.tolist()) if w > 0] == sampled
    stock, _ = get_renderer("qwen3_5_disable_thinking", get_tokenizer(TOKENIZER)).parse_response(
        rendered_reply("write_file", {"path": "f.txt", "content": "42\n"}))
    assert json.loads(stock["tool_calls"][0].function.arguments)["content"] == 42  # what this fixes


@pytest.mark.parametrize("family", ["calc_chain", "ledger"])
def test_files_and_reward_through_tinker_equal_the_gymnasium_path(family, tmp_path):
    """The reference agent's calls, rendered with the renderer and parsed back: the files written
    are byte-identical to the Gymnasium path's, so are the bundle hash and, for the same episode
    seed, the reward."""
    seed = 3
    group = builder(family, group_size=1, seed=seed, runs_dir=str(tmp_path / "tinker"))
    tg = asyncio.run(do_group_rollout(group, ScriptedPolicy(family, scripts=("reference",))))
    (tinker_run,) = (tmp_path / "tinker").iterdir()
    gym_reward, gym_run = gym_reference_run(family, seed, tmp_path / "gym")
    assert workspace_files(tinker_run) == workspace_files(gym_run)
    assert any(c.endswith(b"\n") for c in workspace_files(gym_run).values())  # what the stock parser stripped
    hashes = [json.loads((run / "manifest.json").read_text())["content_hash"] for run in (tinker_run, gym_run)]
    assert hashes[0] == hashes[1]
    assert tg.get_total_rewards() == [pytest.approx(gym_reward)] and gym_reward > 0.35


def uncached_prefill(trajectory) -> int:
    """Prompt tokens a prefix cache could not serve: each turn's prompt past its common prefix
    with the previous prompt and reply."""
    total, previous = 0, []
    for t in trajectory.transitions:
        ob = t.ob.to_ints()
        shared = next((i for i, (a, b) in enumerate(zip(ob, previous)) if a != b), min(len(ob), len(previous)))
        total += len(ob) - shared
        previous = ob + list(t.ac.tokens)
    return total


@pytest.mark.parametrize("spelled_out", [False, True], ids=["canonical", "non-canonical-tokens"])
def test_an_episode_merges_into_one_datum(spelled_out):
    """With the model's text unchanged, every observation extends the previous prompt and reply
    exactly, so the cookbook's own assembly makes one Datum per episode and nothing is prefilled
    twice; also when the sampled tokens are not the tokenizer's own split of that text."""
    group = builder("calc_chain", group_size=2, seed=0)
    tg = asyncio.run(do_group_rollout(group, ScriptedPolicy("calc_chain", scripts=("reference",),
                                                            spelled_out=spelled_out)))
    assert [len(t.transitions) for t in tg.trajectories_G] == [7, 7]
    data, meta = assemble_training_data([tg], [torch.tensor([1.0, -1.0])])
    assert [m["traj_idx"] for m in meta] == [0, 1]  # one record per episode
    for traj, datum in zip(tg.trajectories_G, data):
        last = traj.transitions[-1]
        whole = last.ob.to_ints() + list(last.ac.tokens)
        assert datum.model_input.to_ints() == whole[:-1]  # the episode, every sampled token as sampled
        assert uncached_prefill(traj) == traj.transitions[-1].ob.length - sum(len(t.ac.tokens) for t in traj.transitions[:-1])
        assert all(list(t.ac.tokens) == whole[len(t.ob.to_ints()):len(t.ob.to_ints()) + len(t.ac.tokens)]
                   for t in traj.transitions)


def test_every_trajectory_carries_the_episode_metrics(short_task):
    """Episodes the cookbook ends itself (a reply cut at max_tokens, one without its stop token)
    carry the metrics too, so `env/all/validated` is the share of all episodes: 1 of 5 is 0.2."""
    group = builder(short_task, group_size=5, seed=0)
    policy = ScriptedPolicy("calc_chain", scripts=("reference", "cut", "broken", "idle", "cut"))
    tg = asyncio.run(do_group_rollout(group, policy))
    stops = sorted(t.stop_reason for t in tg.trajectories_G)
    assert stops == ["completed", "max_tokens", "max_tokens", "max_turns", "parse_error"]
    assert all({"validated", "validation", "job_quality", "attempts", "episode_ended"} <= set(m) for m in tg.metrics_G)
    metrics = compute_trajectory_metrics([tg], [group.logging_tags()])
    assert metrics["env/all/validated"] == pytest.approx(0.2)
    assert metrics["env/all/episode_ended"] == pytest.approx(0.4)  # the reference and the idle one
    for traj, core, m in zip(tg.trajectories_G, group.core_envs, tg.metrics_G):
        assert core.episode.done  # the cut ones were ended, as they stood
        if traj.stop_reason in ("max_tokens", "parse_error"):
            assert m["episode_ended"] == 0.0
            assert core.episode.trajectory[-1]["reason"] == f"the rollout ended it: {traj.stop_reason}"
            assert traj.transitions[-1].reward == -0.1 and traj.transitions[-1].episode_done


def test_builder_pickles_before_and_after_making_envs(short_task):
    group = builder(short_task, group_size=2, backend_kwargs={"latency": 0.0}, reuse_identical=True, seed=7)
    clone = pickle.loads(pickle.dumps(group))
    assert vars(clone) == vars(group) and clone.logging_tags() == ["trainergym", "calc_chain"]

    async def build_then_pickle():
        envs = await group.make_envs()
        again = pickle.loads(pickle.dumps(group))  # live envs and backends stay behind
        assert again.core_envs == [] and again.task == group.task and len(envs) == 2
        await group.cleanup()
        assert len(await again.make_envs()) == 2
        await again.cleanup()

    asyncio.run(build_then_pickle())


def test_cancelling_a_group_mid_job_leaves_nothing_running(short_task):
    group = builder(short_task, group_size=2, backend_kwargs={"latency": 5.0})

    async def scenario():
        started = time.monotonic()
        task = asyncio.create_task(do_group_rollout(group, ScriptedPolicy("calc_chain", scripts=("reference",))))
        while not any(core.backend.in_flight() for core in group.core_envs):
            assert time.monotonic() - started < 30, "no job was submitted"
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.2)  # let the second episode's job start too
        jobs = [j for core in group.core_envs for j in core.backend.in_flight()]
        cancelled = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert time.monotonic() - cancelled < 4  # did not wait for the 5 s jobs
        assert jobs and all(not core.backend.in_flight() for core in group.core_envs)
        assert all(core.episode.done for core in group.core_envs)
        await group.cleanup()  # idempotent, never raises
        await group.cleanup()
        return jobs

    jobs = asyncio.run(scenario())
    assert len(jobs) >= 1


def test_a_literal_think_tag_in_a_tool_call_is_content():
    """Every family's reference reward strips thinking with `rsplit("</think>", 1)`; a model
    writing that code emits the `</think>` token. The stock parser takes all before it for
    thinking and loses the call; the env's renderer keeps it."""
    tokenizer = get_tokenizer(TOKENIZER)
    content = 'def reward(reply):\n    return reply.rsplit("</think>", 1)[-1]'
    sampled = tokenizer.encode(qwen35_tool_call("write_file", {"path": "r.py", "content": content}),
                               add_special_tokens=False) + [tokenizer.convert_tokens_to_ids("<|im_end|>")]
    stock, _ = get_renderer("qwen3_5_disable_thinking", tokenizer).parse_response(sampled)
    assert "tool_calls" not in stock
    ours, termination = get_renderer(ENV_RENDERER, tokenizer).parse_response(sampled)
    assert termination.is_clean and json.loads(ours["tool_calls"][0].function.arguments)["content"] == content


def test_message_mapping_per_call_results_and_errors():
    renderer = get_renderer(RENDERER, get_tokenizer(TOKENIZER), model_name=TOKENIZER)
    core = AsyncTrainerEnv(task="calc_chain", backend="mock")
    env = TrainerMessageEnv(core, renderer, "calc_chain")

    async def scenario():
        first = await env.initial_observation()
        assert first[0]["role"] == "system" and "<tools>" in first[0]["content"] and "submit_job" in first[0]["content"]
        assert first[-1]["role"] == "user" and "TASK calc_chain" in first[-1]["content"]

        def call(name, arguments):
            return ToolCall(function=ToolCall.FunctionBody(name=name, arguments=arguments))

        # two calls in one message: each answered by its own tool message, in order
        calls = [call("list_files", "{}"), call("read_file", '{"path": "INSTRUCTIONS.md"}')]
        two = await env.step({"role": "assistant", "content": "", "tool_calls": calls})
        replies = two.next_messages[-2:]
        assert [(m["role"], m["name"]) for m in replies] == [("tool", "list_files"), ("tool", "read_file")]
        assert "job.toml" in replies[0]["content"]
        assert replies[1]["content"] == core.episode.workspace.read("INSTRUCTIONS.md")
        assert two.reward == 0.0 and not two.episode_done and two.metrics == {}

        # a JSON document as file content: the XML format decodes it; our string parameter gets text back
        written = await env.step({"role": "assistant", "content": "",
                                  "tool_calls": [call("write_file", '{"path": "notes.json", "content": {"a": 1}}')]})
        assert written.next_messages[-1]["content"].startswith("wrote notes.json")
        assert json.loads(core.episode.workspace.read("notes.json")) == {"a": 1}

        # arguments the env cannot parse: every call of the message gets that error
        bad = await env.step({"role": "assistant", "content": "",
                              "tool_calls": [call("list_files", "{}"), call("read_file", "not json")]})
        assert [m["content"] for m in bad.next_messages[-2:]] == [bad.next_messages[-1]["content"]] * 2
        assert "not valid JSON" in bad.next_messages[-1]["content"]

        # a call the renderer rejected: its diagnosis, the turn spent, and nothing run (the env
        # alone would accept this unterminated block)
        turns = core.episode.turns
        raw = '<tool_call>{"name": "write_file", "arguments": {"path": "x.txt", "content": "hi"}}'
        unparsed = await env.step({"role": "assistant", "content": "", "unparsed_tool_calls": [
            UnparsedToolCall(raw_text=raw, error="Unterminated <tool_call> block")]})
        assert unparsed.next_messages[-1]["role"] == "tool" and "Unterminated" in unparsed.next_messages[-1]["content"]
        assert core.episode.turns == turns + 1 and not (core.episode.workspace.root / "x.txt").exists()

        # prose without a tool call: the env's observation, as a user message
        prose = await env.step({"role": "assistant", "content": "I think I am done."})
        assert prose.next_messages[-1]["role"] == "user" and "no tool call" in prose.next_messages[-1]["content"]
        await core.end("test over")
        core.close()

    asyncio.run(scenario())


def test_dataset_keeps_the_held_out_family_out_of_training():
    train_ds, test_ds = asyncio.run(TrainerDatasetBuilder(model_name=TOKENIZER, renderer_name=RENDERER, n_batches=3)())
    assert len(train_ds) == 3
    seen = {b.family for i in range(len(train_ds)) for b in train_ds.get_batch(i)}
    assert seen == {"calc_chain", "dispatch", "ledger", "multi_hop", "string_pipeline"}  # 15 groups cover all 5
    batch = train_ds.get_batch(0)
    assert len(batch) == 5 and all(b.group_size == 8 for b in batch)  # 40 episodes per batch
    assert [b.family for i in range(len(test_ds)) for b in test_ds.get_batch(i)] == ["triage"]

    files = ["examples/tasks/calc_chain.toml", "examples/tasks/triage.toml"]
    train_ds, test_ds = asyncio.run(TrainerDatasetBuilder(task_files=files, n_batches=1)())
    assert {b.task for b in train_ds.get_batch(0)} == {files[0]}
    assert [b.task for b in test_ds.get_batch(0)] == [files[1]]
    with pytest.raises(ValueError, match="held-out"):
        asyncio.run(TrainerDatasetBuilder(families=["triage"])())


def test_train_config_has_the_original_defaults(tmp_path):
    config = train_config(str(tmp_path / "log"))
    assert isinstance(config, train.Config)
    assert config.model_name == "Qwen/Qwen3.6-35B-A3B" and config.renderer_name == "qwen3_5_disable_thinking"
    assert config.dataset_builder.renderer_name == ENV_RENDERER  # the same chat format, see below
    assert config.lora_rank == 8 and config.learning_rate == 4e-5
    assert config.async_config == train.AsyncConfig(max_steps_off_policy=2, groups_per_batch=5)
    assert config.dataset_builder.group_size == 8 and config.dataset_builder.groups_per_batch == 5
    assert config.training_loss_fn() == "stable_reinforce"


def test_example_dry_run_prints_the_plan(tmp_path):
    example = Path(__file__).resolve().parents[2] / "examples/train_tinker.py"
    out = subprocess.run([sys.executable, str(example), "--log-path", str(tmp_path / "log"), "--dry-run"],
                         capture_output=True, text=True, timeout=120, env={**os.environ, "TINKER_API_KEY": ""})
    assert out.returncode == 0, out.stderr
    assert "Qwen/Qwen3.6-35B-A3B" in out.stdout and "5 groups x 8 episodes" in out.stdout
    assert "test on (held out): triage" in out.stdout


def test_env_seconds_counts_the_time_in_the_core_env(short_task):
    """`TrainerMessageEnv.env_seconds` (what bench/adapter_overhead.py subtracts to get the adapter's
    overhead per turn) holds the time spent in the core env: here a known 30 ms per turn, on an
    idle episode (no job, so no probe)."""
    group = builder(short_task, group_size=1)

    async def idle_episode():
        (env,) = await group.make_envs()
        core, outer = group.core_envs[0], env.step
        inner, spent = core.step, []

        async def slow_core(action):
            await asyncio.sleep(0.03)
            return await inner(action)

        async def timed(action, *, extra=None):
            started = time.perf_counter()
            try:
                return await outer(action, extra=extra)
            finally:
                spent.append(time.perf_counter() - started)

        core.step, env.step = slow_core, timed
        await run_rollout(ScriptedPolicy("calc_chain", scripts=("idle",)), env)
        await group.cleanup()
        return env.message_env.env_seconds, spent

    env_seconds, spent = asyncio.run(idle_episode())
    assert len(spent) == 12  # the short task's turns
    assert 12 * 0.03 <= env_seconds <= sum(spent)


def test_importing_without_the_extra_names_the_extra(monkeypatch):
    """Simulated: `chz` (the first module the adapter imports) is not installed."""
    import importlib

    monkeypatch.setitem(sys.modules, "chz", None)
    monkeypatch.delitem(sys.modules, "trainergym.adapters.tinker")
    with pytest.raises(ModuleNotFoundError, match=r"needs 'chz'.*pip install 'trainergym\[tinker\]'") as raised:
        importlib.import_module("trainergym.adapters.tinker")
    assert raised.value.name == "chz"
