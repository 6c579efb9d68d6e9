"""The half of the validation probe that touches agent-written code: it answers, it never judges.

Run as a script inside the sandbox (`trainergym.probe.sandbox` copies it into the job spool as
`main.py`, so the library's own source stays out of reach), never imported by the library:

    python -I main.py --serve LIMITS_JSON

It imports verifiers once, prints `ready`, then serves one *session* per job: for the first
request line on stdin its zygote (`_Zygote`, which never sees a session's data) forks a fresh
child that copies the job package into its private /tmp and imports it, and the worker relays a
conversation between the library and that child, one JSON line each way, until the library says `done` or the session's deadline passes:

- `load`  -> the job's tasks as data (`prompt`, `system_prompt`, `answer`, `world`), capped, and
             the names of its tools;
- `score` -> one reward per rollout given (on one of the tasks given, each a job task with
             data put in its place; tool calls and their results; a final reply), in order;
- `tools` -> the job's tools' answers to given calls on given task data, in order;
- `config` -> whether prime-rl's own config classes accept the rendered rl.toml given (they
             import the job's taskset by its id, so this runs where the job is importable).

It runs on whichever verifiers the worker's interpreter has (prime-rl's vendored a60a606 or
the library's 0.4.0), so it uses only the v1 API both share.

Everything the child says is data that the library type-checks and judges itself (`trainergym.probe.checks`):
the requests carry no labels, so agent code that takes over this process can only answer
the way some reward function would. After each session the worker kills every process the
child left behind. This file imports nothing from trainergym.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import inspect
import io
import itertools
import json
import math
import os
import resource
import select
import shutil
import signal
import sys
import time
import traceback

MAX_PROMPT_CHARS = 16_000  # longer prompts are cut here and flagged; the library refuses them
MAX_WORLD_CHARS = 64_000
MAX_ANSWER_LINE = 256 << 20  # bytes of one answer line the worker relays
ANSWER, END = "A ", "E "  # how the worker marks the child's answers and its own end line


def _loaded_line(answer: dict) -> str:
    """The load answer as JSON text, its task rows (JSON text already: each world is serialised
    once, to measure it) spliced in as they are."""
    rows = answer.pop("tasks")
    return json.dumps(answer, default=str)[:-1] + ', "tasks": [' + ", ".join(rows) + "]}"


ERROR_CHARS = 1000  # what the job's author is told of an error: enough to fix it, no use for reading files


def _short_error(exc: BaseException, package_dir: str, module: str = "") -> str:
    """What broke, for the job's author: the frames in the job's own files (shown as the agent
    knows them, `taskset/...`), then the exception's type and message, capped. Frames elsewhere
    (verifiers, the standard library) are left out: their paths and source lines are the host's."""
    own = package_dir.rstrip("/") + "/"
    lines = []
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename.startswith(own):
            rel = frame.filename[len(own):]
            if module and rel.startswith(module + "/"):
                rel = "taskset/" + rel[len(module) + 1:]
            lines.append(f"  {rel}:{frame.lineno} in {frame.name}: {(frame.line or '').strip()[:120]}")
    message = str(exc).replace(own, "")
    last = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    head = "\n".join(lines[-6:])
    room = max(200, ERROR_CHARS - len(head) - 1)
    if len(last) > room:
        last = last[:room - 20] + " ... (cut)"
    return ((head + "\n") if head else "") + last


class Job:
    """The imported job: its taskset class, config and loaded tasks."""

    def __init__(self, package_dir: str, module: str):
        from verifiers.v1.utils.loaders import taskset_class, taskset_config_type

        sys.path.insert(0, package_dir)
        self.package_dir, self.module = package_dir, module
        self.cls = taskset_class(module)
        self.config = taskset_config_type(module)(id=module)
        self.taskset = self.cls(self.config)
        self.tasks: list = []
        self._specs: dict = {}

    def load(self, cap: int) -> dict:
        """Up to `cap` tasks as data; `more` says whether the taskset yielded more."""
        declared_infinite = bool(getattr(self.taskset, "INFINITE", False))  # `bounded` is 0.4.0-only
        tasks = list(itertools.islice(iter(self.taskset), cap + 1))
        self.tasks = tasks[:cap]
        rows = []
        for t in self.tasks:
            d = t.data
            world = getattr(d, "world", None)
            world_text = json.dumps(world, default=str) if world is not None else ""
            rows.append(json.dumps({
                "prompt": (d.prompt_text or "")[:MAX_PROMPT_CHARS + 1],
                "system_prompt": (d.system_prompt or "")[:MAX_PROMPT_CHARS + 1],
                "answer": str(getattr(d, "answer", "") or "")[:2001],
                "world_chars": len(world_text),
            }, default=str)[:-1] + ', "world": ' + (world_text if world is not None and len(world_text) <= MAX_WORLD_CHARS else "null")
                + "}")  # the world as serialised above, not again
        fields = type(self.tasks[0].data).model_fields if self.tasks else {}
        return {"declared_infinite": declared_infinite, "more": len(tasks) > cap, "tasks": rows,
                "answer_field": "answer" in fields, "world_field": "world" in fields}

    def task(self, base: int, data: dict):
        """Job task `base` with `data` (prompt, answer, world) put in its place."""
        task = self.tasks[base]
        update = {k: v for k, v in data.items() if k != "world" or "world" in type(task.data).model_fields}
        clone = copy.copy(task)
        clone.data = task.data.model_copy(update=update)
        return clone

    def toolsets(self, task) -> list:
        """The toolsets the job gives `task`: its taskset's, then the task type's."""
        return list(self.cls.toolsets(self.config)) + list(type(task).toolsets(task.config))

    async def tool_specs(self, task) -> list:
        """The tools as training offers them to the model, for `trace.tools`: verifiers' harness
        lists each server's tools over MCP (`<server>_<tool>`, the description, the input schema
        FastMCP derives), so they are listed here by the same registration. Once per task type."""
        specs = self._specs.get(type(task))
        if specs is None:
            from verifiers.v1.types import Tool

            try:
                from mcp.server.fastmcp import FastMCP as Server  # verifiers a60a606's mcp
            except ImportError:
                from mcp.server.mcpserver import MCPServer as Server  # 0.4.0's
            specs = []
            for server in self.toolsets(task):
                mcp = Server("tools")
                server.register(mcp)
                for t in await mcp.list_tools():
                    name = f"{server.server_name}_{t.name}" if server.server_name else t.name
                    schema = getattr(t, "inputSchema", None) or getattr(t, "input_schema", None) or {}
                    specs.append(Tool(name=name, description=t.description or "", parameters=schema))
            self._specs[type(task)] = specs
        return specs

    def tool_names(self) -> list[dict]:
        """The tools the job advertises (for its first task), with their parameter names."""
        return [{"name": name, "params": [p for p in inspect.signature(fn).parameters if p != "self"]}
                for name, fn in _advertised(self.toolsets(self.tasks[0])).items()]

    async def tool_results(self, base: int, data: dict, calls: list[dict], timeout: float) -> list[str]:
        """Run `calls` in order on fresh tool servers set up for the task (stateful tools keep state)."""
        task = self.task(base, data)
        servers = self.toolsets(task)
        for server in servers:
            await asyncio.wait_for(server.setup(), timeout)
            await asyncio.wait_for(server.setup_task(task.data), timeout)
        tools = _advertised(servers)
        out = []
        for call in calls:
            fn = tools.get(call["tool"])
            if fn is None:
                out.append(f"error: unknown tool {call['tool']!r}")
                continue
            try:
                result = fn(**call["arguments"])
                if inspect.isawaitable(result):
                    result = await asyncio.wait_for(result, timeout)
                out.append(str(result)[:4000])
            except Exception as e:  # noqa: BLE001 - an error is an answer too
                out.append(f"error: {type(e).__name__}: {e}"[:500])
        return out


