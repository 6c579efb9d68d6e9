"""The OpenEnv server (trainergym.adapters.openenv), over loopback: OpenEnv's own generic client and
verifiers' OpenEnvTaskset play the reference agent's calls against the server and get the
Gymnasium env's reward for the same seed; sessions are isolated and a long submit_job in one
does not hold up another; malformed actions are error observations; the container's entrypoint
and `trainergym serve` (once the CLI has it) serve the same app.

Skipped unless the `openenv` extra is installed (`uv sync --extra openenv`), but for the test
that the adapter's import names the extra when it is missing."""

import asyncio
import contextlib
import importlib
import importlib.util
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest

from tests.marks import extra_reason
from trainergym.agents.reference import ReferenceAgent
from trainergym.env.core import TrainerEnv

HAVE_OPENENV = importlib.util.find_spec("openenv") is not None


def needs_openenv(test):
    skip = pytest.mark.skipif(not HAVE_OPENENV, reason=extra_reason("the OpenEnv server", "openenv"))
    return pytest.mark.extras(skip(test))


SEED, FAMILY = 0, "calc_chain"
# The mock's latency (seconds) only delays the result (backends/mock.py: an asyncio.sleep), so
# the reward is the Gymnasium env's; it makes the submit long enough to watch another session.
LATENCY = 2.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running(settings):
    """`build_app(settings)` under uvicorn on 127.0.0.1, in a thread; yields its base URL."""
    import uvicorn

    from trainergym.adapters.openenv import build_app

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(build_app(settings), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def url():
    from trainergym.adapters.openenv import ServeSettings

    with running(ServeSettings(max_sessions=4, backend_options={"latency": LATENCY})) as base:
        yield base


@pytest.fixture(scope="module")
def gym_episode():
    """The reference agent's episode on the Gymnasium env (defaults: mock, reward_noise on)."""
    env, agent = TrainerEnv(), ReferenceAgent()
    try:
        obs, info = env.reset(seed=SEED, options={"family": FAMILY})
        agent.reset(obs, info)
        turns = 0
        while True:
            obs, reward, terminated, truncated, info = env.step(agent.act(obs, info))
            turns += 1
            if terminated or truncated:
                return {"reward": reward, "breakdown": info["reward_breakdown"], "turns": turns}
    finally:
        env.close()


def reference_actions():
    """The reference agent's calls, as the JSON text its `act` returns (one per turn)."""
    agent = ReferenceAgent()
    agent.reset("", {"family": FAMILY})
    return (agent.act("", {}) for _ in iter(int, 1))


# --- the import without the extra --------------------------------------------------------------
def test_without_the_extra_the_import_names_it(monkeypatch):
    monkeypatch.delitem(sys.modules, "trainergym.adapters.openenv", raising=False)
    for name in [m for m in sys.modules if m == "openenv" or m.startswith("openenv.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "openenv", None)  # what an environment without it gives
    with pytest.raises(ImportError, match=r"pip install 'trainergym\[openenv\]'"):
        importlib.import_module("trainergym.adapters.openenv")


# --- OpenEnv's generic client --------------------------------------------------------------------
@needs_openenv
def test_the_generic_client_gets_the_gymnasium_reward_and_sessions_stay_apart(url, gym_episode):
    """Session A plays the reference episode; while its submit_job is in flight (the probe, then
    the backend's LATENCY) session B, on the same family, keeps taking turns quickly, and neither
    sees the other's files."""
    from openenv import GenericEnvClient

    async def play():
        async with GenericEnvClient(base_url=url) as a, GenericEnvClient(base_url=url) as b:
            first = await a.reset(seed=SEED, family=FAMILY)
            assert first.observation["info"]["family"] == FAMILY and first.reward is None and not first.done
            await b.reset(seed=1, family=FAMILY)
            note = (await b.step({"name": "write_file", "arguments": {"path": "job.toml", "content": "B's job"}}))
            assert note.observation["info"]["ok"]
            total, turns, actions = 0.0, 0, reference_actions()
            while True:
                action = next(actions)
                turns += 1
                if json.loads(action)["name"] != "submit_job":
                    result = await a.step({"message": action})
                    assert not result.done and result.reward == 0.0
                    total += result.reward
                    continue
                submit = asyncio.ensure_future(a.step({"message": action}))
                started, latencies = time.monotonic(), []
                while not submit.done() and len(latencies) < 30:
                    t0 = time.monotonic()
                    listed = await b.step({"name": "list_files", "arguments": {}})
                    latencies.append(time.monotonic() - t0)
                    assert listed.observation["info"]["ok"] and not listed.done
                    await asyncio.sleep(0.25)
                result = await submit
                waited = time.monotonic() - started
                total += result.reward
                assert result.done
                break
            b_job = (await b.step({"name": "read_file", "arguments": {"path": "job.toml"}})).observation["text"]
            a_state, b_state = await a.state(), await b.state()
            return result, total, turns, waited, latencies, b_job, a_state, b_state

    result, total, turns, waited, latencies, b_job, a_state, b_state = asyncio.run(play())
    # The same episode as on the Gymnasium env: the same reward, term by term.
    assert result.reward == pytest.approx(gym_episode["reward"]) and total == pytest.approx(gym_episode["reward"])
    assert result.observation["info"]["reward_breakdown"] == pytest.approx(gym_episode["breakdown"])
    assert result.observation["terminated"] and turns == gym_episode["turns"]
    assert a_state["done"] and a_state["reward"] == pytest.approx(gym_episode["reward"]) and a_state["step_count"] == turns
    # B kept going while A's submit (probe + backend) was in flight, at interactive speed.
    assert waited > LATENCY and len(latencies) >= 5, (waited, latencies)
    assert max(latencies) < 1.0, latencies
    # Isolated: B's job.toml is its own, and the sessions are different episodes.
    assert b_job == "B's job"
    assert a_state["run_id"] != b_state["run_id"] and b_state["seed"] == 1 and not b_state["done"]


@needs_openenv
def test_malformed_actions_are_error_observations_not_server_errors(url):
    from openenv import GenericEnvClient

    malformed = [
        {"message": "no tool call here"},
        {"message": '{"name": "read_file", "arguments": "{not json"}'},
        {"message": 5},
        {"message": {"name": "rm_rf", "arguments": {}}},
        {"name": "read_file", "arguments": {"path": 3}},  # a bare call with a bad argument
        {"unexpected": "fields"},
        {"type": "call_tool", "tool_name": "read_file", "arguments": {"path": "missing.txt"}},
    ]

    async def play():
        async with GenericEnvClient(base_url=url) as env:
            await env.reset(seed=SEED, family=FAMILY)
            results = [await env.step(action) for action in malformed]
            with pytest.raises(RuntimeError, match="unknown reset arguments: colour"):
                await env.reset(colour="blue")
            after = await env.step({"name": "list_files", "arguments": {}})  # the session survives
            return results, after, await env.state()

    results, after, state = asyncio.run(play())
    for action, result in zip(malformed, results):
        assert not result.observation["info"]["ok"] and result.reward == 0.0 and not result.done, action
        assert result.observation["text"].startswith(("error", "refused")), (action, result.observation["text"])
    assert after.observation["info"]["ok"] and state["step_count"] == len(malformed) + 1  # each cost a turn
    # Over HTTP: a body that is not an action is a 422, an action without an episode an observation.
    assert httpx.post(f"{url}/step", json={"nope": 1}).status_code == 422
    stateless = httpx.post(f"{url}/step", json={"action": {"garbage": True}})
    assert stateless.status_code == 200 and stateless.json()["done"]


@needs_openenv
def test_health_schema_metadata_and_the_session_cap(url):
    from openenv import GenericEnvClient

    assert httpx.get(f"{url}/health").json()["status"] == "healthy"
    schema = httpx.get(f"{url}/schema").json()
    assert schema["action"]["title"] == "TrainerAction" and schema["action"]["required"] == ["message"]
    assert {"text", "info", "terminated", "truncated", "reward", "done"} <= set(schema["observation"]["properties"])
    assert httpx.get(f"{url}/metadata").json()["name"] == "trainergym"
    # What `openenv validate --url` checks (openapi version, health, metadata, schema, /mcp, mode).
    from openenv.cli._validation import validate_running_environment

    report = validate_running_environment(url)
    assert report["passed"] and report["standard_profile"] == "openenv-http/1.x", report["summary"]

    async def crowd():
        clients = [GenericEnvClient(base_url=url) for _ in range(4)]  # the server holds 4
        try:
            for c in clients:
                await c.connect()
                await c.state()
            assert await refused(url)
        finally:
            for c in clients:
                await c.close()

    asyncio.run(crowd())


async def refused(base: str) -> bool:
    """Whether a new session is turned away: the server's first word on /ws is CAPACITY_REACHED
    (OpenEnv's client may see only the close that follows, depending on timing)."""
    from websockets.asyncio.client import connect

    async with connect(base.replace("http://", "ws://") + "/ws") as ws:
        return json.loads(await ws.recv())["data"]["code"] == "CAPACITY_REACHED"


# --- verifiers' OpenEnvTaskset -------------------------------------------------------------------
class _Trace:
    def __init__(self):
        self.rewards, self.stop_condition = {}, None

    def stop(self, condition, override=False):
        self.stop_condition = condition

    def record_reward(self, name, value, weight=1.0):
        self.rewards[name] = value


class _Interaction:
    """A scripted player standing in for a model behind a harness: each turn answers the next
    reply; `payloads` keeps what verifiers showed the model."""

    def __init__(self, replies):
        self.replies, self.payloads, self.trace = iter(replies), [], _Trace()

    async def turn(self, message=None):
        from verifiers.v1.agent import Segment
        from verifiers.v1.types import AssistantMessage

        self.payloads.append(json.loads(message))
        reply = next(self.replies, None)
        if reply is None:
            return Segment(messages=[], terminated=True)
        return Segment(messages=[AssistantMessage(content=reply)])


@needs_openenv
def test_verifiers_openenv_taskset_plays_an_episode_over_loopback(url, gym_episode):
    """verifiers' own OpenEnvTaskset loads the task and OpenEnvEnv.run drives our server with
    OpenEnv's GenericEnvClient; the model is scripted (a harness needs PyPI for its uv script):
    the reference agent's calls, the first as <tool_call> markup, the rest as bare JSON."""
    from verifiers.v1.tasksets.openenv import OpenEnvConfig, OpenEnvEnv, OpenEnvTaskset

    (task,) = list(OpenEnvTaskset(OpenEnvConfig(base_url=url, resets=[{"seed": SEED, "family": FAMILY}])))
    actions = reference_actions()
    replies = [f"<tool_call>{next(actions)}</tool_call>"] + [next(actions) for _ in range(gym_episode["turns"] - 1)]
    interaction = _Interaction(replies)

    @contextlib.asynccontextmanager
    async def open_interaction(_task):
        yield interaction

    agents = SimpleNamespace(player=SimpleNamespace(interaction=open_interaction))
    env = object.__new__(OpenEnvEnv)  # run() reads only its arguments; no taskset loading needed
    asyncio.run(env.run(task, agents))

    assert interaction.trace.rewards["openenv_reward"] == pytest.approx(gym_episode["reward"])
    shown = interaction.payloads[0]
    assert shown["action_schema"]["title"] == "TrainerAction"
    assert shown["observation"]["text"].startswith(f"TASK {FAMILY}")
    assert len(interaction.payloads) == gym_episode["turns"]  # one model turn per env step, none after the end


# --- the container's entrypoint and `trainergym serve` -------------------------------------------
def _serve_and_play(argv, env=None):
    """Start a server process, wait for /health, play reset + one step with our typed client,
    check the session cap from the settings, stop it (SIGTERM, as `docker stop` does)."""
    from trainergym.adapters.openenv import TrainerEnvClient

    port = free_port()
    proc = subprocess.Popen([*argv, "--host", "127.0.0.1", "--port", str(port)], env={**os.environ, **(env or {})},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.stdout.read()
            assert time.monotonic() < deadline, "no /health within 60 s"
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            time.sleep(0.2)

        async def play():
            async with TrainerEnvClient(base_url=base) as env:
                first = await env.reset(seed=SEED, family=FAMILY)
                step = await env.step('<tool_call>{"name": "get_baseline_scores", "arguments": {}}</tool_call>')
                assert await refused(base)  # max sessions 1, from the settings
                return first, step, await env.state()

        first, step, state = asyncio.run(play())
        assert first.observation.info["tool_schemas"] and step.observation.info["ok"] and step.reward == 0.0
        assert "workspace" not in first.observation.info  # the server host's path is not the client's
        assert json.loads(step.observation.text)["family"] == FAMILY and state.step_count == 1
    finally:
        proc.terminate()
        try:
            out, _ = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
    assert proc.returncode in (0, -15), out
    assert "Traceback" not in out, out


@needs_openenv
def test_the_container_entrypoint_serves_the_app():
    """The Dockerfile's CMD, on the host, configured as a container is: TRAINERGYM_SERVE_*."""
    _serve_and_play([sys.executable, "-m", "trainergym.adapters.openenv"],
                    env={"TRAINERGYM_SERVE_MAX_SESSIONS": "1", "TRAINERGYM_SERVE_BACKEND": "mock"})


@needs_openenv
def test_trainergym_serve():
    script = Path(sys.executable).with_name("trainergym")  # the console script, as installed
    _serve_and_play([str(script), "serve", "--max-sessions", "1"])
