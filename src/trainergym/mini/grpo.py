"""GRPO on TRL's `GRPOTrainer`, with our tool-executing rollouts plugged in; a job's seeds side by side.

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

Why seeds train in one process, a thread each, meeting at every step: the models are so small that
one seed's decoding leaves the GPU's work in small pieces, so the seeds' batches are decoded as one
(`stack.py`); the training steps, a smaller share of the time, take turns.
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


def train_seeds(models: list, tokenizer, family, tasks: list[Task], reward: Reward, knobs: Knobs, seeds: list[int],
                device: str = "cpu", max_len: int = 1024, max_new: int | None = None,
                log: Callable[[str], None] | None = None) -> list[SeedRun]:
    """Train each of `models` in place with GRPO, `models[i]` with seed `seeds[i]`, side by side:
    one `GRPOTrainer` per seed, each in its own thread, meeting at every step so that all the
    seeds' rollouts are decoded in one stacked batch (`stack.SeedStack`). Each seed keeps its own
    optimiser, data order and sampling generator; only the decoding is shared. Their training
    steps take turns (a lock), so memory holds one step's activations, not one per seed; so do
    the reward calls (a job's confined reward is one process)."""
    import threading

    if len(models) != len(seeds):
        raise ValueError("train_seeds: one seed per model")
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    runs = [SeedRun(seed=s) for s in seeds]
    meet = _Lockstep(models, tokenizer, family, knobs, max_len, max_new, seeds, device, runs)
    turns, rewarding = threading.Lock(), threading.Lock()
    trainers = [_trainer(k, models[k], tokenizer, tasks, reward, knobs, seeds[k], device, max_len, runs[k], meet, turns,
                         rewarding, log) for k in range(len(models))]
    errors: list[BaseException] = []

    def run(k: int) -> None:
        started = time.perf_counter()
        try:
            trainers[k][0].train()
        except BaseException as e:  # noqa: BLE001 - re-raised below, after the other seeds are released
            errors.append(e)
        finally:
            meet.leave()  # nobody waits for a seed that stopped
            runs[k].seconds = time.perf_counter() - started

    threads = [threading.Thread(target=run, args=(k,), name=f"mini-seed-{seeds[k]}") for k in range(len(models))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for _, out in trainers:
        out.cleanup()
    real = [e for e in errors if not isinstance(e, threading.BrokenBarrierError)]
    if errors:
        raise (real or errors)[0]
    for k, (trainer, _) in enumerate(trainers):
        runs[k].model = trainer.accelerator.unwrap_model(trainer.model)
    return runs


class _Lockstep:
    """Where the seeds' trainers meet each step: the last to arrive decodes every seed's batch."""

    def __init__(self, models, tokenizer, family, knobs: Knobs, max_len: int, max_new: int | None, seeds, device, runs):
        import threading

        self.models, self.tokenizer, self.family, self.knobs = models, tokenizer, family, knobs
        self.max_len, self.max_new, self.seeds, self.device, self.runs = max_len, max_new, seeds, device, runs
        self.step = 0
        self.batches: dict[int, list[Task]] = {}
        self.played: dict[int, list] = {}
        self.barrier = threading.Barrier(len(models), action=self._play)

    def play(self, k: int, batch: list[Task]) -> list:
        self.batches[k] = batch
        self.barrier.wait()  # BrokenBarrierError if the decoding failed or a seed stopped
        return self.played.pop(k)

    def leave(self) -> None:
        self.barrier.abort()

    def _generators(self, order: list[int]) -> list:
        """One sampling generator per seed, drawn afresh each step from (seed, step): a decoding runs
        until the last row of every seed ends and draws noise at each of its steps, so a generator
        kept across steps would make a seed's draws depend on the seeds beside it."""
        import torch

        self.step += 1
        return [torch.Generator(device=self.device).manual_seed(self.seeds[i] * 1_000_003 + self.step) for i in order]

    def _play(self) -> None:
        from trainergym.mini.stack import generate_stacked, supports

        started = time.perf_counter()
        k = self.knobs
        caps = dict(max_turns=k.max_turns, max_tokens=k.max_tokens, temperature=k.temperature, max_len=self.max_len,
                    max_new=self.max_new)
        order = sorted(self.batches)
        models = [self.models[i] for i in order]
        generators = self._generators(order)
        if len(models) > 1 or supports(models[0]):
            played = generate_stacked(models, self.tokenizer, self.family, [self.batches[i] for i in order],
                                      generators=generators, **caps)
        else:  # a model the stack does not reproduce trains alone, through transformers' forward
            played = [generate(models[0], self.tokenizer, self.family, self.batches[order[0]], generator=generators[0],
                               **caps)]
        self.batches.clear()
        seconds = time.perf_counter() - started
        for i, rollouts in zip(order, played, strict=True):
            self.played[i] = rollouts
            self.runs[i].generation_seconds += seconds  # the decoding is shared: each seed waited for all of it
            self.runs[i].rollouts += len(rollouts)


def _trainer(k: int, model, tokenizer, tasks: list[Task], reward: Reward, knobs: Knobs, seed: int, device: str,
             max_len: int, run: SeedRun, meet: _Lockstep, turns, rewarding, log):
    """Seed `k`'s `GRPOTrainer` (and the temporary folder it writes to)."""
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    dataset = Dataset.from_list([{"prompt": [{"role": "user", "content": t.prompt}], "task_index": i}
                                 for i, t in enumerate(tasks)])

    def rollout_func(prompts, trainer):
        # TRL passes prompts alone; `_Trainer` noted the step's rows, in the same order.
        played = meet.play(k, [tasks[i] for i in trainer._mini_task_indices])
        return {"prompt_ids": [r.prompt_ids for r in played], "completion_ids": [r.completion_ids for r in played],
                "logprobs": None, "env_mask": [r.env_mask for r in played],
                "messages": [r.messages for r in played]}

    def reward_func(prompts, completions, messages, task_index, **_):
        with rewarding:
            values = [float(v) for v in reward([tasks[i] for i in task_index], messages)]
        run.rewards.append(sum(values) / len(values))
        return values

    class _Trainer(GRPOTrainer):
        """GRPOTrainer that tells our rollout function which tasks the step's prompts are, and takes
        its turn for the training step: the turn is held for the loss and backward, and let go
        while the step's rollouts are made (transformers prepares them inside `training_step`,
        and they are decoded with every seed's)."""

        def _generate_and_score_completions(self, inputs):
            self._mini_task_indices = [x["task_index"] for x in inputs]
            return super()._generate_and_score_completions(inputs)

        def training_step(self, *args, **kwargs):
            with turns:
                return super().training_step(*args, **kwargs)

        def _prepare_inputs(self, inputs):
            turns.release()
            try:
                return super()._prepare_inputs(inputs)
            finally:
                turns.acquire()

    class _Log(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            if log and run.rewards:
                log(f"[mini grpo seed {seed}] step {state.global_step} reward {run.rewards[-1]:.3f}")

    opt = torch.optim.AdamW(model.parameters(), lr=knobs.lr, weight_decay=knobs.weight_decay, betas=(0.9, 0.99))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: knobs.lr_at(s) / knobs.lr)
    out = tempfile.TemporaryDirectory(prefix="mini-grpo-")
    args = GRPOConfig(
        output_dir=out.name, per_device_train_batch_size=knobs.batch_size, num_generations=knobs.group_size,
        gradient_accumulation_steps=1, num_iterations=1, max_steps=knobs.max_steps, learning_rate=knobs.lr,
        max_grad_norm=knobs.max_norm, temperature=knobs.temperature, beta=0.0, max_completion_length=max_len,
        logging_steps=10**9, save_strategy="no", report_to="none", use_cpu=device == "cpu", bf16=False,
        seed=seed, data_seed=seed, disable_tqdm=True, gradient_checkpointing=False, dataloader_num_workers=0,
        remove_unused_columns=False,
    )
    trainer = _Trainer(model=model, reward_funcs=reward_func, args=args, train_dataset=dataset,
                       processing_class=tokenizer, rollout_func=rollout_func, optimizers=(opt, sched),
                       callbacks=[_Log()])
    if log is None:  # quiet: no metrics dict printed to stdout (a command's table or JSON lives there)
        from transformers.trainer_callback import PrinterCallback

        trainer.remove_callback(PrinterCallback)
    return trainer, out