def _advertised(servers: list) -> dict:
    """The servers' tools by the name the model sees (`<server>_<tool>`), as verifiers names them."""
    from verifiers.v1.utils.decorators import discover_decorated

    tools = {}
    for server in servers:
        for fn in discover_decorated(server, "tool"):
            raw = getattr(fn, "tool_name", None) or fn.__name__
            tools[f"{server.server_name}_{raw}" if server.server_name else raw] = fn
    return tools


def _trace(vf, task, calls: list[dict], reply: str | None, about=None, agent=None, model: str | None = None,
           tools: list | None = None, knobs: dict | None = None):
    """A finished rollout for `task`: the prompt, the given tool calls and results, then a
    final assistant reply (None: an untouched trace with no model turn at all). `about` (the
    task's `vf.TraceTask`) and `agent` (`vf.AgentInfo`) may be given, made once for many.

    Shaped as a training rollout's trace is when its rewards run: one model call recorded per
    sampled turn (the policy `model`, its sampling `knobs`, token usage, the time it took; call
    ids as vLLM writes them), the task's own State type, the tools the model was
    offered (`tools`, from `Job.tool_specs`), the agent's phase timed, and the agent stamped as
    training stamps it (`_agent`, with a subprocess runtime's record), so a reward cannot tell this
    trace from training's by an empty `calls` or `tools`, a zero timing, a bare State or an
    untrainable agent. What still differs: docs/design.md, "What a reward sees, as in training"."""
    from verifiers.v1.graph import MessageNode
    from verifiers.v1.state import state_cls
    from verifiers.v1.trace import ModelCall, TimeSpan
    from verifiers.v1.types import SamplingConfig, Usage

    nodes, made = [], []
    now = time.time()
    turns = 2 * len(calls) + 2
    seen = 0  # characters of context before each call
    sampling = SamplingConfig.model_construct(**knobs) if knobs else None

    def add(message, sampled: bool = False, finish=None) -> None:
        nonlocal seen
        text = str(getattr(message, "content", "") or "") + "".join(
            tc.name + tc.arguments for tc in (getattr(message, "tool_calls", None) or []))
        at = now - 0.05 * (turns - len(nodes))  # a turn's node when it was committed, as a rollout's
        nodes.append(MessageNode(parent=len(nodes) - 1 if nodes else None, message=message, sampled=sampled,
                                 timestamp=at))
        if sampled:
            # model_construct: these values are ours and well-typed; validating each costs the warm probe ~10%
            made.append(ModelCall.model_construct(
                node=len(nodes) - 1, model=model, sampling=sampling, endpoint="/chat/completions", finish_reason=finish,
                usage=Usage.model_construct(prompt_tokens=1 + seen // 4, completion_tokens=1 + len(text) // 4),
                time=TimeSpan.model_construct(start=at - 0.02 - len(text) / 4000, end=at)))
        seen += len(text) + 16

    if task.data.system_prompt:
        add(vf.SystemMessage(content=task.data.system_prompt))
    add(vf.UserMessage(content=task.data.prompt_text))
    if reply is not None:
        for call in calls:
            # vLLM's hermes parser names calls `chatcmpl-tool-<hex>`
            tc = vf.ToolCall(id=f"chatcmpl-tool-{os.urandom(16).hex()}", name=call["tool"],
                             arguments=json.dumps(call["arguments"]))
            add(vf.AssistantMessage(content=call.get("said", ""), tool_calls=[tc]), sampled=True, finish="tool_calls")
            add(vf.ToolMessage(tool_call_id=tc.id, content=call["result"], name=call["tool"]))
        add(vf.AssistantMessage(content=reply), sampled=True, finish="stop")
    trace = vf.Trace(task=_about(vf, task) if about is None else about, agent=_agent(vf, model) if agent is None else agent,
                     nodes=nodes, calls=made, tools=list(tools or []), state=state_cls(type(task))())
    began = made[0].time.start if made else now
    timing = trace.timing
    timing.start = began - 0.9
    timing.boot.start, timing.boot.end = began - 0.9, began - 0.5
    timing.setup.start, timing.setup.end = began - 0.5, began - 0.01
    timing.agent.start, timing.agent.end = began, now
    timing.finalize.start, timing.finalize.end = now, now + 0.002
    timing.scoring.start = now + 0.002
    return trace


def _about(vf, task):
    """The task as a trace records it."""
    return vf.TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash)


