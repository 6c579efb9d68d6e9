"""The half of the validation probe that touches agent-written code.

Run as a script inside the sandbox (`trainergym.sandbox`), never imported by the library:

    python probe_child.py --serve LIMITS_JSON

imports verifiers once, prints `ready`, then for each JSON request line on stdin forks a fresh
child that copies the job package into its private /tmp, imports it, measures it model-free
and hands one JSON result back; the worker prints it as one line. The child's stdin is closed
and its stdout goes to a log, so agent code can neither read other requests nor write into
the answer. After each child the worker kills every other process in its PID namespace.
This file imports nothing from trainergym.
"""

from __future__ import annotations

import asyncio
import inspect
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

MAX_PROMPT_CHARS = 4000  # per row returned for coverage and leakage checks


def _short_error(exc: BaseException, package_dir: str, module: str = "") -> str:
    """The tail of a traceback, with the job's package shown as the agent knows it."""
    text = "".join(traceback.format_exception(exc)[-12:])
    if module:
        text = text.replace(f"{package_dir}/{module}/", "taskset/").replace(f"{module}/", "taskset/")
    return text.replace(package_dir + "/", "")[-3000:]


def _trace(vf, task, calls: list[dict], reply: str | None):
    """A finished rollout for `task`: the prompt, the given tool calls and results, then a
    final assistant reply (None: an untouched trace with no model turn at all)."""
    from verifiers.v1.graph import MessageNode

    nodes = []
    if task.data.system_prompt:
        nodes.append(MessageNode(message=vf.SystemMessage(content=task.data.system_prompt)))
    nodes.append(MessageNode(parent=len(nodes) - 1 if nodes else None, message=vf.UserMessage(content=task.data.prompt_text)))
    if reply is not None:
        for i, call in enumerate(calls):
            tc = vf.ToolCall(id=f"call_{i}", name=call["tool"], arguments=json.dumps(call["arguments"]))
            nodes.append(MessageNode(parent=len(nodes) - 1, message=vf.AssistantMessage(content="", tool_calls=[tc]), sampled=True))
            nodes.append(MessageNode(parent=len(nodes) - 1, message=vf.ToolMessage(tool_call_id=tc.id, content=call["result"], name=call["tool"])))
        nodes.append(MessageNode(parent=len(nodes) - 1, message=vf.AssistantMessage(content=reply), sampled=True))
    return vf.Trace(
        task=vf.TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash),
        agent=vf.AgentInfo(config=vf.AgentConfig(), name="probe", trainable=False),
        nodes=nodes,
    )


async def _score(vf, task, calls, reply, timeout: float) -> dict:
    trace = _trace(vf, task, calls, reply)
    try:
        await asyncio.wait_for(task.score(trace), timeout)
    except Exception as e:  # noqa: BLE001 - a raising reward is a finding, not a crash
        return {"reward": None, "error": f"{type(e).__name__}: {e}"[:500]}
    if trace.errors:
        return {"reward": None, "error": trace.errors[-1].model_dump_json()[:500]}
    if not trace.rewards:
        return {"reward": None, "error": "the task declares no @vf.reward"}
    value = trace.reward
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        return {"reward": None, "error": f"reward is not a finite number: {value!r}"}
    return {"reward": float(value)}


def _tools(task_cls, taskset_cls, config, task) -> list[dict]:
    from verifiers.v1.utils.decorators import discover_decorated

    servers = list(taskset_cls.toolsets(config)) + list(task_cls.toolsets(task.config))
    out = []
    for server in servers:
        for fn in discover_decorated(server, "tool"):
            raw = getattr(fn, "tool_name", None) or fn.__name__
            name = f"{server.server_name}_{raw}" if server.server_name else raw
            params = [p for p in inspect.signature(fn).parameters if p != "self"]
            out.append({"name": name, "params": params})
    return out


