"""The TRL adapter: TRL's real `GRPOTrainer` drives `TrainerTRLEnv` on CPU, offline.

No weights can be downloaded, so the GRPO test builds its own model and tokenizer: a byte-level
BPE trained here (on the prompts and the reference job's calls) under TRL's Qwen3 chat template,
which TRL parses for tool calls, and a tiny random Qwen3. A random model never calls a tool, so
it is first fitted (a plain torch loop) on the reference agent's calls for calc_chain; the
rollouts GRPO then samples make those calls, and the env validates, trains (mock) and scores them.

Cost on 2 shared cores: `test_grpo_trainer_runs_episodes_and_logs_the_env_rewards` 80-130 s (the
fit ~50 s, 2 GRPO steps ~25-45 s with 4 episodes, 2 of them probed for ~10 s each; it sets torch to
one thread, which on busy cores is several times faster than two); the reference-job parity test
~11 s (one probe each way); the rest a few seconds. Skipped unless the `trl` extra is installed.
"""

import asyncio
import functools
import importlib
import inspect
import json
import os
import sys
import time

import pytest

from tests.marks import import_extra

pytestmark = pytest.mark.extras

os.environ["HF_HUB_OFFLINE"] = "1"  # a stray hub lookup fails fast instead of hanging
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["TRL_EXPERIMENTAL_SILENCE"] = "1"
import_extra("trl", "the TRL adapter", "trl")

from trainergym.adapters.trl import SYSTEM_PROMPT, TrainerTRLEnv, trainer_datasets  # noqa: E402
from trainergym.agents.reference import reference_job_files  # noqa: E402
from trainergym.env.core import AsyncTrainerEnv, TrainerEnv  # noqa: E402
from trainergym.env.reward import NO_SUBMISSION_TOTAL  # noqa: E402
from trainergym.env.tools import TOOLS  # noqa: E402

FAMILY = "calc_chain"


def tool_methods(env: TrainerTRLEnv) -> list:
    """The methods GRPOTrainer exposes as tools, found the way it finds them (grpo_trainer.py)."""
    return [getattr(env, name) for name, _ in inspect.getmembers(type(env), predicate=inspect.isfunction)
            if name not in ("reset", "get_reward") and not name.startswith("_")]


def reference_calls(family: str = FAMILY) -> list[dict]:
    """The reference agent's calls (trainergym.agents.reference) up to its first submit_job."""
    calls = [{"name": "list_files", "arguments": {}}, {"name": "read_file", "arguments": {"path": "INSTRUCTIONS.md"}},
             {"name": "get_baseline_scores", "arguments": {}}]
    calls += [{"name": "write_file", "arguments": {"path": p, "content": c}} for p, c in reference_job_files(family).items()]
    return calls + [{"name": "submit_job", "arguments": {}}]


# --- the tools, the import, the dataset ------------------------------------------------------------
def test_the_tools_trl_extracts_are_trainergyms_tools():
    """What GRPOTrainer renders into the prompt (get_json_schema of each public method) is TOOLS."""
    from transformers.utils import get_json_schema

    methods = tool_methods(TrainerTRLEnv())
    assert sorted(m.__name__ for m in methods) == sorted(TOOLS)
    for method in methods:
        got, want = get_json_schema(method)["function"], TOOLS[method.__name__].schema["function"]
        assert (got["name"], got["description"]) == (want["name"], want["description"])
        assert {k: (v["type"], v["description"]) for k, v in got["parameters"]["properties"].items()} == \
               {k: (v["type"], v["description"]) for k, v in want["parameters"]["properties"].items()}
        assert got["parameters"].get("required", []) == want["parameters"].get("required", [])


