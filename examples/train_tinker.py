"""Train a trainer agent with Tinker: Qwen3.6-35B-A3B writes training jobs, the env trains and
scores them, the episode reward trains the agent (tinker-cookbook's asynchronous RL loop).

    uv sync --extra tinker
    uv run python examples/train_tinker.py --log-path runs/tinker --dry-run   # offline: the plan
    TINKER_API_KEY=... uv run python examples/train_tinker.py --log-path runs/tinker

The defaults are the original run's (`trainergym.adapters.tinker.train_config`): LoRA rank 8,
learning rate 4e-5, groups of 8 episodes, 5 groups (about 40 jobs) per step, at most 2 steps
off policy. With the mock backend the jobs are scored by a surrogate (docs/mock-backend.md), so
a run costs only Tinker time; `--backend local` trains them on this host's GPUs.
"""

import argparse
import asyncio

from tinker_cookbook.rl import train

from trainergym.adapters.tinker import train_config


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--log-path", required=True)
    parser.add_argument("--family", action="append", dest="families", help="repeatable; default: every family")
    parser.add_argument("--backend", default="mock")
    parser.add_argument("--max-steps", type=int, default=None)
    parser.add_argument("--dry-run", action="store_true", help="print the plan and stop (no key, no network)")
    args = parser.parse_args()

    config = train_config(args.log_path, families=args.families, backend=args.backend, max_steps=args.max_steps)
    data = config.dataset_builder
    train_tasks, test_tasks = data.tasks()
    print(f"model {config.model_name} (renderer {config.renderer_name}), LoRA rank {config.lora_rank}, "
          f"lr {config.learning_rate:g}, max {config.max_tokens} tokens per turn")
    print(f"each step: {config.async_config.groups_per_batch} groups x {data.group_size} episodes, "
          f"at most {config.async_config.max_steps_off_policy} steps off policy, loss {config.training_loss_fn()}")
    print(f"train on: {', '.join(sorted({family for _, family in train_tasks}))}; "
          f"test on (held out): {', '.join(sorted({family for _, family in test_tasks})) or 'nothing'}")
    if args.dry_run:
        return
    asyncio.run(train.main(config))


if __name__ == "__main__":
    main()
