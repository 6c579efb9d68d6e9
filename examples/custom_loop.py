"""Your own loop over the Gymnasium API: a simple policy, per-episode rewards.

    uv run python examples/custom_loop.py [--episodes 6]

The policy is deliberately simple: an epsilon-greedy bandit over two fixed strategies (write the
family's reference job and submit it, or submit the untouched workspace). It learns from the
episode reward alone, which is all an RL loop gets: replace `choose`/`update` and the scripted
messages with your model's sampling and your optimiser.
"""

import argparse
import json
import random

import gymnasium as gym

import trainergym  # noqa: F401 - registers trainergym/WriteTrainingJob-v0
from trainergym.agents.reference import reference_job_files

STRATEGIES = ("write the reference job", "submit as is")


def messages(strategy: str, family: str):
    """The tool-call messages a strategy sends, one per turn (OpenAI assistant-message format)."""
    calls = [{"name": "read_file", "arguments": {"path": "INSTRUCTIONS.md"}}]
    if strategy == "write the reference job":
        calls += [{"name": "write_file", "arguments": {"path": p, "content": c}} for p, c in reference_job_files(family).items()]
    for call in calls:
        yield {"role": "assistant", "tool_calls": [{"id": "c", "type": "function",
                                                    "function": {"name": call["name"], "arguments": json.dumps(call["arguments"])}}]}
    while True:
        yield '<tool_call>{"name": "submit_job", "arguments": {}}</tool_call>'


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=6)
    parser.add_argument("--family", default="calc_chain")
    args = parser.parse_args()
    env = gym.make("trainergym/WriteTrainingJob-v0")
    rng = random.Random(0)
    value, count = {s: 0.0 for s in STRATEGIES}, {s: 0 for s in STRATEGIES}
    for episode in range(args.episodes):
        explore = rng.random() < 0.3 or episode < len(STRATEGIES)
        strategy = STRATEGIES[episode % len(STRATEGIES)] if explore else max(STRATEGIES, key=value.get)
        obs, info = env.reset(seed=episode, options={"family": args.family})
        for action in messages(strategy, args.family):
            obs, reward, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                break
        count[strategy] += 1
        value[strategy] += (reward - value[strategy]) / count[strategy]
        r = info["reward_breakdown"]
        print(f"episode {episode}: {strategy:24s} reward {reward:+.3f} (validation {r['validation']:.2f}, "
              f"job quality {r['job_quality']:.3f}) turns used {env.unwrapped.inner.episode.turns}")
    print("value estimates:", {s: round(v, 3) for s, v in value.items()})
    env.close()


if __name__ == "__main__":
    main()
