"""The hidden-eval scorer: one model, one family, one items file -> {"score", "n"}.

Runs on the GPU host after training, from its own install (trainergym and the families; never
prime-rl's environment, which holds the job's package), isolated from the environment and the
working directory, its bytecode cache inside that install:

    <scorer>/bin/python -I -X pycache_prefix=<scorer>/pycache -m trainergym.host.scorer \
        --family F --weights W --base-model M --items hidden.jsonl --out score.json --vllm <prime-rl>/.venv/bin/vllm

It first checks every family package it will import against the hashes recorded when its install
was built (`trainergym.host.scorer_install`) and refuses to score on a difference, writing
`{"refused": why}` and exiting 3. It serves `W` (a hub id for the base model, or a broadcast
directory for trained weights) with prime-rl's vLLM on loopback, loads the family's own
verifiers taskset over the items file (`items_file`), and plays each task the way verifiers'
`null` harness does: a chat loop in which the model calls the family's eval tools (the Toolset
the task declares, given the task's world) until it answers or runs out of turns. The task's own
`@vf.reward`s score the trace; the score is their mean over items. The job's code is not
involved: only the family's package and the weights are. Of a broadcast, which training wrote,
only the weights and their config are served (copied first, links refused); the tokenizer and
its chat template are always the base model's.

We play the loop in process rather than through `vf-eval` so scoring needs no network beyond
loopback (the harness's uv script fetches from PyPI) and a failed call is retried, not scored 0.
`--base-url` skips vLLM and scores whatever OpenAI-compatible server is given (tests use a fake).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import inspect
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from trainergym.host import scorer_install

SERVED_NAME = "scored"
# Qwen3 emits Hermes-style tool calls; prime-rl's inference server uses the same parser.
VLLM = ["{vllm}", "serve", "{model}", "--host", "127.0.0.1", "--port", "{port}", "--served-model-name", SERVED_NAME,
        "--enable-auto-tool-choice", "--tool-call-parser", "hermes", "--max-model-len", "{max_model_len}"]


# What a broadcast may contribute to scoring: weights and the config that shapes them, nothing
# that changes how prompts are rendered (tokenizer files, chat templates) or sampled.
WEIGHT_FILES = ("*.safetensors", "*.safetensors.index.json", "config.json", "adapter_config.json")


def trusted_weights(weights: str, dest: Path) -> str:
    """`weights` as vLLM should load it: a hub id as it is; a directory (written by training) as a
    copy in `dest` of its regular files named in `WEIGHT_FILES`, symbolic links refused."""
    path = Path(weights)
    if not path.is_dir():
        return weights
    dest.mkdir(mode=0o700, parents=True, exist_ok=True)
    for entry in sorted(path.iterdir()):
        if entry.is_symlink() or not entry.is_file() or not any(entry.match(p) for p in WEIGHT_FILES):
            continue
        with open(entry, "rb") as src, open(dest / entry.name, "wb") as out:
            while chunk := src.read(1 << 24):
                out.write(chunk)
    return str(dest)


def serve_args(weights: str, base_model: str | None) -> tuple[str, list[str]]:
    """What vLLM serves and the flags it needs, by what the weights are: a hub id (the base
    model), a LoRA adapter (prime-rl's broadcast of a LoRA run: the base model plus the adapter,
    served under our name), or full safetensors (always the base model's tokenizer and chat
    template, never one training wrote; the base model's config when the broadcast has none)."""
    path = Path(weights)
    if not path.is_dir():
        return weights, []
    if (path / "adapter_config.json").exists():
        if not base_model:
            raise ValueError(f"{weights} is a LoRA adapter: give --base-model")
        return base_model, ["--enable-lora", "--max-lora-rank", "64", "--lora-modules", f"{SERVED_NAME}={weights}",
                            "--served-model-name", "base"]
    if not base_model:
        raise ValueError(f"{weights} are trained weights: give --base-model (its tokenizer is the one scored with)")
    extra = ["--tokenizer", base_model]
    if not (path / "config.json").exists():
        extra += ["--hf-config-path", base_model]
    return weights, extra


@contextlib.contextmanager
def vllm_server(weights: str, command: list[str] = VLLM, max_model_len: int = 8192, base_model: str | None = None,
                ready_timeout: float = 900.0, log: Path | None = None, vllm: str = "vllm") -> Iterator[str]:
    """Serve `weights` under the name `scored` for the duration of the block, with the `vllm`
    executable; yields the OpenAI base URL. The whole process group is killed on exit, whatever
    happened."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    model, extra = serve_args(weights, base_model)
    argv = [a.format(model=model, port=port, max_model_len=max_model_len, vllm=vllm) for a in command] + extra
    out = open(log, "ab") if log else subprocess.DEVNULL
    proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + ready_timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the model server exited with status {proc.returncode} before serving")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the model server was not ready after {ready_timeout:.0f} s")
            try:
                if httpx.get(f"{base_url}/models", timeout=2.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(1.0)
        yield base_url
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        if log:
            out.close()


def load_tasks(family_id: str, items_file: Path) -> tuple[type, object, list]:
    """The family's taskset class, its config and tasks over `items_file` (a family's package
    is its verifiers taskset: `trainergym_calc_chain` for `calc_chain`)."""
    from verifiers.v1.utils.loaders import taskset_class, taskset_config_type

    from trainergym.task.spec import get_family

    taskset_id = get_family(family_id).__name__.partition(".")[0]
    cls = taskset_class(taskset_id)
    config = taskset_config_type(taskset_id)(id=taskset_id, items_file=str(items_file))
    return cls, config, list(cls(config))


async def _toolbox(taskset_cls, config, task) -> dict:
    """Fresh tool servers for one rollout, set up for its task: advertised name -> callable."""
    from verifiers.v1.utils.decorators import discover_decorated

    tools = {}
    for server in list(taskset_cls.toolsets(config)) + list(type(task).toolsets(task.config)):
        await server.setup()
        await server.setup_task(task.data)
        for fn in discover_decorated(server, "tool"):
            raw = getattr(fn, "tool_name", None) or fn.__name__
            tools[f"{server.server_name}_{raw}" if server.server_name else raw] = fn
    return tools


async def _call_tool(tools: dict, name: str, arguments: str) -> str:
    if name not in tools:
        return f"error: unknown tool {name!r}"
    try:
        kwargs = json.loads(arguments or "{}")
        result = tools[name](**kwargs)
        if inspect.isawaitable(result):
            result = await result
        return str(result)
    except Exception as e:  # noqa: BLE001 - the model sees the error, as under the null harness
        return f"error: {type(e).__name__}: {e}"


def _trace(vf, task, messages: list):
    """The rollout as a verifiers Trace (a chain of message nodes), for the task's rewards."""
    from verifiers.v1.graph import MessageNode

    nodes = [MessageNode(parent=i - 1 if i else None, message=m, sampled=isinstance(m, vf.AssistantMessage))
             for i, m in enumerate(messages)]
    return vf.Trace(task=vf.TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash),
                    agent=vf.AgentInfo(config=vf.AgentConfig(), name="trainergym-scorer", trainable=False), nodes=nodes)