def _agent(vf, model: str | None = None):
    """The agent as training stamps a rollout's trace: verifiers' single-agent env names it
    `agent` and it trains the policy (`trainable`); its config names the policy's model."""
    try:  # the rendered rl.toml runs each rollout in a subprocess runtime, which records its workdir
        from verifiers.v1.runtimes.subprocess import SubprocessRuntimeInfo

        runtime = SubprocessRuntimeInfo(id=os.path.join(os.path.expanduser("~/.cache/verifiers/runtimes/subprocess"),
                                                        os.urandom(6).hex()))
    except (ImportError, TypeError, ValueError):
        runtime = None
    return vf.AgentInfo(config=vf.AgentConfig(model=model), runtime=runtime, name="agent", trainable=True)


async def _reward(vf, task, calls, reply, timeout: float, about=None, agent=None, model: str | None = None,
                  tools: list | None = None, knobs: dict | None = None) -> tuple[float | None, str | None]:
    trace = _trace(vf, task, calls, reply, about, agent, model, tools, knobs)
    try:
        await asyncio.wait_for(task.score(trace), timeout)
    except Exception as e:  # noqa: BLE001 - a raising reward is a finding, not a crash
        return None, f"{type(e).__name__}: {e}"[:500]
    if trace.errors:
        return None, trace.errors[-1].model_dump_json()[:500]
    if not trace.rewards:
        return None, "the task declares no @vf.reward"
    value = trace.reward
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None, f"reward is not a finite number: {value!r}"[:500]
    return float(value), None


# Task methods verifiers calls only inside a rollout (or with its runtime), or that decide what
# scoring runs: a job that overrides one can act in training where the probe never looks.
ROLLOUT_HOOKS = ("setup", "finalize", "runtime_env", "score", "hooks", "plugged_judges", "__getattribute__",
                 "__getattr__")


def _rollout_only(task) -> list[str]:
    """What of `task` runs only inside a training rollout, so that what it does there goes
    unseen here: rewards, metrics and judges taking a `runtime` parameter (verifiers hands them
    the rollout's runtime in training and skips them, or hands them nothing, where no rollout
    runs; a metric runs before the rewards and can mark the trace for them), `@vf.stop` and
    `@vf.intercept` hooks (asked only around live model calls), and overrides of the Task methods
    a rollout calls around scoring (`ROLLOUT_HOOKS`). Replaced verifiers internals: `_patched`."""
    from verifiers.v1.utils.decorators import discover_decorated

    def takes(fn) -> bool:
        try:
            return "runtime" in inspect.signature(fn).parameters
        except (TypeError, ValueError):
            return False
    names = [getattr(fn, "__name__", "?") for kind in ("reward", "metric") for fn in task.hooks(kind) if takes(fn)]
    names += [str(getattr(j, "reward_name", "judge")) for j in task.plugged_judges() if takes(j.score)]
    names += [f"@{kind} {getattr(fn, '__name__', '?')}" for kind in ("stop", "intercept")
              for fn in discover_decorated(task, kind)]
    for hook in ROLLOUT_HOOKS:
        owner = next((c for c in type(task).__mro__ if hook in vars(c)), None)
        if hook in getattr(task, "__dict__", {}) or owner is not None and owner is not object and \
                not owner.__module__.startswith("verifiers."):
            names.append(f"{type(task).__name__}.{hook}")
    return names


# verifiers' own classes and module functions as the worker imported them, before any job ran:
# a job that replaces one (`vf.Task.score`, `Rollout.close`, `Harness.score`) replaces it in
# training's process too, where the rollout calls it.
_PRISTINE: dict[str, tuple] = {}


def _members(module) -> dict[str, object]:
    """A module's functions and its classes' methods (not data: pydantic rebuilds its own)."""
    code = (staticmethod, classmethod, property)
    out = {}
    for name, value in list(vars(module).items()):
        if isinstance(value, type) and value.__module__ == module.__name__:
            out.update({f"{name}.{k}": v for k, v in list(vars(value).items())
                        if inspect.isfunction(v) or isinstance(v, code)})
        elif inspect.isfunction(value) and value.__module__ == module.__name__:
            out[name] = value
    return out


# What a training rollout runs through (single-agent env, null harness, subprocess runtime),
# imported before the snapshot so a job cannot be first to import (and patch) it.
ROLLOUT_MODULES = ("verifiers.v1.rollout", "verifiers.v1.harness", "verifiers.v1.agent", "verifiers.v1.session",
                   "verifiers.v1.graph", "verifiers.v1.env", "verifiers.v1.task", "verifiers.v1.trace",
                   "verifiers.v1.envs.single_agent", "verifiers.v1.runtimes.subprocess", "verifiers.v1.harnesses.null")


def _remember_pristine() -> None:
    for name in ROLLOUT_MODULES:
        with contextlib.suppress(ImportError):
            __import__(name)
    for name, module in list(sys.modules.items()):
        if name.startswith("verifiers.") and module is not None:
            _PRISTINE[name] = (module, _members(module))


def _patched() -> list[str]:
    """verifiers' members that are no longer what the worker imported."""
    changed = []
    for name, (module, members) in _PRISTINE.items():
        now = _members(module)
        changed += [f"{name}.{k}" for k, v in members.items() if now.get(k) is not v]
    return changed[:20]


