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
import os
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest

from trainergym.agents.reference import reference_job_files
from trainergym.task.spec import TaskSpec, family_task

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("openenv") is None, reason="needs the openenv extra"),
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


@pytest.fixture(scope="module")
def crafted_then_honest(server):
    """One session: the reference job on a client-crafted calc_chain TaskSpec (a 1000 GPU-hour
    budget), then, after a reset to the operator's calc_chain, the same job again."""
    async def go():
        async with session(server) as s:
            r = await s.reset(seed=SEED, task=crafted_task(bounds={"gpu_hours": 1000.0}))
            assert r["type"] == "observation", r
            crafted = await play_reference(s)
            r = await s.reset(seed=SEED, family=FAMILY)
            assert r["type"] == "observation", r
            again = await play_reference(s)
            return crafted, again
    return run(go())


def breakdown(final: dict) -> dict:
    return final["observation"]["info"]["reward_breakdown"]


# --- 1. a crafted TaskSpec in reset's `task` ------------------------------------------------------
@pytest.mark.xfail(strict=True, reason="OpenEnv reset accepts any client TaskSpec (openenv.py reset_async -> "
                                       "TaskSpec.model_validate): a larger bounds.gpu_hours pays the same job more")
def test_crafted_taskspec_bounds_do_not_pay_more(honest, crafted_then_honest):
    crafted, _ = crafted_then_honest
    assert breakdown(honest["final"])["validated"] and breakdown(crafted)["validated"]
    # same job, same seed (so the same eval-noise draw): only the client's bounds differ
    assert crafted["reward"] <= honest["final"]["reward"] + 1e-9, (crafted["reward"], honest["final"]["reward"])


@pytest.mark.xfail(strict=True, reason="the mock's reuse cache is keyed by the bundle's content hash only "
                                       "(mock.py MockBackend.submit/_by_hash): a result simulated under one "
                                       "task's bounds is paid again in another task's episode")
def test_a_result_under_other_bounds_is_not_reused(honest, crafted_then_honest):
    _, again = crafted_then_honest
    h, a = breakdown(honest["final"]), breakdown(again)
    assert a["post_expected"] == h["post_expected"] and again["reward"] == honest["final"]["reward"], (a, h)


def test_crafted_taskspec_cannot_name_an_unknown_family_or_model(server):
    async def go():
        async with session(server) as s:
            bad_family = await s.reset(task=crafted_task(family="nope"))
            task_file = await s.reset(task="examples/tasks/anything.toml")
            unknown = await s.reset(family=FAMILY, runs_dir="/tmp", workdir="/tmp")
            ok = await s.reset(family=FAMILY)
        async with session(server) as s:
            try:
                bad_model = await s.reset(task=crafted_task(bounds={"base_models": ["gpt2"]}))
            except Exception as e:  # the session may end (see the next test): still refused
                bad_model = {"type": "error", "data": {"message": repr(e)}}
        return bad_family, bad_model, task_file, unknown, ok
    bad_family, bad_model, task_file, unknown, ok = run(go())
    assert bad_family["type"] == bad_model["type"] == task_file["type"] == unknown["type"] == "error"
    assert "nope" in bad_family["data"]["message"]
    assert ok["type"] == "observation"  # the session survives its refused resets


@pytest.mark.xfail(strict=True, reason="a TaskSpec that fails validation raises pydantic's ValidationError out of "
                                       "reset_async (openenv.py); openenv 0.4.1's /ws handler cannot serialize its "
                                       "errors() (a ValueError in ctx) and ends the session with SESSION_ERROR")
def test_an_invalid_taskspec_is_an_error_reply_and_the_session_goes_on(server):
    async def go():
        async with session(server) as s:
            bad = await s.reset(task=crafted_task(bounds={"base_models": ["gpt2"]}))
            ok = await s.reset(family=FAMILY)
            return bad, ok
    bad, ok = run(go())
    assert bad["type"] == "error" and ok["type"] == "observation"


# --- 2. reset's `seed` picks the surrogate's eval noise -----------------------------------------
@pytest.mark.xfail(strict=True, reason="the mock's eval noise is drawn from (backend seed, 'seed:<reset seed>') "
                                       "(core.py _train, mock.py eval_noise): a client that picks the reset seed "
                                       "picks a lucky +3 sigma eval draw")
def test_a_chosen_seed_does_not_buy_a_lucky_eval(server):
    from trainergym.backends.mock import eval_noise
    from trainergym.task import hidden

    pre = 0.742  # calc_chain's untrained Qwen3-1.7B (the reference job's model)
    lucky = max(range(2000), key=lambda s: eval_noise(0.8, pre, 0, f"seed:{s}", hidden.HIDDEN_EVAL_SIZE)[1])
    sigma = (pre * (1 - pre) / hidden.HIDDEN_EVAL_SIZE) ** 0.5

    async def go():
        async with session(server) as s:
            await s.reset(seed=lucky, family=FAMILY)
            return await play_reference(s)
    b = breakdown(run(go()))
    assert b["post"] - b["post_expected"] < 2 * sigma, (lucky, b["post"], b["post_expected"])


# --- 3. a crafted task id writes outside the runs dir -------------------------------------------
@pytest.mark.xfail(strict=True, reason="the episode id starts with the client's TaskSpec.id (core.py reset) and "
                                       "_save_run writes runs_dir / episode.id: an absolute or ../ id writes the "
                                       "run record anywhere")
def test_a_task_id_cannot_place_the_run_record_outside_runs_dir(server, runs_dir):
    outside = runs_dir.parent / "outside"
    outside.mkdir()

    async def go():
        async with session(server) as s:
            r = await s.reset(task=crafted_task(id=str(outside / "pwn"), max_turns=1))
            assert r["type"] == "observation", r
            return await s.step({"name": "list_files", "arguments": {}})
    out = run(go())
    assert out["data"]["done"]
    escaped = list(outside.glob("pwn-*/reward.json"))
    assert not escaped, escaped


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
@pytest.mark.xfail(strict=True, reason="OpenEnv's stateless POST /reset calls reset_async unguarded: a bad "
                                       "family, task or option raises (openenv.py reset_async) and is an HTTP 500")
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


@pytest.mark.xfail(strict=True, reason="a step's message may hold any number of calls (actions.py caps only "
                                       "string length; core.py step runs them all) and the file tools run on the "
                                       "server's event loop: one message stalls every other session")
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
@pytest.mark.xfail(strict=True, reason="TrainerTRLEnv.reset takes the row's `task` as a family id or ANY task-file "
                                       "path on the host (trl.py reset -> spec.load_task), unlike OpenEnv's reset: "
                                       "a row can point at a file with easier bounds")
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
