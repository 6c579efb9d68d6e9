"""One seed of GRPO on TRL's `GRPOTrainer`, with our tool-executing rollouts plugged in.

TRL owns the loss (its GRPO objective, group-normalised advantages, no KL: `beta=0`), the
optimisation loop, gradient clipping and logging. Generation is ours, through TRL's
`rollout_func` hook (trl 1.16): TRL hands it the step's prompts, already repeated `group_size`
times by its sampler, and takes back prompt and completion ids plus `env_mask` (1 on the model's
own tokens, 0 on forced tool responses, which TRL then masks from the loss); every other field it
returns goes to the reward functions. We return each rollout's verifiers-style `messages`, so the
caller's reward sees what a verifiers rubric sees. Why not TRL's own `tools=` loop: it generates
each turn with `model.generate` over the whole batch, re-encodes the conversation after every tool
call and renders tool schemas into the prompt; ours keeps one KV cache for the whole rollout and
runs a tool the moment its call closes (bench/mini.py measures both).

Why we build the optimizer and scheduler ourselves and hand them to the trainer
(`optimizers=(...)`): prime-rl decays linearly or by cosine to `min_lr`, and transformers has no
linear-to-min_lr schedule, so the rate of every step comes from `Knobs.lr_at`.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from trainergym.mini.knobs import Knobs
from trainergym.mini.rollout import Task, generate

# reward(tasks, completions) -> one float per completion; completions are verifiers-style message
# lists (assistant and tool messages), tasks the `Task`s they played.
Reward = Callable[[list[Task], list[list[dict]]], list[float]]


@dataclass
class SeedRun:
    """One seed's training: its reward curve and the trained model (in memory)."""

    seed: int
    rewards: list[float] = field(default_factory=list)  # mean train reward per step
    rollouts: int = 0
    seconds: float = 0.0
    generation_seconds: float = 0.0
    model: object = None


def train_seed(model, tokenizer, family, tasks: list[Task], reward: Reward, knobs: Knobs, seed: int,
               device: str = "cpu", max_len: int = 1024, max_new: int | None = None,
               log: Callable[[str], None] | None = None) -> SeedRun:
    """Train `model` in place with GRPO on `tasks` for `knobs.max_steps` steps."""
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    run = SeedRun(seed=seed)
    gen = torch.Generator(device=device).manual_seed(seed)
    dataset = Dataset.from_list([{"prompt": [{"role": "user", "content": t.prompt}], "task_index": i}
                                 for i, t in enumerate(tasks)])

    def rollout_func(prompts, trainer):
        started = time.perf_counter()
        # TRL passes prompts alone; `_Trainer` noted the step's rows, in the same order.
        batch = [tasks[i] for i in trainer._mini_task_indices]
        played = generate(trainer.accelerator.unwrap_model(trainer.model), tokenizer, family, batch,
                          max_turns=knobs.max_turns, max_tokens=knobs.max_tokens, temperature=knobs.temperature,
                          max_len=max_len, max_new=max_new, generator=gen)
        run.generation_seconds += time.perf_counter() - started
        run.rollouts += len(played)
        return {"prompt_ids": [r.prompt_ids for r in played], "completion_ids": [r.completion_ids for r in played],
                "logprobs": None, "env_mask": [r.env_mask for r in played],
                "messages": [r.messages for r in played]}

    def reward_func(prompts, completions, messages, task_index, **_):
        values = [float(v) for v in reward([tasks[i] for i in task_index], messages)]
        run.rewards.append(sum(values) / len(values))
        return values

    class _Trainer(GRPOTrainer):
        """GRPOTrainer that tells our rollout function which tasks the step's prompts are."""

        def _generate_and_score_completions(self, inputs):
            self._mini_task_indices = [x["task_index"] for x in inputs]
            return super()._generate_and_score_completions(inputs)

    class _Log(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            if log and run.rewards:
                log(f"[mini grpo seed {seed}] step {state.global_step} reward {run.rewards[-1]:.3f}")

    opt = torch.optim.AdamW(model.parameters(), lr=knobs.lr, weight_decay=knobs.weight_decay, betas=(0.9, 0.99))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: knobs.lr_at(s) / knobs.lr)
    with tempfile.TemporaryDirectory(prefix="mini-grpo-") as out:
        args = GRPOConfig(
            output_dir=out, per_device_train_batch_size=knobs.batch_size, num_generations=knobs.group_size,
            gradient_accumulation_steps=1, num_iterations=1, max_steps=knobs.max_steps, learning_rate=knobs.lr,
            max_grad_norm=knobs.max_norm, temperature=knobs.temperature, beta=0.0, max_completion_length=max_len,
            logging_steps=10**9, save_strategy="no", report_to="none", use_cpu=device == "cpu", bf16=False,
            seed=seed, data_seed=seed, disable_tqdm=True, gradient_checkpointing=False, dataloader_num_workers=0, remove_unused_columns=False,
        )
        trainer = _Trainer(model=model, reward_funcs=reward_func, args=args, train_dataset=dataset,
                           processing_class=tokenizer, rollout_func=rollout_func, optimizers=(opt, sched),
                           callbacks=[_Log()])
        if log is None:  # quiet: no metrics dict printed to stdout (a command's table or JSON lives there)
            from transformers.trainer_callback import PrinterCallback

            trainer.remove_callback(PrinterCallback)
        started = time.perf_counter()
        trainer.train()
        run.seconds = time.perf_counter() - started
    run.model = trainer.accelerator.unwrap_model(trainer.model)
    return run