async def play(client, model: str, taskset_cls, config, task, tool_specs: list[dict], max_turns: int,
               max_tokens: int, temperature: float) -> float:
    """One rollout of `task`, scored by the task's own rewards (0.0 if they record an error)."""
    import verifiers.v1 as vf

    tools = await _toolbox(taskset_cls, config, task)
    messages: list = ([vf.SystemMessage(content=task.data.system_prompt)] if task.data.system_prompt else [])
    messages.append(vf.UserMessage(content=task.data.prompt_text))
    wire: list[dict] = [m.model_dump(exclude_none=True) for m in messages]
    for _ in range(max_turns):
        response = await client.chat.completions.create(model=model, messages=wire, tools=tool_specs or None,
                                                        max_tokens=max_tokens, temperature=temperature)
        msg = response.choices[0].message
        calls = [vf.ToolCall(id=c.id, name=c.function.name, arguments=c.function.arguments or "{}")
                 for c in msg.tool_calls or []]
        messages.append(vf.AssistantMessage(content=msg.content or "", tool_calls=calls or None))
        wire.append({"role": "assistant", "content": msg.content or "",
                     **({"tool_calls": [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                                        for c in calls]} if calls else {})})
        if not calls:
            break
        for c in calls:
            result = await _call_tool(tools, c.name, c.arguments)
            messages.append(vf.ToolMessage(tool_call_id=c.id, content=result, name=c.name))
            wire.append({"role": "tool", "tool_call_id": c.id, "content": result})
    trace = _trace(vf, task, messages)
    await task.score(trace)
    value = trace.reward if trace.rewards and not trace.errors else 0.0
    return float(value or 0.0)