async def measure(req: dict) -> dict:
    """Everything the probe learns about a job without a model (see probe.py for the checks)."""
    res: dict = {"stage": "import"}
    package_dir, module = req["package_dir"], req["module"]
    import verifiers
    import verifiers.v1 as vf
    from verifiers.v1.utils.loaders import taskset_class, taskset_config_type

    res["verifiers_version"] = getattr(verifiers, "__version__", None)
    sys.path.insert(0, package_dir)
    try:
        cls = taskset_class(module)
        config = taskset_config_type(module)(id=module)
        taskset = cls(config)
    except BaseException as e:  # noqa: BLE001
        res["error"] = _short_error(e, package_dir, module)
        return res

    res["stage"] = "load"
    try:
        view = taskset if taskset.bounded else taskset.take(req["max_tasks"])
        tasks = list(itertools.islice(iter(view), req["max_tasks"] + 1))
    except BaseException as e:  # noqa: BLE001
        res["error"] = _short_error(e, package_dir, module)
        return res
    res["infinite"] = not taskset.bounded
    res["truncated"] = len(tasks) > req["max_tasks"]
    res["n_tasks"] = min(len(tasks), req["max_tasks"])
    tasks = tasks[: req["max_tasks"]]
    if not tasks:
        res["error"] = "the taskset's load() yielded no tasks"
        return res
    data_fields = type(tasks[0].data).model_fields
    res["answer_field"] = "answer" in data_fields
    prompts = [t.data.prompt_text for t in tasks]
    answers = [str(getattr(t.data, "answer", "") or "") for t in tasks]
    res["empty_prompts"] = sum(1 for p in prompts if not p.strip())
    res["missing_answers"] = sum(1 for a in answers if not a.strip())
    res["prompt_chars_max"] = max(len(p) + len(t.data.system_prompt or "") for p, t in zip(prompts, tasks))
    res["answer_chars_max"] = max(len(a) for a in answers)
    res["rows"] = [[p[:MAX_PROMPT_CHARS], a[:200]] for p, a in zip(prompts, answers)]

    res["stage"] = "tools"
    try:
        res["tools"] = _tools(type(tasks[0]), cls, config, tasks[0])
    except BaseException as e:  # noqa: BLE001
        res["tools_error"] = _short_error(e, package_dir, module)

    res["stage"] = "rewards"
    timeout = req["reward_timeout"]
    gold, noop = [], []
    for task in tasks[: req["gold_tasks"]]:
        try:
            valid = await asyncio.wait_for(task.validate(None), timeout)
            gold.append({"valid": None if valid is None else bool(valid)})
        except Exception as e:  # noqa: BLE001
            gold.append({"valid": False, "error": f"{type(e).__name__}: {e}"[:500]})
        noop.append(await _score(vf, task, [], None, timeout))
    res["gold"], res["noop"] = gold, noop

    separation = []
    base = tasks[0]
    has_world = "world" in data_fields
    for item in req["probe_items"]:
        update = {"prompt": item["prompt"], "answer": item["answer"]} | ({"world": item["world"]} if has_world else {})
        task = base.with_data(**update)
        ref = item["reference"]
        row = {"reference": await _score(vf, task, ref["calls"], ref["reply"], timeout), "distractors": []}
        for d in item["distractors"]:
            row["distractors"].append({"kind": d["kind"], **await _score(vf, task, ref["calls"], d["reply"], timeout)})
        row["empty"] = await _score(vf, task, [], "", timeout)
        separation.append(row)
    res["separation"] = separation
    res["stage"] = "done"
    return res


