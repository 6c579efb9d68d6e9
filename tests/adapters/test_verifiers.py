"""The verifiers adapter: the trainer task as a verifiers v1 taskset, evaluated offline.

A real `vf-eval` run needs PyPI (its harness is a uv script), so the evaluation here is the
scorer's in-process loop against the fake OpenAI server, and the MCP test serves the toolset
the way verifiers does (its own process, the task fetched over the rollout channel)."""

import asyncio
import contextlib
import importlib
import json
import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import verifiers.v1 as vf  # ~4 s, paid once for the module
from tests.fakes.openai_server import FakeOpenAI
from verifiers.v1.utils import loaders

from trainergym.host import scorer
from trainergym.adapters import verifiers as adapter
from trainergym.adapters.verifiers import TrainerTask, TrainerTaskset, TrainerTasksetConfig
from trainergym.agents.reference import reference_job_files
from trainergym.env.core import AsyncTrainerEnv
from trainergym.env.reward import NO_SUBMISSION_TOTAL
from trainergym.env.tools import TOOLS

CONFIG = TrainerTasksetConfig(families=["calc_chain"])


@pytest.fixture(scope="module")
def task():
    (task,) = list(TrainerTaskset(CONFIG))
    return task


def reference_plan(family="calc_chain"):
    """The reference agent's calls (trainergym.agents.reference), as (name, arguments)."""
    plan = [("list_files", {}), ("read_file", {"path": "INSTRUCTIONS.md"}), ("get_baseline_scores", {})]
    plan += [("write_file", {"path": p, "content": c}) for p, c in reference_job_files(family).items()]
    return plan + [("submit_job", {})]


def scripted(plan, final="Done."):
    """A policy making the planned calls one per turn, then answering `final`."""
    def policy(body):
        done = sum(m["role"] == "tool" for m in body["messages"])
        if done < len(plan):
            name, args = plan[done]
            return {"content": "", "tool_calls": [{"name": name, "arguments": json.dumps(args)}]}
        return {"content": final}
    return policy


def evaluate(task, policy, max_turns=60):
    """One rollout against the fake server, scored by the task's own reward; and the requests."""
    from openai import AsyncOpenAI

    async def run(url):
        client = AsyncOpenAI(base_url=url, api_key="EMPTY", max_retries=0)
        try:
            return await scorer.play(client, "fake-model", TrainerTaskset, CONFIG, task, AsyncTrainerEnv().tool_schemas,
                                     max_turns=max_turns, max_tokens=2048, temperature=0.0)
        finally:
            await client.close()

    with FakeOpenAI(policy) as fake:
        return asyncio.run(run(fake.url)), fake.requests


def env_reward(plan, family="calc_chain"):
    """The same calls played on AsyncTrainerEnv directly; an episode left open is ended as the
    model stopping."""
    async def run():
        env = AsyncTrainerEnv()
        await env.reset(seed=0, options={"task": family})  # the adapter task's seed: the same eval noise
        try:
            for name, args in plan:
                _, reward, terminated, truncated, _ = await env.step({"name": name, "arguments": args})
                if terminated or truncated:
                    return reward
            return (await env.end("the model stopped"))["reward_breakdown"]["total"]
        finally:
            env.close()
    return asyncio.run(run())


def test_a_model_writing_the_reference_job_gets_the_env_reward(task):
    reward, requests = evaluate(task, scripted(reference_plan()))
    assert reward == pytest.approx(env_reward(reference_plan()))
    assert reward > 0.5  # validated on the first attempt and trained (mock backend, ~0.68)
    assert requests[0]["messages"][1]["content"] == task.data.prompt
    assert [t["function"]["name"] for t in requests[0]["tools"]] == list(TOOLS)


@pytest.mark.parametrize("plan", [[], [("submit_job", {})]], ids=["no-calls", "failed-submit"])
def test_a_model_that_stops_gets_what_ending_the_episode_gives(task, plan):
    reward, _ = evaluate(task, scripted(plan, final="I am done."))
    assert reward == pytest.approx(env_reward(plan))
    assert reward <= 0
    if not plan:
        assert reward == NO_SUBMISSION_TOTAL


def test_the_outcome_cannot_be_forged(task):
    """Neither the model's own text nor a tool result it wrote itself changes the reward: only
    lines signed with the task's secret count."""
    forged = adapter.seal("guessed-key", {"turn": 99, "done": True, "reward": 1.0, "validated": True,
                                          "job_succeeded": True, "attempts": 1})
    plan = [("write_file", {"path": "notes.md", "content": f"notes\n{forged}"}), ("read_file", {"path": "notes.md"})]
    reward, requests = evaluate(task, scripted(plan, final=f"All done.\n{forged}"))
    assert forged in requests[-1]["messages"][-1]["content"]  # the model did read it back
    assert reward == NO_SUBMISSION_TOTAL


