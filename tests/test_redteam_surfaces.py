"""Red-team attempts on the agent-driving surfaces: the OpenEnv server (`trainergym serve`,
trainergym.adapters.openenv) and the TRL environment (trainergym.adapters.trl).

Every attempt is made only as a client could: WebSocket reset/step messages and OpenEnv's
stateless HTTP routes over loopback, or a TRL dataset row and the TRL tool methods. An attack that
works is marked `xfail(strict=True)` with the hole in its reason (so fixing the hole turns the
test into a failure that asks for the marker to go); an attack that is refused is a plain test.

One server (mock backend, reward noise on, a runs dir) serves the module; the reference job is
probed four times in all (~5 s each)."""

import asyncio
import contextlib
import importlib.util
import json
import socket
import threading
import time

import httpx
import pytest

from trainergym.agents.reference import reference_job_files
from trainergym.task.spec import TaskSpec, family_task
from tests.marks import extra_reason

pytestmark = [
    pytest.mark.slow,
    pytest.mark.extras,
    pytest.mark.skipif(importlib.util.find_spec("openenv") is None, reason=extra_reason("the OpenEnv red team", "openenv")),
]

FAMILY = "calc_chain"
SEED = 0


# --- the server and a raw WebSocket client -----------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def _running(settings):
    import uvicorn

    from trainergym.adapters.openenv import build_app

    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(build_app(settings), host="127.0.0.1", port=port, log_level="critical"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("redteam") / "runs"


@pytest.fixture(scope="module")
def server(runs_dir):
    from trainergym.adapters.openenv import ServeSettings

    runs_dir.mkdir(parents=True)
    with _running(ServeSettings(max_sessions=8, runs_dir=runs_dir)) as host:
        yield host


class Session:
    """One `/ws` connection: one OpenEnv session."""

    def __init__(self, ws):
        self.ws = ws

    async def send(self, payload, timeout=120) -> dict:
        await self.ws.send(payload if isinstance(payload, str) else json.dumps(payload))
        return json.loads(await asyncio.wait_for(self.ws.recv(), timeout))

    async def reset(self, **data) -> dict:
        return await self.send({"type": "reset", "data": data})

    async def step(self, message) -> dict:
        return await self.send({"type": "step", "data": {"message": message}})


@contextlib.asynccontextmanager
async def session(host):
    import websockets

    async with websockets.connect(f"ws://{host}/ws", max_size=None) as ws:
        yield Session(ws)


def run(coro):
    return asyncio.run(coro)


def crafted_task(**overrides) -> dict:
    """calc_chain's own TaskSpec, as JSON, with `overrides` merged in: what a client can send as
    reset's `task`."""
    spec = TaskSpec.model_validate(family_task(FAMILY)).model_dump(mode="json")
    for key, value in overrides.items():
        spec[key] = {**spec[key], **value} if isinstance(value, dict) and isinstance(spec.get(key), dict) else value
    return spec


REFERENCE_WRITES = [{"name": "write_file", "arguments": {"path": p, "content": c}}
                    for p, c in reference_job_files(FAMILY).items()]


async def play_reference(s: Session) -> dict:
    """Write the reference job (one turn), submit it; returns the final step's payload."""
    out = await s.step(REFERENCE_WRITES)
    assert out["type"] == "observation" and out["data"]["observation"]["info"]["ok"], out
    out = await s.step({"name": "submit_job", "arguments": {}})
    assert out["type"] == "observation" and out["data"]["done"], out
    return out["data"]


@pytest.fixture(scope="module")
def honest(server):
    """The reference job on calc_chain as the operator defines it, at SEED; then one more step."""
    async def go():
        async with session(server) as s:
            first = await s.reset(seed=SEED, family=FAMILY)
            assert first["type"] == "observation"
            final = await play_reference(s)
            after = await s.step({"name": "submit_job", "arguments": {}})
            state = await s.send({"type": "state"})
            return {"final": final, "after": after["data"], "state": state["data"]}
    return run(go())


def breakdown(final: dict) -> dict:
    return final["observation"]["info"]["reward_breakdown"]


# --- 1. a crafted TaskSpec in reset's `task` ------------------------------------------------------
def test_a_client_cannot_choose_the_task(server):
    # Once: any client TaskSpec was taken (1000 GPU-hours paid the same job 0.706 instead of 0.648;
    # a ../ id wrote the run record outside runs_dir). Now only the operator chooses a task.
    async def go():
        async with session(server) as s:
            replies = [await s.reset(task=crafted_task(bounds={"gpu_hours": 1000.0})),
                       await s.reset(task=crafted_task(bounds={"base_models": ["gpt2"]})),
                       await s.reset(task=crafted_task(family="nope")),
                       await s.reset(task="examples/tasks/anything.toml"),
                       await s.reset(family="nope"),
                       await s.reset(family=FAMILY, runs_dir="/tmp", workdir="/tmp")]
            ok = await s.reset(family=FAMILY)
            return replies, ok
    replies, ok = run(go())
    assert [r["type"] for r in replies] == ["error"] * 6, replies
    assert "nope" in replies[4]["data"]["message"]
    assert ok["type"] == "observation"  # the session survives its refused resets


def test_a_result_under_other_bounds_is_not_reused(tmp_path):
    # The mock's reuse cache was keyed by the bundle's hash only: a result simulated under one
    # task's bounds was paid again under another's (callers of the Python API still pass TaskSpecs).
    from trainergym.backends.mock import MockBackend
    from trainergym.job.bundle import build_bundle, parse_job
    from tests.fakes.jobs import write_job

    files = reference_job_files(FAMILY)
    write_job(tmp_path / "ws", files)
    spec = TaskSpec.model_validate(family_task(FAMILY))
    # A budget that stops training early (a generous one no longer differs: under the measured H200
    # throughput the reference finishes within the family's own budget).
    poor = TaskSpec.model_validate(crafted_task(bounds={"gpu_hours": 0.02}))
    bundle = build_bundle(tmp_path / "ws", tmp_path / "b", parse_job(files["job.toml"])[0], spec)
    mock = MockBackend()

    async def go():
        first = await mock.result(await mock.submit(bundle, poor))
        second = await mock.result(await mock.submit(bundle, spec))
        return first, second
    first, second = run(go())
    assert "+" not in second.job_id  # simulated afresh under its own task, not a delivery of the first result
    assert second.details["post_expected"] != first.details["post_expected"]  # its own bounds, its own outcome


# --- 2. reset's `seed` picks the surrogate's eval noise -----------------------------------------
def test_a_chosen_seed_does_not_buy_a_lucky_eval(server):
    # Once drawn from (backend seed, reset seed) alone: a seed searched offline bought a +4 sigma
    # eval. Now the installation's secret keys the draw too; search as an outsider would.
    import hashlib
    import math
    import random

    from trainergym.task import hidden

    pre, n = 0.742, hidden.HIDDEN_EVAL_SIZE  # calc_chain's untrained Qwen3-1.7B (the reference job's model)

    def outsider_noise(seed: int) -> float:  # the old key: all an outsider can compute
        rng = random.Random(hashlib.sha256(f"0:seed:{seed}".encode()).digest())
        return rng.gauss(0.0, math.sqrt(pre * (1 - pre) / n))
    lucky = max(range(2000), key=outsider_noise)
    sigma = (pre * (1 - pre) / n) ** 0.5

    async def go():
        async with session(server) as s:
            await s.reset(seed=lucky, family=FAMILY)
            return await play_reference(s)
    b = breakdown(run(go()))
    assert b["post"] - b["post_expected"] < 2.5 * sigma, (lucky, b["post"], b["post_expected"])


# --- 3. a crafted task id writes outside the runs dir -------------------------------------------
def test_a_task_id_cannot_place_the_run_record_outside_runs_dir(tmp_path):
    from trainergym import AsyncTrainerEnv

    outside = tmp_path / "outside"
    env = AsyncTrainerEnv(runs_dir=tmp_path / "runs")
    spec = TaskSpec.model_validate(crafted_task(id=str(outside / "pwn"), max_turns=1))
    run(env.reset(options={"task": spec}))
    run(env.step({"name": "list_files", "arguments": {}}))
    env.close()
    assert not outside.exists() and len(list((tmp_path / "runs").glob("*/reward.json"))) == 1


# --- 4. paid once -----------------------------------------------------------------------------------
def test_a_finished_episode_pays_nothing_more(honest):
    assert honest["final"]["reward"] == breakdown(honest["final"])["total"] != 0
    assert honest["after"]["reward"] == 0.0 and honest["after"]["done"]
    assert "over" in honest["after"]["observation"]["text"]
    assert honest["state"]["reward"] == honest["final"]["reward"]


# --- 5. files outside the workspace ---------------------------------------------------------------
def test_the_file_tools_stay_in_the_workspace(server):
    from trainergym.paths import data_dir

    target = data_dir() / "baselines.toml"
    calls = [{"name": "read_file", "arguments": {"path": "/etc/passwd"}},
             {"name": "read_file", "arguments": {"path": "../../../../../../etc/passwd"}},
             {"name": "list_files", "arguments": {"path": ".."}},
             {"name": "write_file", "arguments": {"path": str(target), "content": "version = 1\n"}},
             {"name": "write_file", "arguments": {"path": "../../../x.toml", "content": "x = 1\n"}},
             {"name": "edit_file", "arguments": {"path": "/etc/hostname", "old_string": "a", "new_string": "b"}}]

    async def go():
        async with session(server) as s:
            await s.reset(family=FAMILY)
            return await s.step(calls)
    out = run(go())
    results = out["data"]["observation"]["info"]["calls"]
    assert len(results) == len(calls) and not any(c["ok"] for c in results), results
    assert "root:" not in out["data"]["observation"]["text"]
    assert not target.exists()


# --- 6. malformed input ----------------------------------------------------------------------------
def test_a_bad_stateless_reset_is_a_client_error_not_a_500(server):
    codes = [httpx.post(f"http://{server}/reset", json=body, timeout=30).status_code
             for body in ({"family": "nope"}, {"task": {"id": 1}}, {"famly": FAMILY})]
    assert all(code < 500 for code in codes), codes


def test_malformed_frames_end_at_most_their_own_session(server):
    """Garbage on one socket (not JSON, not an object, a wrong type, a bad step) gets an error or
    closes that socket; another session is untouched, and the server still answers."""
    import websockets

    async def go():
        async with session(server) as b:
            await b.reset(family=FAMILY)
            replies = []
            for frame in ("not json", '{"type": "step", "data": [1]}', '{"type": "bogus"}',
                          json.dumps({"type": "step", "data": {"message": 5}}),
                          json.dumps({"type": "step", "data": {"message": "[" * 50_000}}),
                          json.dumps({"type": "reset", "data": {"seed": "x"}}), "[]"):
                async with session(server) as a:
                    try:
                        if frame.startswith('{"type": "step"') or "message" in frame:
                            await a.reset(family=FAMILY)
                        replies.append(await a.send(frame, timeout=30))
                    except websockets.ConnectionClosed:
                        replies.append({"type": "closed"})
            still = await b.step({"name": "list_files", "arguments": {}})
            return replies, still
    replies, still = run(go())
    assert all(r["type"] in {"error", "observation", "closed"} for r in replies), replies
    assert still["type"] == "observation" and still["data"]["observation"]["info"]["ok"]
    assert httpx.get(f"http://{server}/health", timeout=10).status_code == 200


def test_one_session_cannot_stall_the_others(server):
    flood = [{"name": "list_files", "arguments": {}}] * 20_000

    async def go():
        async with session(server) as a, session(server) as b:
            await a.reset(family=FAMILY)
            await b.reset(family=FAMILY)
            await b.step({"name": "list_files", "arguments": {}})  # warm
            await a.ws.send(json.dumps({"type": "step", "data": {"message": flood}}))
            await asyncio.sleep(0.2)
            t = time.monotonic()
            await b.step({"name": "list_files", "arguments": {}})
            waited = time.monotonic() - t
            await asyncio.wait_for(a.ws.recv(), 120)
            return waited
    waited = run(go())
    assert waited < 1.0, f"session B waited {waited:.1f} s for a list_files"


# --- 7. the TRL environment's dataset row ------------------------------------------------------------
needs_trl = pytest.mark.skipif(importlib.util.find_spec("trl") is None, reason="needs the trl extra")


@needs_trl
def test_a_dataset_row_cannot_load_an_arbitrary_task_file(tmp_path):
    from trainergym.adapters.trl import TrainerTRLEnv

    evil = tmp_path / "evil.toml"
    evil.write_text(f'family = "{FAMILY}"\nmax_turns = 10000\nmax_submit_attempts = 1000\n'
                    '[bounds]\ngpu_hours = 1000.0\n')
    env = TrainerTRLEnv()
    try:
        with pytest.raises(Exception):
            env.reset(prompt=[], task=str(evil), seed=0)
    finally:
        if env.env.episode is not None:
            assert env.env.episode.task.bounds.gpu_hours == 1000.0  # it was loaded
        env.env.close()


@needs_trl
def test_a_dataset_row_does_not_leak_a_host_file(tmp_path):
    from trainergym.adapters.trl import TrainerTRLEnv

    secret = tmp_path / "secret.toml"
    secret.write_text('token = "s3cr3t-value"\n')
    broken = tmp_path / "broken"
    broken.write_text("s3cr3t-value and more\n")
    env = TrainerTRLEnv()
    try:
        for path in (secret, broken, tmp_path / "missing.toml"):
            with pytest.raises(Exception) as e:
                env.reset(prompt=[], task=str(path), seed=0)
            assert "s3cr3t" not in str(e.value)
    finally:
        env.env.close()


@needs_trl
def test_trl_pays_an_episode_once():
    from trainergym.adapters.trl import TrainerTRLEnv

    records = []
    env = TrainerTRLEnv(on_episode_end=records.append)
    try:
        env.reset(prompt=[], task=FAMILY, seed=0)
        env.list_files()
        first = env.get_reward()
        assert env.get_reward() == first and len(records) == 1
        assert "over" in env.submit_job()
        assert env.get_reward() == first and len(records) == 1
    finally:
        env.env.close()