async def answer(job: Job, req: dict) -> dict:
    """One request of a session after `load`."""
    import verifiers.v1 as vf

    timeout = req.get("timeout", 10.0)
    if req["op"] == "score":
        rewards, errors = [], []
        tasks = [job.task(t["base"], t["data"]) for t in req["tasks"]]
        # Once per task and per request, not per rollout: what every trace of a task records of it
        # (its data, key and hash) and of the agent.
        model = req.get("model")
        abouts, agent = [_about(vf, task) for task in tasks], _agent(vf, model)
        try:
            specs = [await job.tool_specs(task) for task in tasks]
        except Exception:  # noqa: BLE001 - toolsets that fail to build are the tools check's finding
            specs = [[] for _ in tasks]
        for r in req["rollouts"]:
            value, error = await _reward(vf, tasks[r["task"]], r["calls"], r["reply"], timeout, abouts[r["task"]], agent,
                                         model, specs[r["task"]], req.get("sampling"))
            rewards.append(value)
            errors.append(error)
        rollout_only = sorted({name for task in tasks for name in _rollout_only(task)} | set(_patched()))
        return {"rewards": rewards, "errors": errors, "rollout_only": rollout_only[:50]}
    if req["op"] == "tools":
        results = []
        for r in req["items"]:
            try:
                results.append(await job.tool_results(r["base"], r["data"], r["calls"], timeout))
            except Exception as e:  # noqa: BLE001
                results.append([f"error: {type(e).__name__}: {e}"[:500]] * len(r["calls"]))
        return {"results": results}
    if req["op"] == "config":
        return check_config(req["rl_toml"])
    return {"error": f"unknown op {req['op']!r}"}


def check_config(text: str) -> dict:
    """Parse `text` as prime-rl's `rl @ rl.toml` does; its message when it refuses."""
    try:
        from prime_rl.configs.rl import RLConfig
        from pydantic_config import cli
    except ImportError:
        return {"checked": False, "error": None}
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), "rl.toml")
    with open(path, "w") as f:
        f.write(text)
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            cli(RLConfig, args=["@", path])
    except BaseException as e:  # noqa: BLE001 - a refusal is the answer (pydantic's, or the CLI's exit)
        said = out.getvalue().strip()
        message = str(e) if not isinstance(e, SystemExit) or not said else said
        return {"checked": True, "error": f"{type(e).__name__}: {message}"[-1500:]}
    return {"checked": True, "error": None}


def _session(req: dict, requests, write) -> None:
    """In the forked child: import the job, answer `load`, then every request until `done`."""
    import verifiers

    package_dir, module = req["package_dir"], req["module"]
    head = {"verifiers_version": getattr(verifiers, "__version__", None)}
    try:
        job = Job(package_dir, module)
    except BaseException as e:  # noqa: BLE001
        write({**head, "stage": "import", "error": _short_error(e, package_dir, module)})
        return
    try:
        loaded = job.load(req["max_tasks"])
    except BaseException as e:  # noqa: BLE001
        write({**head, "stage": "load", "error": _short_error(e, package_dir, module)})
        return
    if not job.tasks:
        write({**head, "stage": "load", "error": "the taskset's load() yielded no tasks"})
        return
    try:
        loaded["tools"] = job.tool_names()
    except BaseException as e:  # noqa: BLE001
        loaded["tools_error"] = _short_error(e, package_dir, module)
    write(_loaded_line({**head, "stage": "loaded", **loaded}))
    for line in requests:
        msg = json.loads(line)
        if msg.get("op") == "done":
            return
        try:
            write(asyncio.run(answer(job, msg)))
        except BaseException as e:  # noqa: BLE001 - always answer, even for SystemExit in agent code
            write({"error": _short_error(e, package_dir, module)})


def _exit_reason(status: int) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        known = {signal.SIGXCPU: "was stopped for using too much CPU time", signal.SIGXFSZ: "was stopped for writing "
                 "too large a file", signal.SIGKILL: "was killed (out of memory?)", signal.SIGSEGV: "crashed (segfault)"}
        return known.get(sig, f"was killed by signal {signal.Signals(sig).name}")
    return f"exited with status {os.WEXITSTATUS(status)}"


# Namespaces of one session (linux/sched.h), and what the job's process keeps of them.
CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID = 0x00020000, 0x08000000, 0x10000000, 0x20000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_REC, MS_PRIVATE = 0x1, 0x2, 0x4, 0x8, 0x1000, 0x4000, 0x40000
SHM_BYTES, SCRATCH_INODES = 16 << 20, 65536  # the session's /dev/shm; inodes of its /tmp and /dev/shm each
PR_CAPBSET_DROP, CAPABILITY_VERSION_3 = 24, 0x20080522


