"""The OpenEnv server's overhead per turn: a cheap tool call (list_files) through the server vs
the same call on `AsyncTrainerEnv.step` in process.

    uv run python bench/openenv.py [--steps 500] [--warmup 50]

Needs the `openenv` extra. The server runs as its own process (`python -m
trainergym.adapters.openenv`, the container's entrypoint) on 127.0.0.1, so client and server do
not share a GIL; the client is OpenEnv's `GenericEnvClient` over the WebSocket session (`/ws`,
what training libraries use). One episode per path, on a copy of calc_chain with turns enough
for every step. Also timed: a direct `TrainerEnvironment.step_async` (the adapter's own layer,
no network) and OpenEnv's stateless HTTP `POST /step` (a fresh env per request, so no episode:
it answers "call reset() first", which is the round trip without the tool). Prints per-step
p50/mean/p95 in ms for each path, the server's overhead (WebSocket p50 minus direct p50) against
the 5 ms target, and the ratio, all from the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

# Run as `python bench/openenv.py`, this file's directory leads sys.path and its name would
# shadow the `openenv` package: drop the directory.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

CALL = {"name": "list_files", "arguments": {}}


def _task_spec() -> dict:
    from trainergym.task.spec import load_task

    return load_task("calc_chain").model_copy(update={"max_turns": 1_000_000}).model_dump(mode="json")


def _summary(seconds: list[float]) -> dict:
    ms = sorted(s * 1000 for s in seconds)
    return {"p50": statistics.median(ms), "mean": statistics.fmean(ms), "p95": ms[int(0.95 * (len(ms) - 1))]}


async def direct(steps: int, warmup: int) -> list[float]:
    from trainergym.env.core import AsyncTrainerEnv
    from trainergym.task.spec import TaskSpec

    env = AsyncTrainerEnv()
    await env.reset(seed=0, options={"task": TaskSpec.model_validate(_task_spec())})
    times = []
    for i in range(warmup + steps):
        t0 = time.perf_counter()
        await env.step(CALL)
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    env.close()
    return times


async def adapter(steps: int, warmup: int) -> list[float]:
    from trainergym.adapters.openenv import TrainerAction, TrainerEnvironment

    env = TrainerEnvironment()
    await env.reset_async(seed=0, task=_task_spec())
    times = []
    for i in range(warmup + steps):
        t0 = time.perf_counter()
        await env.step_async(TrainerAction.model_validate(CALL))
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    env.close()
    return times


async def websocket(base: str, steps: int, warmup: int) -> list[float]:
    from openenv import GenericEnvClient

    times = []
    async with GenericEnvClient(base_url=base) as env:
        await env.reset(seed=0, task=_task_spec())
        for i in range(warmup + steps):
            t0 = time.perf_counter()
            result = await env.step(CALL)
            if i >= warmup:
                times.append(time.perf_counter() - t0)
        assert result.observation["info"]["ok"], result.observation["text"]
    return times


def http_stateless(base: str, steps: int, warmup: int) -> list[float]:
    import httpx

    times = []
    with httpx.Client(base_url=base) as http:
        for i in range(warmup + steps):
            t0 = time.perf_counter()
            http.post("/step", json={"action": CALL}).raise_for_status()
            if i >= warmup:
                times.append(time.perf_counter() - t0)
    return times


def start_server() -> tuple[subprocess.Popen, str]:
    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "trainergym.adapters.openenv", "--host", "127.0.0.1",
                             "--port", str(port), "--log-level", "warning"], env=os.environ.copy())
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                return proc, base
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("the server did not answer /health within 60 s")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=50)
    args = parser.parse_args()
    proc, base = start_server()
    try:
        rows = {
            "direct AsyncTrainerEnv.step": _summary(asyncio.run(direct(args.steps, args.warmup))),
            "TrainerEnvironment.step_async (no network)": _summary(asyncio.run(adapter(args.steps, args.warmup))),
            "OpenEnv WebSocket /ws step (GenericEnvClient)": _summary(asyncio.run(websocket(base, args.steps, args.warmup))),
            "OpenEnv HTTP POST /step (stateless, fresh env)": _summary(http_stateless(base, args.steps, args.warmup)),
        }
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    print(f"{args.steps} steps per path (after {args.warmup} warm-up), cheap tool call list_files, {os.cpu_count()} cores")
    print(f"{'path':48s} {'p50 ms':>8s} {'mean ms':>8s} {'p95 ms':>8s}")
    for name, row in rows.items():
        print(f"{name:48s} {row['p50']:8.3f} {row['mean']:8.3f} {row['p95']:8.3f}")
    ws, base_row = rows["OpenEnv WebSocket /ws step (GenericEnvClient)"], rows["direct AsyncTrainerEnv.step"]
    overhead = ws["p50"] - base_row["p50"]
    print(f"server overhead per step (WebSocket p50 - direct p50): {overhead:.3f} ms "
          f"(target <= 5 ms: {'met' if overhead <= 5 else 'MISSED'}); mean {ws['mean'] - base_row['mean']:.3f} ms")
    print(f"ratio WebSocket / direct: p50 {ws['p50'] / base_row['p50']:.1f}x, mean {ws['mean'] / base_row['mean']:.1f}x")


if __name__ == "__main__":
    main()
