"""The half of the validation probe that touches agent-written code.

Run as a script (`python probe_child.py`) in a confined child process, never imported by
the library. Reads one JSON request on stdin, imports the job's taskset package, measures
it model-free, and writes one JSON result on the original stdout after a per-run nonce.
Agent code's own prints are sent to stderr. This file imports nothing from trainergym so
the child pays only for verifiers.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import json
import math
import os
import sys
import traceback

MARK = "@@trainergym-probe@@"


def _short_error(exc: BaseException, package_dir: str, module: str = "") -> str:
    """The tail of a traceback, with the job's package shown as the agent knows it."""
    lines = traceback.format_exception(exc)
    text = "".join(lines[-12:])
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
    res: dict = {"stage": "import"}
    package_dir = req["package_dir"]
    import verifiers
    import verifiers.v1 as vf
    from verifiers.v1.utils.loaders import taskset_class, taskset_config_type

    res["verifiers_version"] = getattr(verifiers, "__version__", None)
    sys.path.insert(0, package_dir)
    module = req["module"]
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
    res["n_tasks"] = len(tasks)
    res["truncated"] = len(tasks) > req["max_tasks"]
    tasks = tasks[: req["max_tasks"]]
    if not tasks:
        res["error"] = "the taskset's load() yielded no tasks"
        return res
    data_fields = type(tasks[0].data).model_fields
    res["answer_field"] = "answer" in data_fields
    prompts = [t.data.prompt_text for t in tasks]
    res["empty_prompts"] = sum(1 for p in prompts if not p.strip())
    res["missing_answers"] = sum(1 for t in tasks if not str(getattr(t.data, "answer", "") or "").strip())
    res["prompt_chars_max"] = max(len(p) for p in prompts)
    step = max(1, len(tasks) // req["sample_size"])
    res["sample"] = [{"prompt": t.data.prompt_text[:4000], "answer": str(getattr(t.data, "answer", ""))[:200]}
                     for t in tasks[::step][: req["sample_size"]]]

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


def main() -> None:
    req = json.loads(sys.stdin.read())
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # whatever agent code prints goes to stderr, not into our result
    sys.stdout = sys.stderr
    try:
        result = asyncio.run(measure(req))
    except BaseException as e:  # noqa: BLE001 - always answer, even for SystemExit in agent code
        result = {"stage": "crash", "error": _short_error(e, req.get("package_dir", ""), req.get("module", ""))}
    out.write("\n" + MARK + req["nonce"] + json.dumps(result, default=str) + "\n")
    out.flush()
    os._exit(0)  # skip agent-registered atexit handlers and lingering threads


if __name__ == "__main__":
    main()