def _session_namespaces(fds: tuple[int, ...], limits: dict) -> bool:
    """Give this session namespaces of its own, inside the worker's: user (so no privilege is
    needed), IPC, PID and mount. What a job leaves in System V or POSIX IPC dies with its
    session, so it can neither fill the warm worker's memory for the next job nor speak to it; the
    job's processes cannot see or signal the worker (a stopped worker was an idle session billed to
    the infrastructure), and a fresh /proc shows them only their own (where the kernel allows a
    new one under the outer /proc). Its /tmp and /dev/shm are fresh tmpfs mounts, capped in bytes
    and inodes, gone with the session: nothing a job writes there (a tree too deep to delete, a
    full disk) outlives it; the cgroup's counters are hidden (their peaks carried one job's
    numbers to the next). This process stays outside as the parent of the session's init and
    returns in that init, with no capability left: True. False where the kernel refuses (the
    worker then wipes and checks for leftovers itself)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    uid, gid = os.geteuid(), os.getegid()
    libc.prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE: else /proc/self/uid_map is root's, and unwritable
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWIPC | CLONE_NEWPID | CLONE_NEWNS) != 0:
        return False
    for path, text in (("/proc/self/setgroups", "deny"), ("/proc/self/uid_map", f"{uid} {uid} 1"),
                       ("/proc/self/gid_map", f"{gid} {gid} 1")):
        with open(path, "w") as f:
            f.write(text)
    pid = os.fork()
    if pid:  # outside: wait for the session's init and leave as it did (the worker reads the status)
        for fd in fds:
            os.close(fd)
        while True:
            try:
                _, status = os.waitpid(pid, 0)
                break
            except ChildProcessError:
                os._exit(1)
        if os.WIFSIGNALED(status):
            with contextlib.suppress(OSError, ValueError):  # SIGKILL and SIGSTOP take no handler
                signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
            os.kill(os.getpid(), os.WTERMSIG(status))
        os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
    # The session's init. /proc for this PID namespace (best effort: a kernel may refuse it under
    # the outer one's masks, and then the old view stays, through which nothing can be signalled).
    libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None)
    libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
    for path, size in (("/tmp", limits["tmp_bytes"]), ("/dev/shm", SHM_BYTES)):
        if not _fresh_scratch(libc, path, size):
            os._exit(1)  # never run a job on the worker's own scratch space once the session is split off
    libc.mount(b"tmpfs", b"/sys/fs/cgroup", b"tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, b"size=4k")
    for cap in range(64):  # the new user namespace gave every capability: none is kept
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            break
    header = (ctypes.c_uint32 * 2)(CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()
    if libc.capset(header, data) != 0:
        os._exit(1)  # never run agent code with capabilities
    return True


def _mount_points(path: str) -> list[str]:
    """The mount points strictly below `path` in this mount namespace."""
    import re

    with open("/proc/self/mountinfo") as f:
        points = [re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), line.split()[4]) for line in f]
    return [p for p in points if p.startswith(path + "/")]


def _fresh_scratch(libc, path: str, size: int) -> bool:
    """Mount an empty tmpfs of `size` bytes on `path`, and bind back what the sandbox had mounted
    below it (its spool, and the code it re-exposes when the checkout or its venv lives there):
    a fresh scratch area that hides nothing the job needs. False if a mount fails."""
    below = _mount_points(path)
    below = [p for p in below if not any(p != q and p.startswith(q + "/") for q in below)]  # outermost
    old = os.open(path, os.O_PATH | os.O_DIRECTORY)  # the covered tree, still reachable through it
    try:
        data = f"size={size},nr_inodes={SCRATCH_INODES},mode=1777".encode()
        if libc.mount(b"tmpfs", path.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, data) != 0:
            return False
        for point in dict.fromkeys(below):
            source = f"/proc/self/fd/{old}/{point[len(path) + 1:]}"
            os.makedirs(os.path.dirname(point), exist_ok=True)
            if os.path.isdir(source):
                os.makedirs(point, exist_ok=True)
            else:
                open(point, "a").close()
            if libc.mount(source.encode(), point.encode(), None, MS_BIND | MS_REC, None) != 0:
                return False
    finally:
        os.close(old)
    return True


def _can_split(limits: dict) -> bool:
    """Whether this host lets a session take namespaces of its own (`_session_namespaces`), tried
    once in a throwaway child when the worker starts: where it cannot, every session runs in the
    worker's, which wipes and checks after each, rather than every job failing the same way."""
    pid = os.fork()
    if pid == 0:
        try:
            os._exit(0 if _session_namespaces((), limits) else 3)
        except BaseException:  # noqa: BLE001
            os._exit(4)
    _, status = os.waitpid(pid, 0)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


PR_SET_SECCOMP, SECCOMP_MODE_FILTER, PR_SET_NO_NEW_PRIVS = 22, 2, 38


def _refuse_syscalls(program_hex: str) -> None:
    """Load the seccomp filter the library compiled with libseccomp (`trainergym.probe.seccomp`)
    into this process and all it starts; raises OSError when the kernel refuses it."""
    import ctypes

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    code = bytes.fromhex(program_hex)
    buf = ctypes.create_string_buffer(code, len(code))
    prog = SockFprog(len(code) // 8, ctypes.cast(buf, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or \
            libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "the kernel refused the seccomp filter: " + os.strerror(ctypes.get_errno()))


def _can_filter(limits: dict) -> str:
    """Why this kernel will not load the seccomp filter, tried once in a throwaway child when the
    worker starts ("" when it will): a worker that cannot confine jobs as promised never says ready."""
    if not limits.get("seccomp"):
        return ""
    pid = os.fork()
    if pid == 0:
        try:
            _refuse_syscalls(limits["seccomp"])
            os._exit(0)
        except BaseException:  # noqa: BLE001
            os._exit(3)
    _, status = os.waitpid(pid, 0)
    return "" if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 else "the kernel refused the seccomp filter"


def _read_tree(top: str) -> list[tuple[str, str, bytes | str | None]]:
    """Every entry under `top` as (relative path, "dir" | "file" | "link", contents or target),
    parents first: the job's package, carried across into the session's fresh /tmp."""
    out, stack = [], [""]
    while stack:
        rel = stack.pop()
        with os.scandir(os.path.join(top, rel)) as entries:
            for e in entries:
                path = os.path.join(rel, e.name)
                if e.is_symlink():
                    out.append((path, "link", os.readlink(e.path)))
                elif e.is_dir():
                    out.append((path, "dir", None))
                    stack.append(path)
                else:
                    with open(e.path, "rb") as f:
                        out.append((path, "file", f.read()))
    return out


def _write_tree(top: str, entries: list[tuple[str, str, bytes | str | None]]) -> None:
    os.makedirs(top)
    for rel, kind, data in entries:
        path = os.path.join(top, rel)
        if kind == "dir":
            os.mkdir(path)
        elif kind == "link":
            os.symlink(data, path)
        else:
            with open(path, "wb") as f:
                f.write(data)


