"""Episode latency on the mock backend, beside the bare `import verifiers.v1` it contains.

    uv run python bench/episode.py [--episodes 5]

Prints reset p50, file-tool step p50, the first submit_job of a process (which starts the
warm sandbox worker and so pays the verifiers import once), warm submit_job p50 and full
reference episode p50, and the ratio of the full episode to a bare
`python -c "import verifiers.v1"` measured in the same run.
Targets (issue 2): reset <= 20 ms, file tool <= 2 ms, full episode <= 1.5x the bare import.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time

from trainergym import AsyncTrainerEnv
from trainergym.agents import make_agent
from trainergym.agents.reference import reference_job_files


def p50(xs: list[float]) -> float:
    return statistics.median(xs)


def bare_import(n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import verifiers.v1"], check=True)
        out.append(time.perf_counter() - t)
    return out


async def measure(episodes: int) -> dict[str, list[float]]:
    env = AsyncTrainerEnv()
    resets, files, submits, full = [], [], [], []
    for _ in range(30):
        t = time.perf_counter()
        await env.reset()
        resets.append(time.perf_counter() - t)
    for i in range(200):
        if i % 30 == 0:  # stay well inside the episode's turn budget
            await env.reset()
        action = ({"name": "write_file", "arguments": {"path": f"notes/{i % 20}.md", "content": "x" * 2000}} if i % 2
                  else {"name": "read_file", "arguments": {"path": "INSTRUCTIONS.md"}})
        t = time.perf_counter()
        obs, _, terminated, truncated, info = await env.step(action)
        files.append(time.perf_counter() - t)
        assert info["ok"] and not (terminated or truncated), obs
    job = reference_job_files("calc_chain")
    for _ in range(episodes + 1):  # the first submit of a process also starts the sandbox worker
        await env.reset()
        for path, content in job.items():
            await env.step({"name": "write_file", "arguments": {"path": path, "content": content}})
        t = time.perf_counter()
        await env.step({"name": "submit_job", "arguments": {}})
        submits.append(time.perf_counter() - t)
    agent = make_agent("reference")
    for _ in range(episodes):
        t = time.perf_counter()
        obs, info = await env.reset()
        agent.reset(obs, info)
        while True:
            obs, reward, terminated, truncated, info = await env.step(agent.act(obs, info))
            if terminated or truncated:
                break
        full.append(time.perf_counter() - t)
        assert info["reward_breakdown"]["validated"], obs
    env.close()
    return {"reset": resets, "file": files, "submit": submits, "episode": full}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=5)
    args = parser.parse_args()
    imports = bare_import(args.episodes)
    m = asyncio.run(measure(args.episodes))
    bare = p50(imports)
    print(f"bare `import verifiers.v1` p50   {bare:8.3f} s   (n={len(imports)})")
    print(f"reset p50                        {p50(m['reset']) * 1e3:8.2f} ms  (n={len(m['reset'])}, target <= 20 ms)")
    print(f"file-tool step p50               {p50(m['file']) * 1e3:8.3f} ms  (n={len(m['file'])}, target <= 2 ms)")
    print(f"first submit_job of a process    {m['submit'][0]:8.3f} s   (starts the warm sandbox worker: "
          f"{m['submit'][0] / bare:.2f}x bare import)")
    print(f"submit_job p50 (warm)            {p50(m['submit'][1:]):8.3f} s   (n={len(m['submit']) - 1})")
    print(f"full reference episode p50       {p50(m['episode']):8.3f} s   (n={len(m['episode'])})")
    print(f"episode / bare import            {p50(m['episode']) / bare:8.2f} x   (target <= 1.5x)")


if __name__ == "__main__":
    main()