def test_without_the_extra_the_import_names_it(monkeypatch):
    monkeypatch.delitem(sys.modules, "trainergym.adapters.trl", raising=False)
    for name in [m for m in sys.modules if m == "trl" or m.startswith("trl.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "trl", None)  # what an environment without it gives
    with pytest.raises(ImportError, match=r"pip install 'trainergym\[trl\]'"):
        importlib.import_module("trainergym.adapters.trl")


def test_the_example_helps_offline():
    """examples/train_trl.py --help needs neither the network nor the weights (nor imports trl)."""
    import subprocess
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / "examples" / "train_trl.py"
    out = subprocess.run([sys.executable, str(example), "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "--lora" in out.stdout and "Qwen/Qwen3" not in out.stderr


def test_the_dataset_holds_triage_out():
    train, test = trainer_datasets(seeds=range(2), test_seeds=range(3))
    assert "triage" not in set(train["family"]) and len(set(train["family"])) == len(train) // 2
    assert set(test["family"]) == {"triage"} and test["seed"] == [0, 1, 2]
    row = train[0]
    assert row["prompt"] == [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": ""}]
    assert (row["task"], row["seed"]) == (row["family"], 0)
    only_train, none = trainer_datasets([FAMILY], seeds=[5])
    assert only_train["task"] == [FAMILY] and none is None
    with pytest.raises(ValueError, match="held-out"):
        trainer_datasets(["triage"])


# --- scores: the same as the Gymnasium env ----------------------------------------------------------
def test_the_reference_job_scores_as_through_gymnasium():
    """The same calls at the same episode seed: the same post_expected and the same reward."""
    seed, calls = 3, reference_calls()
    gym_env = TrainerEnv()
    gym_env.reset(seed=seed, options={"family": FAMILY})
    for call in calls:
        _, gym_reward, terminated, truncated, info = gym_env.step(call)
    gym_env.close()
    assert terminated and info["reward_breakdown"]["validated"]

    records = []
    env = TrainerTRLEnv(on_episode_end=records.append)
    obs = env.reset(prompt=[], task=FAMILY, family=FAMILY, seed=seed)  # a dataset row, prompt column included
    assert "submit_job" in obs
    for call in calls:
        out = getattr(env, call["name"])(**call["arguments"])
    assert "Episode reward" in out
    reward = env.get_reward()
    assert reward == gym_reward == env.final_info["reward_breakdown"]["total"]
    assert env.final_info["reward_breakdown"]["post_expected"] == info["reward_breakdown"]["post_expected"]
    assert records[0]["reward"] == reward and records[0]["seed"] == seed and records[0]["family"] == FAMILY
    assert env.get_reward() == reward and len(records) == 1  # reported once
    assert "episode is over" in env.list_files()


def test_an_unfinished_episode_scores_what_ending_it_gives():
    async def ended(calls):
        core = AsyncTrainerEnv()
        await core.reset(seed=0, options={"task": FAMILY})
        for call in calls:
            await core.step(call)
        info = await core.end("stopped")
        core.close()
        return info["reward_breakdown"]["total"]

    records = []
    env = TrainerTRLEnv(on_episode_end=records.append)
    env.reset(task=FAMILY, seed=0)
    assert env.get_reward() == NO_SUBMISSION_TOTAL == asyncio.run(ended([]))

    env.reset(task=FAMILY, seed=1)  # reused, as TRL pools instances
    env.write_file(path="job.toml", content="not toml [")
    env.reset(task=FAMILY, seed=2)  # an episode still open is ended first, without being reported
    env.read_file(path="INSTRUCTIONS.md")
    assert env.env.episode.turns == 1 and env.get_reward() == asyncio.run(ended([{"name": "read_file", "arguments": {"path": "INSTRUCTIONS.md"}}]))
    assert [r["seed"] for r in records] == [0, 2]
    assert records[1]["truncated_reason"] == "the rollout ended before the episode did" == env.final_info["truncated_reason"]


# --- TRL's GRPOTrainer, for real ---------------------------------------------------------------------
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# Plain added tokens, as in Qwen's vocabulary (TRL's parser reads them as text).
ADDED = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"]


def build_tokenizer(corpus: list[str], vocab_size: int):
    """A byte-level BPE trained on `corpus` under TRL's Qwen3 chat template. Merges may cross
    word boundaries, so the texts it was trained on become short token runs: that keeps the fit
    and the sampling cheap on CPU; any other text still encodes, byte by byte."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    from trl.chat_template_utils import qwen3_chat_template

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(corpus, trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False))
    bpe.add_tokens([AddedToken(t, special=False, normalized=False) for t in ADDED])
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    tok.chat_template = qwen3_chat_template  # TRL's copy of Qwen3's: the one it knows how to parse
    return tok


def fit(model, sequences: list[tuple[list[int], list[int]]], max_steps: int = 400, target: float = 2e-3) -> tuple[int, float]:
    """Teacher-force `model` on (ids, loss mask) pairs until the mean loss is below `target`.
    Returns (steps, final loss)."""
    import torch

    width = max(len(ids) for ids, _ in sequences)
    ids = torch.tensor([s + [0] * (width - len(s)) for s, _ in sequences])
    labels = torch.tensor([[t if m else -100 for t, m in zip(s, mask)] + [-100] * (width - len(s)) for s, mask in sequences])
    attention = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s, _ in sequences])
    opt = torch.optim.AdamW(model.parameters(), lr=5e-3)
    model.train()
    for step in range(1, max_steps + 1):
        loss = model(input_ids=ids, attention_mask=attention, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        if loss.item() < target:
            break
    return step, loss.item()


@pytest.mark.slow
def test_grpo_trainer_runs_episodes_and_logs_the_env_rewards(tmp_path):
    """Two GRPO steps of TRL's own trainer, one prompt of 2 rollouts each: calc_chain (where the
    fitted calls validate and the job trains) and multi_hop (where calc_chain's job cannot pass
    the family's checks, and the rollout ends with the episode unfinished). The rewards TRL logs
    per row are the env's episode rewards."""
    import torch
    from datasets import Dataset
    from transformers import Qwen3Config, Qwen3ForCausalLM
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    class RewardLog(TrainerCallback):
        """After each step, the per-row rewards and prompts GRPOTrainer logged (`_logs`, what
        `log_completions` prints; it holds only the last generation batch)."""

        def __init__(self):
            self.trainer, self.rewards, self.prompts, self.completions = None, [], [], []

        def on_step_end(self, args, state, control, **kwargs):
            self.rewards.append(list(self.trainer._logs["rewards"]["TrainerTRLEnv"]))
            self.prompts.append([p[-1]["content"] for p in self.trainer._logs["prompt"]])
            self.completions.append(list(self.trainer._logs["completion"]))

    started, threads = time.monotonic(), torch.get_num_threads()
    torch.set_num_threads(1)  # on 2 shared cores, one thread is several times faster than two
    torch.manual_seed(0)
    try:
        rows = [{"prompt": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": ""}],
                 "task": family, "family": family, "seed": 0} for family in (FAMILY, "multi_hop")]
        calls = [c for c in reference_calls() if c["name"] not in ("list_files", "read_file")]  # one message
        completion = "\n".join(f"<tool_call>\n{json.dumps(c)}\n</tool_call>" for c in calls)
        kwargs = {"enable_thinking": False}
        probe = TrainerTRLEnv()
        observations = {r["family"]: probe.reset(**r) for r in rows}
        prompts = [r["prompt"][:-1] + [{"role": "user", "content": observations[r["family"]]}] for r in rows]
        tools = tool_methods(probe)

        # The tokenizer: trained on what the rollouts will say, under the template TRL renders with.
        from trl.chat_template_utils import get_training_chat_template
        bootstrap = build_tokenizer(["bootstrap"], 300)
        texts = [bootstrap.apply_chat_template(p, tools=tools, tokenize=False, add_generation_prompt=True,
                                               chat_template=get_training_chat_template(bootstrap), **kwargs)
                 for p in prompts]
        tok = build_tokenizer([*texts, completion, "Done."], 3000)
        model = Qwen3ForCausalLM(Qwen3Config(
            vocab_size=len(tok), hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=32, max_position_embeddings=8192, tie_word_embeddings=True,
            pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, bos_token_id=None))

        records, log = [], RewardLog()
        config = GRPOConfig(
            output_dir=str(tmp_path), use_cpu=True, bf16=False, report_to="none", save_strategy="no", seed=0,
            max_steps=2, per_device_train_batch_size=2, num_generations=2, learning_rate=1e-5, beta=0.0,
            max_completion_length=3072, max_tool_calling_iterations=1, chat_template_kwargs=kwargs,
            logging_steps=1, dataloader_num_workers=0)
        trainer = GRPOTrainer(model=model, args=config, train_dataset=Dataset.from_list(rows), processing_class=tok,
                              environment_factory=functools.partial(TrainerTRLEnv, on_episode_end=records.append),
                              callbacks=[log])
        log.trainer = trainer

        # The fit, on the exact tokens GRPOTrainer will show the model: its prompt rendering
        # (_tokenize_prompts) and its tool-response suffix (_get_tool_suffix_ids). Trained: the
        # reference calls in one message, then "Done." after the tool responses.
        env_tools = trainer._env_tools[None]
        calls_ids = tok(completion + "<|im_end|>", add_special_tokens=False)["input_ids"]
        # Short stand-ins for the tool results (results as long as the probe's report would make the fit
        # several times slower): the reply after real results is therefore noise, which
        # max_tool_calling_iterations=1 keeps from running further tools.
        suffix = trainer._get_tool_suffix_ids([{"role": "tool", "name": c["name"], "content": "ok"} for c in calls])
        done = tok("Done.<|im_end|>", add_special_tokens=False)["input_ids"]
        sequences = []
        for prompt in prompts:
            prompt_ids = tok.apply_chat_template(prompt, tools=env_tools, chat_template=trainer.chat_template,
                                                 add_generation_prompt=True, tokenize=True, return_dict=True,
                                                 **kwargs)["input_ids"]
            ids = prompt_ids + calls_ids + suffix + done
            sequences.append((ids, [0] * len(prompt_ids) + [1] * len(calls_ids) + [0] * len(suffix) + [1] * len(done)))
        steps, loss = fit(trainer.model, sequences)
        fitted = time.monotonic()

        trainer.train()
        trained = time.monotonic()
    finally:
        torch.set_num_threads(threads)
    print(f"\nfit: {steps} steps to loss {loss:.4f} ({len(calls_ids)} tokens of calls) in {fitted - started:.0f} s; "
          f"2 GRPO steps in {trained - fitted:.0f} s; episodes: "
          + ", ".join(f"{r['family']}@{r['seed']} {r['reward']:.3f} ({r['turns']} turns)" for r in records))

    # Every rollout's episode was scored once, and TRL logged exactly those rewards, row by row.
    assert len(records) == 4
    logged = [r for batch in log.rewards for r in batch]
    assert logged == pytest.approx([r["reward"] for r in records], abs=1e-6)
    for prompts_seen, step_records in zip(log.prompts, (records[:2], records[2:])):
        family = step_records[0]["family"]
        assert [r["family"] for r in step_records] == [family] * 2  # a group is one row
        assert prompts_seen == [observations[family]] * 2  # the user message was reset()'s observation
    means = [h["rewards/TrainerTRLEnv/mean"] for h in trainer.state.log_history if "rewards/TrainerTRLEnv/mean" in h]
    assert means == pytest.approx([(records[0]["reward"] + records[1]["reward"]) / 2,
                                   (records[2]["reward"] + records[3]["reward"]) / 2], abs=1e-6)

    # Real tool calls ran: at least one episode validated and trained; the rows' rewards differ.
    by_family = {}
    for r in records:
        by_family.setdefault(r["family"], []).append(r)
    assert set(by_family) == {FAMILY, "multi_hop"}
    assert any(r["reward_breakdown"]["validated"] and r["reward_breakdown"]["job_status"] == "succeeded"
               for r in by_family[FAMILY])
    assert max(r["reward"] for r in by_family[FAMILY]) > max(r["reward"] for r in by_family["multi_hop"])
    first_messages = [c[0] for batch in log.completions for c in batch]
    assert any([t["function"]["name"] for t in m.get("tool_calls") or []] == [c["name"] for c in calls]
               for m in first_messages)  # parsed by TRL from the sampled text, then run by it
    assert all(h["tools/call_frequency"] > 0 for h in trainer.state.log_history if "tools/call_frequency" in h)