def _child(req: dict, limits: dict, req_fd: int, out_fd: int, log_path: str) -> None:
    """In the forked child: confine further, copy the job, run the session."""
    os.setsid()
    # Opened in the worker's /tmp, where the worker reads it: the session's own /tmp is another.
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    package = _read_tree(req["package_src"]) if limits.get("split") else None
    split = package is not None and _session_namespaces((req_fd, out_fd), limits)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    sys.stdin = open(os.devnull)  # noqa: SIM115
    sys.stdout = sys.stderr = os.fdopen(os.dup(log), "w", buffering=1)
    for what, key in ((resource.RLIMIT_CPU, "cpu_seconds"), (resource.RLIMIT_AS, "memory_bytes"),
                      (resource.RLIMIT_FSIZE, "file_bytes"), (resource.RLIMIT_NOFILE, "open_files")):
        resource.setrlimit(what, (limits[key], limits[key]))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    workdir = os.path.join(os.environ.get("TMPDIR", "/tmp"), "job-" + req["nonce"])
    if split:
        _write_tree(workdir, package)
    else:
        shutil.copytree(req["package_src"], workdir, symlinks=True)
    del package
    os.chdir(workdir)
    if limits.get("seccomp"):
        _refuse_syscalls(limits["seccomp"])  # last: the session's own namespaces and mounts are made

    def write(obj: dict) -> None:
        data = ((obj if isinstance(obj, str) else json.dumps(obj, default=str)) + "\n").encode()
        view = memoryview(data)
        while view:
            view = view[os.write(out_fd, view):]

    try:
        _session({**req, "package_dir": workdir}, os.fdopen(req_fd, "r"), write)
    except BaseException as e:  # noqa: BLE001
        write({"stage": "crash", "error": _short_error(e, workdir, req.get("module", ""))})
    os._exit(0)  # skip agent-registered atexit handlers and lingering threads


def _tail(path: str, n: int) -> str:
    """The last `n` bytes of the regular file at `path` as text; "" for anything else (a job in a
    worker without session namespaces could swap its log for a FIFO or a link to /dev/zero)."""
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return ""
    try:
        size = os.fstat(fd)
        if not stat.S_ISREG(size.st_mode):
            return ""
        os.lseek(fd, max(0, size.st_size - n), os.SEEK_SET)
        return os.read(fd, n).decode(errors="replace")
    finally:
        os.close(fd)


def _zombie(pid: str) -> bool:
    """Whether the process has exited and only waits to be reaped (by the namespace's init: a
    session's processes die with its own init, and may not be reaped yet)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
    except (OSError, IndexError):
        return True


def _settled(zygote: int, seconds: float = 2.0) -> bool:
    """Whether every process of the worker's namespace but it, its zygote and init is gone within
    `seconds`: a session's processes are killed with its own init, by the kernel, a moment after it."""
    me, deadline = os.getpid(), time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not any(e.isdigit() and int(e) not in (1, me, zygote) and not _zombie(e) for e in os.listdir("/proc")):
            return True
        time.sleep(0.01)
    return False


def _sweep(zygote: int) -> int:
    """Kill every process in this PID namespace but the worker, its zygote and the namespace's
    init, and return how many there were. Stopped first, pass after pass until a pass finds no
    new one (a stopped process cannot fork: chains that keep forking do not outrun it), then killed."""
    me, stopped = os.getpid(), set()
    for _ in range(1000):
        found = {int(e) for e in os.listdir("/proc") if e.isdigit() and not _zombie(e)} - {1, me, zygote} - stopped
        if not found:
            break
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGSTOP)
        stopped |= found
    for pid in stopped:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return len(stopped)