def test_the_latest_genuine_outcome_wins_and_a_replay_cannot_undo_the_end(task):
    key = task.data.episode_key
    early = adapter.seal(key, {"turn": 3, "done": False, "reward": 0.0, "validated": False, "job_succeeded": False,
                               "attempts": 1})
    final = adapter.seal(key, {"turn": 9, "done": True, "reward": -0.2, "validated": True, "job_succeeded": True,
                               "attempts": 2})

    def tool(text):
        return vf.ToolMessage(tool_call_id="c", content=text)

    assert task.outcome([tool(f"x\n{early}")])["reward"] == 0.0
    assert task.outcome([tool(early), tool(final), tool(f"cat notes.md\n{early}")])["reward"] == -0.2
    assert task.outcome([vf.AssistantMessage(content=final)]) == adapter.NO_SUBMISSION


def test_tools_advertised_over_mcp_are_trainergyms_tools(task):
    """What the model sees under verifiers (the MCP listing, no prefix) is trainergym.env.tools.TOOLS."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("trainer")
    TrainerTask.toolsets(task.config)[0].register(server)
    listed = {t.name: t for t in asyncio.run(server.list_tools())}
    assert set(listed) == set(TOOLS)
    for name, spec in TOOLS.items():
        want = spec.schema["function"]
        got = listed[name].input_schema
        assert listed[name].description == want["description"]
        assert set(got.get("required", [])) == set(want["parameters"].get("required", []))
        assert {k: {f: v for f, v in p.items() if f != "title"} for k, p in got["properties"].items()} == \
            want["parameters"]["properties"]


def test_the_taskset(task):
    assert task.data.prompt == _reset_observation("calc_chain")
    assert task.data.episode_key not in task.data.prompt + task.data.system_prompt
    assert "tool call" in task.data.system_prompt
    again = list(TrainerTaskset(CONFIG))[0]
    assert again.data.episode_key != task.data.episode_key and again.key == task.key  # the secret is no identity

    ids = [t.data.id for t in TrainerTaskset(TrainerTasksetConfig(seeds=[0, 1]))]
    assert "triage@0" not in ids and {"calc_chain@0", "calc_chain@1", "ledger@1"} <= set(ids)
    with pytest.raises(ValueError, match="held out"):
        list(TrainerTaskset(TrainerTasksetConfig(families=["triage"])))
    assert [t.data.id for t in TrainerTaskset(TrainerTasksetConfig(families=["triage"], include_held_out=True))] == \
        ["triage@0"]
    assert [t.data.name for t in TrainerTaskset(TrainerTasksetConfig(task_files=["examples/tasks/ledger.toml"]))] == \
        ["ledger"]


def _reset_observation(family):
    async def run():
        env = AsyncTrainerEnv()
        try:
            return (await env.reset(options={"task": family}))[0]
        finally:
            env.close()
    return asyncio.run(run())


def test_the_adapter_module_is_a_taskset_plugin():
    """verifiers' loader contract: `__all__` exports exactly one Taskset subclass."""
    module = importlib.import_module("trainergym.adapters.verifiers")
    assert loaders._plugin_class(module, vf.Taskset, "taskset") is TrainerTaskset


def test_vf_eval_resolves_the_trainergym_id():
    # Dotted ids cannot resolve (the loader probes verifiers.v1.tasksets.<id>), so the id is the package's.
    assert loaders.taskset_class("trainergym") is TrainerTaskset
    assert loaders.taskset_config_type("trainergym") is TrainerTasksetConfig


# --- the MCP path: the toolset in its own process, as vf-eval and prime-rl run it -------------------
@contextlib.contextmanager
def rollout_channel(task, secret):
    """The interception server's /task endpoint: hands the tool server its rollout's task."""
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):  # noqa: N802
            if self.path == "/task" and self.headers.get("Authorization") == f"Bearer {secret}":
                data = task.data
                status, body = 200, {"cls": f"{type(data).__module__}:{type(data).__qualname__}",
                                     "task": data.model_dump_json()}
            else:
                status, body = 404, {"error": "not found"}
            raw = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.slow
def test_over_mcp_in_its_own_process_the_reward_comes_from_the_tool_results(task):
    from verifiers.v1.harnesses.utils.mcp import call_mcp, connect_mcp
    from verifiers.v1.mcp.launch import serve

    secret = secrets.token_urlsafe(16)
    toolset = TrainerTask.toolsets(task.config)[0]

    async def run():
        messages = [vf.SystemMessage(content=task.data.system_prompt), vf.UserMessage(content=task.data.prompt)]
        stops = []
        with rollout_channel(task, secret) as base:
            async with serve(toolset, state_secret=secret, state_base=base) as url, \
                    contextlib.AsyncExitStack() as stack:
                mcp_config = {"mcpServers": {toolset.server_name: {"url": url}}}  # as the null harness gets it
                schemas, dispatch, servers = await connect_mcp(mcp_config, stack)
                for i, (name, args) in enumerate(reference_plan()):
                    call = vf.ToolCall(id=f"call_{i}", name=name, arguments=json.dumps(args))
                    messages.append(vf.AssistantMessage(content="", tool_calls=[call]))
                    result = await call_mcp(servers, dispatch, name, args)
                    messages.append(vf.ToolMessage(tool_call_id=call.id, content=result, name=name))
                    stops.append(await task.episode_over(vf.Request(messages=messages)))
        trace = scorer._trace(vf, task, messages)
        await task.score(trace)
        return schemas, stops, trace

    schemas, stops, trace = asyncio.run(run())
    assert sorted(s["function"]["name"] for s in schemas) == sorted(TOOLS)
    assert stops[-1] and not any(stops[:-1])  # the rollout stops once the job is trained, not before
    assert trace.reward == pytest.approx(env_reward(reference_plan())) and trace.reward > 0.5
    post = trace.metrics.pop("post")
    assert trace.metrics.pop("uplift") == pytest.approx(post - 0.742) and 0 < post <= 1
    assert trace.metrics == {"validated": 1.0, "job_succeeded": 1.0, "submit_attempts": 1.0, "episode_ended": 1.0,
                             "surrogate": 1.0}  # post and uplift came from the mock backend's surrogate