async def score(family_id: str, items_file: Path, base_url: str, model: str = SERVED_NAME, concurrency: int = 32,
                max_turns: int = 16, max_tokens: int = 1024, temperature: float = 0.0, timeout: float = 300.0,
                verified: dict[str, list[str]] | None = None) -> dict:
    """Mean reward of the model at `base_url` over the items; every item is played once. With
    `verified` (what `scorer_install.verify` returned), the family's modules must have been
    imported from there (`scorer_install.Untrusted` otherwise)."""
    from openai import AsyncOpenAI

    from trainergym.task.spec import get_family

    taskset_cls, config, tasks = load_tasks(family_id, items_file)
    if verified is not None:
        scorer_install.check_loaded(verified)
    tool_specs = get_family(family_id).EVAL_TOOLS
    client = AsyncOpenAI(base_url=base_url, api_key=os.environ.get("TRAINERGYM_SCORER_API_KEY", "EMPTY"),
                         timeout=timeout, max_retries=5)
    gate = asyncio.Semaphore(concurrency)

    async def one(task) -> float:
        async with gate:
            return await play(client, model, taskset_cls, config, task, tool_specs, max_turns, max_tokens, temperature)

    try:
        rewards = await asyncio.gather(*(one(t) for t in tasks))
    finally:
        await client.close()
    return {"score": sum(rewards) / len(rewards) if rewards else 0.0, "n": len(rewards)}


def main(argv: list[str] | None = None) -> int:
    """The command line (`python -m trainergym.host.scorer`): score the items, write `{score, n}` to
    `--out` (atomically) and print it. Returns the exit status."""
    p = argparse.ArgumentParser(prog="python -m trainergym.host.scorer", description=__doc__.split("\n\n")[0])
    p.add_argument("--family", required=True)
    p.add_argument("--weights", required=True, help="hub id or weights directory to serve")
    p.add_argument("--items", required=True, type=Path, help="JSONL item rows (the hidden eval)")
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--base-model", help="the base model (a LoRA adapter's base; tokenizer and config for bare weights)")
    p.add_argument("--base-url", help="score this OpenAI-compatible server instead of starting vLLM")
    p.add_argument("--model", default=None, help="model name at --base-url (default: the weights)")
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--max-turns", type=int, default=16)
    p.add_argument("--max-tokens", type=int, default=1024)
    p.add_argument("--vllm", default="vllm", help="the vllm executable (prime-rl's, on a GPU host)")
    p.add_argument("--record", type=Path, default=None,
                   help=f"the install's package hashes (default: {scorer_install.RECORD_NAME} in this venv)")
    args = p.parse_args(argv)

    def write(result: dict) -> None:
        tmp = args.out.with_suffix(".tmp")
        tmp.write_text(json.dumps(result))
        tmp.replace(args.out)
        print(json.dumps(result))

    def run(base_url: str, model: str) -> dict:
        return asyncio.run(score(args.family, args.items, base_url, model, args.concurrency, args.max_turns,
                                 args.max_tokens, verified=verified))

    try:
        verified = scorer_install.verify(args.record)  # before anything imports a family
        if args.base_url:
            result = run(args.base_url, args.model or args.weights)
        else:
            weights = trusted_weights(args.weights, args.out.parent / f"{args.out.stem}-weights")
            with vllm_server(weights, base_model=args.base_model, log=args.out.with_suffix(".vllm.log"),
                             vllm=args.vllm) as url:
                result = run(url, SERVED_NAME)
    except scorer_install.Untrusted as e:
        write({"refused": str(e)})
        return 3
    write(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