def _sweep() -> None:
    """Kill every process in this PID namespace but the worker and the namespace's init."""
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) not in (1, me):
            try:
                os.kill(int(entry), signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def _exit_reason(status: int) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        known = {signal.SIGXCPU: "was stopped for using too much CPU time", signal.SIGXFSZ: "was stopped for writing "
                 "too large a file", signal.SIGKILL: "was killed (out of memory?)", signal.SIGSEGV: "crashed (segfault)"}
        return known.get(sig, f"was killed by signal {signal.Signals(sig).name}")
    return f"exited with status {os.WEXITSTATUS(status)}"


def _child(req: dict, limits: dict, out_fd: int, log_path: str) -> None:
    """In the forked child: confine further, copy the job, measure, write one JSON result."""
    os.setsid()
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    sys.stdin = open(os.devnull)  # noqa: SIM115
    sys.stdout = sys.stderr = os.fdopen(os.dup(log), "w", buffering=1)
    for what, key in ((resource.RLIMIT_CPU, "cpu_seconds"), (resource.RLIMIT_AS, "memory_bytes"),
                      (resource.RLIMIT_FSIZE, "file_bytes"), (resource.RLIMIT_NOFILE, "open_files")):
        resource.setrlimit(what, (limits[key], limits[key]))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    workdir = os.path.join(os.environ.get("TMPDIR", "/tmp"), "job-" + req["nonce"])
    shutil.copytree(req["package_src"], workdir, symlinks=True)
    os.chdir(workdir)
    try:
        result = asyncio.run(measure({**req, "package_dir": workdir}))
    except BaseException as e:  # noqa: BLE001 - always answer, even for SystemExit in agent code
        result = {"stage": "crash", "error": _short_error(e, workdir, req.get("module", ""))}
    data = (json.dumps(result, default=str) + "\n").encode()
    view = memoryview(data)
    while view:
        view = view[os.write(out_fd, view):]
    os._exit(0)  # skip agent-registered atexit handlers and lingering threads


def _run_one(req: dict, limits: dict, in_pid_namespace: bool) -> dict:
    read_fd, write_fd = os.pipe()
    log_path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"log-{req['nonce']}")
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        try:
            _child(req, limits, write_fd, log_path)
        finally:
            os._exit(1)
    os.close(write_fd)
    # Read until the child's one result line: not until EOF, which processes the agent forked
    # (holding the pipe) could postpone forever.
    chunks, deadline, timed_out = [], time.monotonic() + req["timeout"], False
    while not (chunks and chunks[-1].endswith(b"\n")):
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out = True
            break
        ready, _, _ = select.select([read_fd], [], [], min(left, 0.5))
        if ready:
            chunk = os.read(read_fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
        elif os.waitpid(pid, os.WNOHANG)[0]:  # exited without a result
            break
    os.close(read_fd)
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:  # already reaped above
        status = 0
    if in_pid_namespace:
        _sweep()
    try:
        with open(log_path, errors="replace") as f:
            log_tail = f.read()[-2000:]
    except OSError:
        log_tail = ""
    shutil.rmtree(os.path.join(os.path.dirname(log_path), "job-" + req["nonce"]), ignore_errors=True)
    if os.path.exists(log_path):
        os.remove(log_path)
    text = b"".join(chunks).decode(errors="replace").strip()
    if timed_out:
        result = {"stage": "timeout", "error": f"the taskset did not finish loading and scoring within {req['timeout']:.0f} s "
                  "(an endless loop, or far too much work at import or in load())"}
    elif text.startswith("{"):
        result = json.loads(text.splitlines()[-1])
    else:
        result = {"stage": "crash", "error": f"the probe process {_exit_reason(status)} before reporting"}
    result["stderr"] = log_tail
    return result


def serve(limits: dict) -> None:
    # The point of a warm worker: pay these imports once. The loader looks a taskset id up in
    # verifiers.v1.tasksets first, which imports mcp (~1 s).
    import verifiers.v1  # noqa: F401
    import verifiers.v1.graph  # noqa: F401
    import verifiers.v1.tasksets  # noqa: F401
    import verifiers.v1.utils.decorators  # noqa: F401
    import verifiers.v1.utils.loaders  # noqa: F401

    # Children share our uid: a non-dumpable worker cannot be traced or read through /proc by them.
    import ctypes

    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4
    resource.setrlimit(resource.RLIMIT_NPROC, (limits["processes"], limits["processes"]))
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            result = _run_one(json.loads(line), limits, limits["pid_namespace"])
        except Exception as e:  # noqa: BLE001 - the worker itself must survive anything
            result = {"stage": "crash", "error": f"probe worker error: {type(e).__name__}: {e}"}
        sys.stdout.write(json.dumps(result, default=str) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--serve":
        serve(json.loads(sys.argv[2]))
    else:
        sys.exit("usage: probe_child.py --serve LIMITS_JSON")