def _wipe() -> list[str]:
    """Empty the scratch areas a job could leave files in for the next one, and return what is
    left in them or in this worker's System V IPC: any of it, and the worker is replaced."""

    def unlock(top: str) -> None:  # directories the job made unreadable or unwritable (mode 000, 0300)
        stack = [top]
        while stack:
            path = stack.pop()
            with contextlib.suppress(OSError):
                os.chmod(path, 0o700)
                with os.scandir(path) as entries:
                    stack.extend(e.path for e in entries if e.is_dir(follow_symlinks=False))

    def clear(directory: str, mounts: list[str]) -> None:
        for entry in os.listdir(directory):
            path = os.path.join(directory, entry)
            if path in mounts:  # the sandbox's own (its spool, code it re-exposes under /tmp)
                continue
            if any(m.startswith(path + "/") for m in mounts):  # holds such a mount further down
                clear(path, mounts)
                continue
            if os.path.isdir(path) and not os.path.islink(path):
                unlock(path)
                with contextlib.suppress(Exception):  # RecursionError: a tree too deep to walk
                    shutil.rmtree(path, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    os.remove(path)
            if os.path.lexists(path):
                left.append(path)

    left: list[str] = []
    for root in ("/tmp", "/dev/shm"):
        with contextlib.suppress(OSError):
            clear(root, _mount_points(root))
    for kind in ("shm", "sem", "msg"):
        with contextlib.suppress(OSError), open(f"/proc/sysvipc/{kind}") as f:
            if len(f.read().splitlines()) > 1:
                left.append(f"System V {kind}")
    return left


def _usage(pid: int) -> tuple[int, int]:
    """(clock ticks of CPU, user and system, with its reaped children's; nanoseconds its threads
    waited for a CPU while runnable) of one process, (0, 0) when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            ticks = sum(int(x) for x in f.read().rsplit(b")", 1)[1].split()[11:15])
    except (OSError, IndexError, ValueError):
        return 0, 0
    waited = 0
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError, IndexError, ValueError), open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as f:
                waited += int(f.read().split()[1])
    except OSError:
        pass
    return ticks, waited


class _Clock:
    """What a session's processes did with the time the job held the floor: CPU seconds used
    (the job's budget) and seconds spent neither running nor waiting for a CPU (asleep, or
    blocked). In a PID namespace of its own, every process's but the worker's (a job's forks
    count too, and init's reaped orphans); else the child's and its reaped children's. A job
    the host starves waits for a CPU: that time is the host's, neither used nor idle."""

    def __init__(self, in_pid_namespace: bool, spare: int = 0):
        self.namespace, self.me, self.hz = in_pid_namespace, {os.getpid(), spare}, os.sysconf("SC_CLK_TCK")
        self.pid = 0
        self.base = self._total() if in_pid_namespace else (0, 0)
        self.used = self.idle = 0.0
        self._last = None  # (monotonic time, cpu s, waited s) at the last sample

    def _total(self) -> tuple[int, int]:
        pids = [int(e) for e in os.listdir("/proc") if e.isdigit() and int(e) not in self.me] if self.namespace else [self.pid]
        usage = [_usage(pid) for pid in pids]
        return sum(t for t, _ in usage), sum(w for _, w in usage)

    def sample(self, floor: bool = True) -> None:
        """Read the processes now; the time since the last sample was the job's floor (`floor`)
        or the library's."""
        ticks, waited = self._total()
        now, cpu, wait = time.monotonic(), max(0, ticks - self.base[0]) / self.hz, max(0, waited - self.base[1]) / 1e9
        if self._last is not None and floor:
            then, cpu0, wait0 = self._last
            self.idle += max(0.0, (now - then) - max(0.0, cpu - cpu0) - max(0.0, wait - wait0))
        self._last, self.used = (now, cpu, wait), cpu


def _read_line(fd: int, exited, deadline: float, clock: _Clock | None = None, budget: float = math.inf,
               idle: float = math.inf) -> tuple[bytes, str]:
    """One line from the child: (line, "") or (b"", why not): "cpu" once the session's processes
    have used `budget` CPU seconds, "timeout" once they have been idle `idle` seconds or the
    wall-clock `deadline` passes. Not until EOF, which processes the agent forked (holding the
    pipe) could postpone forever."""
    chunks, size = [], 0
    if clock is not None:
        clock.sample(floor=False)  # the time since the last answer was the library's
    checked = time.monotonic()
    while not (chunks and chunks[-1].endswith(b"\n")):
        now = time.monotonic()
        if clock is not None and now - checked >= 0.5:
            checked = now
            clock.sample()
            if clock.used > budget:
                return b"", "cpu"
            if clock.idle > idle:
                return b"", "timeout"
        left = deadline - now
        if left <= 0:
            return b"", "timeout"
        ready, _, _ = select.select([fd], [], [], min(left, 0.5))
        if ready:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return b"", "exit"
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_ANSWER_LINE:
                return b"", "oversize"
        elif exited():
            return b"", "exit"
    return b"".join(chunks), ""


class _Zygote:
    """The process every session is forked from: forked from the worker once its imports are done,
    before any session, and never handed a job's data (only each session's small opening request
    and the two pipe ends, over a socket). A session forked from the worker itself inherited what
    the worker had relayed for earlier sessions: another job found an earlier job's answer in its
    own memory. The zygote forks one session at a time, waits for it and reports its exit status."""

    def __init__(self, limits: dict):
        import socket

        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.pid = os.fork()
        if self.pid == 0:
            self.sock.close()
            try:
                self._serve(theirs, limits)
            finally:
                os._exit(0)
        theirs.close()
        self.exited: dict[int, int] = {}  # session pid -> wait status

    @staticmethod
    def _serve(sock, limits: dict) -> None:
        import socket

        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):  # never the worker's pipes to the library
            os.dup2(devnull, fd)
        while True:
            message, fds, _, _ = socket.recv_fds(sock, 1 << 16, 2)
            if not message:
                return  # the worker is gone
            first = json.loads(message)
            pid = os.fork()
            if pid == 0:
                sock.close()
                try:
                    _child(first, limits, fds[0], fds[1], first["log_path"])
                finally:
                    os._exit(1)
            for fd in fds:
                os.close(fd)
            sock.send(json.dumps({"pid": pid}).encode())
            _, status = os.waitpid(pid, 0)
            sock.send(json.dumps({"pid": pid, "status": status}).encode())

    def spawn(self, first: dict, req_r: int, out_w: int) -> int:
        """Fork a session for `first` on these pipe ends; its pid."""
        import socket

        socket.send_fds(self.sock, [json.dumps(first).encode()], [req_r, out_w])
        return json.loads(self.sock.recv(1 << 16))["pid"]

    def done(self, pid: int, timeout: float = 0.0) -> bool:
        """Whether session `pid` has exited (its status then in `exited`), waiting up to `timeout`."""
        while pid not in self.exited:
            ready, _, _ = select.select([self.sock], [], [], timeout)
            if not ready:
                return False
            message = self.sock.recv(1 << 16)
            if not message:
                raise RuntimeError("the session zygote died")
            report = json.loads(message)
            self.exited[report["pid"]] = report["status"]
        return True


def _run_session(first: dict, limits: dict, in_pid_namespace: bool, emit, next_request, zygote: _Zygote) -> None:
    """Have the zygote fork the child for `first`, and relay lines both ways until done, timeout or death.

    Time limits count only while the job holds the floor (from a request to its answer; the
    library's own time between them does not count), and are of two kinds. `first["timeout"]`
    is the job's: CPU seconds its processes may use; past it the session ends (stage "cpu"),
    the job's own doing on any host. `first["wall"]` (default three times that) is the job's too:
    seconds it may spend neither running nor waiting for a CPU (asleep or blocked: a sleep, a lock,
    a stopped process wait on nothing the host does; stage "idle"). `first["cap"]` (default four
    times that) is the clock in all: past it with neither limit reached, the host starved the job
    of CPUs (stage "timeout") and the library reports a failure of the infrastructure. Neither
    message carries a figure the job controls (how much CPU it used): a job that chose when to
    stop could otherwise read out what it saw in the sandbox through the report."""
    req_r, req_w = os.pipe()
    out_r, out_w = os.pipe()
    log_path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"log-{first['nonce']}")
    budget = float(first["timeout"])
    wall = float(first.get("wall") or 3 * budget)  # sandbox.WALL_FACTOR
    cap = float(first.get("cap") or 4 * wall)  # sandbox.CAP_FACTOR
    clock = _Clock(in_pid_namespace, spare=zygote.pid)
    pid = zygote.spawn({**first, "log_path": log_path}, req_r, out_w)
    os.close(req_r)
    os.close(out_w)
    clock.pid = pid
    floor, why, status = 0.0, "", 0
    while True:
        asked = time.monotonic()
        line, why = _read_line(out_r, lambda: zygote.done(pid), asked + cap - floor, clock, budget, wall)
        floor += time.monotonic() - asked
        if why:
            break
        # Only the first line of what the child wrote, marked as the child's: agent code that
        # writes an end line of its own (or several lines at once) cannot end the session or
        # stay behind to answer the next job's requests.
        # A bare carriage return is a line break to a reader with universal newlines: in JSON it
        # can only be whitespace, so it becomes a space (a red team forged lines with it).
        emit(ANSWER + line.split(b"\n", 1)[0].decode(errors="replace").replace("\r", " ").strip())
        nxt = next_request()
        if nxt is None or json.loads(nxt).get("op") == "done":
            break
        try:
            os.write(req_w, (nxt.strip() + "\n").encode())
        except OSError:
            why = "exit"
            break
    for fd in (req_w, out_r):
        os.close(fd)
    for kill in (os.killpg, os.kill):  # its group; itself, should it not have made the group yet
        with contextlib.suppress(ProcessLookupError, PermissionError):
            kill(pid, signal.SIGKILL)
    if not zygote.done(pid, timeout=30.0):
        raise RuntimeError("a killed session never exited")
    status = zygote.exited.pop(pid)
    stray = _sweep(zygote.pid) if in_pid_namespace and not _settled(zygote.pid) else 0
    log_tail = _tail(log_path, 2000)
    shutil.rmtree(os.path.join(os.path.dirname(log_path), "job-" + first["nonce"]), ignore_errors=True)
    if os.path.exists(log_path):
        os.remove(log_path)
    residue = _wipe() if in_pid_namespace else []
    if why == "cpu":
        end = {"stage": "cpu", "error": f"the taskset did not finish loading and scoring within {budget:g} s of CPU "
               "time (an endless loop, or far too much work at import, in load() or in a reward)", "cpu": round(clock.used, 2)}
    elif why == "timeout" and clock.idle > wall:
        end = {"stage": "idle", "error": f"the job spent more than {wall:g} s of wall-clock time neither running nor "
               "waiting for a CPU: it waits on something that never comes (a sleep, a lock, a stopped process, the "
               "network, which the sandbox does not have)", "cpu": round(clock.used, 2), "idle": round(clock.idle, 2)}
    elif why == "timeout":
        end = {"stage": "timeout", "error": f"the probe did not finish within {cap:g} s of wall-clock time with the job "
               "runnable: the host is overloaded", "cpu": round(clock.used, 2), "idle": round(clock.idle, 2),
               "floor": round(floor, 2)}
    elif why == "oversize":
        end = {"stage": "crash", "error": "the probe process answered with more than "
               f"{MAX_ANSWER_LINE >> 20} MiB of data (far too many or too large tasks)"}
    elif why == "exit":
        end = {"stage": "crash", "error": f"the probe process {_exit_reason(status)} before answering"}
    else:
        end = {"stage": "closed"}
    emit(END + json.dumps({**end, "end": True, "stderr": log_tail, "stray": stray, "residue": len(residue)}))


