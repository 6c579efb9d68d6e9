"""Train a trainer agent with TRL's GRPOTrainer: a Qwen model writes training jobs with our tools,
the env validates, trains and scores them, and the episode reward is the GRPO reward.

    pip install 'trainergym[trl]'          # in this repository: uv sync --extra trl
    python examples/train_trl.py --dry-run  # offline: the plan, no weights
    python examples/train_trl.py --output-dir runs/trl --lora   # pip install peft
    python examples/train_trl.py --output-dir runs/trl --vllm   # pip install vllm: generation in vLLM (colocated)

The environment is `trainergym.adapters.trl.TrainerTRLEnv` (`environment_factory`); the data
is `trainer_datasets` (every family at 64 seeds; triage is held out and is the eval set). With
the mock backend (the default) jobs are scored by a surrogate (docs/mock-backend.md), so a run
costs only the policy's GPU; `--backend local` trains the jobs on this host's GPUs.

Budget. An episode is one completion: every reply, every tool result and the job's files
(up to ~9.5 KB per reference job) must fit in `max_completion_length` (16k tokens here).
GRPOTrainer runs the rollouts' tool calls one rollout after another, and `submit_job` holds the
probe (~10 s) and then the job: with the mock, a step of 16 rollouts spends a few minutes in
the env alone.
"""

from __future__ import annotations

import argparse
import functools

DEFAULT_MODEL = "Qwen/Qwen3-1.7B"  # its chat template is Qwen3's, which TRL parses for tool calls


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output-dir", default="runs/trl")
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--family", action="append", dest="families", help="repeatable; default: every family")
    parser.add_argument("--seeds", type=int, default=64, help="training rows per family (episode seeds)")
    parser.add_argument("--backend", default="mock", help="mock (surrogate), local (this host's GPUs), runpod")
    parser.add_argument("--job-timeout", type=float, default=None, help="seconds a submitted job may take")
    parser.add_argument("--no-reward-noise", dest="reward_noise", action="store_false",
                        help="mock backend: rewards use the surrogate's expected post, without eval noise")
    parser.add_argument("--lora", action="store_true", help="train a LoRA adapter (rank 16, all linear layers; needs peft)")
    parser.add_argument("--learning-rate", type=float, default=None, help="default 1e-6, or 1e-5 with --lora")
    parser.add_argument("--num-generations", type=int, default=8, help="rollouts per prompt (the GRPO group)")
    parser.add_argument("--batch-size", type=int, default=8, help="per-device rollouts per micro-batch")
    parser.add_argument("--grad-accum", type=int, default=2)
    parser.add_argument("--max-steps", type=int, default=200)
    parser.add_argument("--max-completion-length", type=int, default=16384)
    parser.add_argument("--thinking", action="store_true", help="let Qwen3 think before each reply (more tokens)")
    parser.add_argument("--vllm", action="store_true", help="generate with vLLM, colocated on the training GPUs (needs vllm)")
    parser.add_argument("--report-to", default="none", help="e.g. wandb, trackio")
    parser.add_argument("--dry-run", action="store_true", help="print the plan and stop (offline, no weights)")
    return parser.parse_args()


def grpo_settings(args: argparse.Namespace) -> dict:
    """GRPOConfig values for this task: long multi-turn completions, a turn cap at the task's
    40 turns, reward from the env only."""
    return dict(
        output_dir=args.output_dir,
        learning_rate=args.learning_rate or (1e-5 if args.lora else 1e-6),
        lr_scheduler_type="constant_with_warmup",
        warmup_steps=5,
        num_generations=args.num_generations,
        per_device_train_batch_size=args.batch_size,
        gradient_accumulation_steps=args.grad_accum,
        max_steps=args.max_steps,
        max_completion_length=args.max_completion_length,
        max_tool_calling_iterations=40,  # the task's turn budget; the env ends the episode first
        chat_template_kwargs={"enable_thinking": args.thinking},
        temperature=1.0,
        beta=0.0,  # no reference model: the reward is the only anchor, as in DAPO/Dr. GRPO
        gradient_checkpointing=True,
        bf16=True,
        use_vllm=args.vllm,
        **({"vllm_mode": "colocate", "vllm_gpu_memory_utilization": 0.4} if args.vllm else {}),
        logging_steps=1,
        log_completions=True,
        save_steps=50,
        report_to=args.report_to,
    )


def main() -> None:
    args = parse_args()
    # Imported after argument parsing, so --help needs neither the extra nor the network.
    from trainergym.adapters.trl import TrainerTRLEnv, trainer_datasets

    train_ds, eval_ds = trainer_datasets(args.families, seeds=range(args.seeds))
    settings = grpo_settings(args)
    env_factory = functools.partial(TrainerTRLEnv, backend=args.backend, job_timeout=args.job_timeout,
                                    reward_noise=args.reward_noise, runs_dir=f"{args.output_dir}/episodes")
    per_step = args.batch_size * args.grad_accum
    print(f"model {args.model}{' + LoRA r16' if args.lora else ''}, lr {settings['learning_rate']:g}, "
          f"{args.num_generations} rollouts per prompt, {per_step} rollouts ({per_step // args.num_generations} "
          f"prompts) per step, {args.max_steps} steps, up to {args.max_completion_length} tokens per episode")
    print(f"train: {len(train_ds)} rows over {', '.join(sorted(set(train_ds['family'])))}; "
          f"eval (held out): {', '.join(sorted(set(eval_ds['family']))) if eval_ds else 'nothing'}; backend {args.backend}")
    from trl import GRPOConfig, GRPOTrainer

    if args.dry_run:  # validate the settings; without a GPU, as a CPU config (bf16 needs the GPU)
        import torch

        cpu = {} if torch.cuda.is_available() else {"use_cpu": True, "bf16": False}
        config = GRPOConfig(**{**settings, **cpu})
        print(f"GRPOConfig valid: generation batch {config.generation_batch_size}, "
              f"{config.steps_per_generation} optimizer micro-steps per generation")
        return

    peft_config = None
    if args.lora:
        try:
            from peft import LoraConfig
        except ImportError:
            raise SystemExit("--lora needs peft (not part of the trl extra): pip install peft") from None

        peft_config = LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, target_modules="all-linear", task_type="CAUSAL_LM")
    trainer = GRPOTrainer(
        model=args.model,
        args=GRPOConfig(**settings),
        train_dataset=train_ds,
        eval_dataset=eval_ds,  # evaluated only if you set eval_strategy
        environment_factory=env_factory,
        peft_config=peft_config,
    )
    trainer.train()
    trainer.save_model(args.output_dir)


if __name__ == "__main__":
    main()