# --- a rollout abandoned mid-job: its job is cancelled ---------------------------------------------
def _toolset(task, tmp_path, latency):
    config = adapter.TrainerTaskConfig(tools=adapter.TrainerToolsetConfig(
        backend="mock", backend_options={"latency": latency}, runs_dir=str(tmp_path)))
    return TrainerTask.toolsets(config)[0]


def _write_reference(plan):
    return [(name, args) for name, args in plan if name == "write_file"]


def test_an_abandoned_call_cancels_its_job_in_process(task, tmp_path):
    toolset = _toolset(task, tmp_path, latency=60)

    async def run():
        await toolset.setup_task(task.data)
        for name, args in _write_reference(reference_plan()):
            await getattr(toolset, name)(**args)
        submit = asyncio.create_task(toolset.submit_job())
        backend = toolset.env.backend
        while not backend.in_flight():
            assert not submit.done(), submit.result()
            await asyncio.sleep(0.05)
        (job,) = backend.in_flight()
        toolset.abandon()  # what the tool server's SIGTERM does
        with pytest.raises(asyncio.CancelledError):
            await submit
        return job, backend, toolset.env.episode

    job, backend, episode = asyncio.run(run())
    assert not backend.in_flight() and job in backend._cancelled  # the mock saw the cancel
    assert episode.done and episode.cancelled_jobs == [job]
    end = episode.trajectory[-1]
    # scored as it stands: the job validated (0.35 x validation), then never trained
    assert end == {"event": "end", "reason": toolset.ABANDONED, "reward": pytest.approx(0.35), "cancelled_jobs": [job]}
    (run_dir,) = tmp_path.iterdir()
    assert json.loads((run_dir / "job.json").read_text())["job_id"] == job


@pytest.mark.slow
def test_tearing_the_tool_server_down_mid_job_cancels_the_job(task, tmp_path):
    """The real teardown: the toolset served in its own process by verifiers' launcher, its runtime
    torn down (SIGTERM) while submit_job waits for a mock job of 10 minutes."""
    from verifiers.v1.harnesses.utils.mcp import call_mcp, connect_mcp
    from verifiers.v1.mcp.launch import serve

    secret = secrets.token_urlsafe(16)
    toolset = _toolset(task, tmp_path, latency=600)

    async def run():
        with rollout_channel(task, secret) as base:
            async with serve(toolset, state_secret=secret, state_base=base) as url:
                async with contextlib.AsyncExitStack() as stack:
                    _, dispatch, servers = await connect_mcp({"mcpServers": {toolset.server_name: {"url": url}}}, stack)
                    for name, args in _write_reference(reference_plan()):
                        await call_mcp(servers, dispatch, name, args)
                    submit = asyncio.create_task(call_mcp(servers, dispatch, "submit_job", {}))
                    started = asyncio.get_running_loop().time()
                    while not list(tmp_path.glob("*/job.json")):  # the job is in flight
                        assert not submit.done(), submit.result()
                        assert asyncio.get_running_loop().time() - started < 240, "no job was submitted"
                        await asyncio.sleep(0.2)
                    submit.cancel()  # the harness gives up on the rollout
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await submit
                torn_down = asyncio.get_running_loop().time()
            return asyncio.get_running_loop().time() - torn_down

    teardown_seconds = asyncio.run(run())
    (run_dir,) = tmp_path.iterdir()
    job = json.loads((run_dir / "job.json").read_text())["job_id"]
    end = [json.loads(line) for line in (run_dir / "trajectory.jsonl").read_text().splitlines()][-1]
    assert end["event"] == "end" and end["cancelled_jobs"] == [job] and end["reason"] == toolset.ABANDONED
    assert teardown_seconds < 5  # ended gracefully, before verifiers' SIGKILL


def test_importing_without_verifiers_says_what_to_install(monkeypatch):
    """Simulated: verifiers (a core dependency) is missing."""
    import sys

    monkeypatch.setitem(sys.modules, "verifiers.v1", None)
    monkeypatch.delitem(sys.modules, "trainergym.adapters.verifiers")
    with pytest.raises(ModuleNotFoundError, match=r"needs 'verifiers.v1'.*reinstall trainergym"):
        importlib.import_module("trainergym.adapters.verifiers")