def serve(limits: dict) -> None:
    """The warm worker: import verifiers once, print `ready`, then run one session per request line
    on stdin until stdin closes. A session that fails ends with a crash line; the worker goes on."""
    os.closerange(3, 65536)  # nothing inherited reaches a job (bubblewrap's plan came on a descriptor)
    # The point of a warm worker: pay these imports once. The loader looks a taskset id up in
    # verifiers.v1.tasksets first, which imports mcp (~1 s).
    import verifiers.v1  # noqa: F401
    import verifiers.v1.graph  # noqa: F401
    import verifiers.v1.tasksets  # noqa: F401
    import verifiers.v1.utils.decorators  # noqa: F401
    import verifiers.v1.utils.loaders  # noqa: F401

    for server in ("mcp.server.fastmcp", "mcp.server.mcpserver"):  # Job.tool_specs registers tools on one
        with contextlib.suppress(ImportError):
            __import__(server)
    with contextlib.suppress(ImportError):  # prime-rl's config classes, in its stack only
        import prime_rl.configs.rl  # noqa: F401
        import pydantic_config  # noqa: F401

    # Children share our uid: a non-dumpable worker cannot be traced or read through /proc by them.
    import ctypes

    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4
    resource.setrlimit(resource.RLIMIT_NPROC, (limits["processes"], limits["processes"]))

    def emit(text: str) -> None:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()

    def next_request() -> str | None:
        line = sys.stdin.readline()
        return line if line.strip() else None

    # Keep the imported modules' objects out of the collector's reach, so forked children do not
    # copy every page the collector would touch.
    import gc

    gc.collect()
    gc.freeze()
    limits = {**limits, "split": limits["pid_namespace"] and _can_split(limits)}
    refused = _can_filter(limits)
    if refused:
        emit(f"not ready: {refused}")
        return
    _remember_pristine()
    zygote = _Zygote(limits)  # before any session's data reaches this process, and before the library counts ours
    emit("ready")
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            _run_session(json.loads(line), limits, limits["pid_namespace"], emit, next_request, zygote)
        except Exception as e:  # noqa: BLE001 - the worker itself must survive anything
            # The session's cleanup did not finish: this worker is not known clean, so it is replaced.
            emit(END + json.dumps({"stage": "crash", "end": True, "residue": 1,
                                   "error": f"probe worker error: {type(e).__name__}: {e}"}))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--serve":
        serve(json.loads(sys.argv[2]))
    else:
        sys.exit("usage: child.py --serve LIMITS_JSON")
