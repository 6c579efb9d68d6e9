import asyncio
import json
import os
import re
from pathlib import Path

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import trainergym
from trainergym import AsyncTrainerEnv, TrainerEnv
from trainergym.agents import make_agent, run_episode
from trainergym.env.workspace import Workspace


def test_registered_and_passes_gymnasium_checker():
    env = gym.make(trainergym.ENV_ID)
    check_env(env.unwrapped)
    env.close()


def test_tool_schemas_are_openai_functions():
    schemas = AsyncTrainerEnv().tool_schemas
    assert [s["function"]["name"] for s in schemas] == ["read_file", "write_file", "edit_file", "list_files",
                                                          "get_baseline_scores", "submit_job"]
    for s in schemas:
        assert s["type"] == "function" and s["function"]["parameters"]["type"] == "object"
    edit = next(s for s in schemas if s["function"]["name"] == "edit_file")["function"]["parameters"]
    assert edit["required"] == ["path", "old_string", "new_string"]


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory):
    runs = tmp_path_factory.mktemp("runs")
    env = TrainerEnv(runs_dir=runs)
    obs, info = env.reset(seed=1, options={"family": "calc_chain"})
    agent = make_agent("reference")
    agent.reset(obs, info)
    steps = []
    while True:
        step = env.step(agent.act(obs, info))
        steps.append(step)
        obs, reward, terminated, truncated, info = step
        if terminated or truncated:
            break
    yield env, steps
    env.close()


def test_reference_episode_validates_first_try_and_ends_with_reward(reference_run):
    env, steps = reference_run
    obs, reward, terminated, truncated, info = steps[-1]
    assert terminated and not truncated
    r = info["reward_breakdown"]
    assert r["validation"] == 1.0 and r["attempts"] == 1 and r["job_status"] == "succeeded"
    assert reward == pytest.approx(r["total"]) and reward > 0.35
    assert info["result"]["source"] == "surrogate"
    assert all(s[1] == 0.0 for s in steps[:-1])  # reward only at the end
    assert "[surrogate]" in obs and "VALID" in obs
    first = steps[0][4]
    assert first["tool"] == ["list_files"] and first["ok"] and first["turns_left"] == 39 and first["attempts_left"] == 3


def test_run_directory_holds_the_record(reference_run):
    env, steps = reference_run
    run = env.inner.run_path
    rows = [json.loads(line) for line in (run / "trajectory.jsonl").read_text().splitlines()]
    assert rows[0]["event"] == "reset" and len(rows) == len(steps) + 1
    assert (run / "workspace" / "taskset" / "chains.py").is_file()
    manifest = json.loads((run / "manifest.json").read_text())
    result = json.loads((run / "result.json").read_text())
    assert manifest["content_hash"] == result["content_hash"] and manifest["probe"]["reward_separation"] == 1.0


def test_step_after_the_end_and_before_reset_do_not_raise(reference_run):
    env, _ = reference_run
    obs, reward, terminated, _, info = env.step({"name": "list_files", "arguments": {}})
    assert terminated and reward == 0.0 and "reset" in obs
    fresh = TrainerEnv()
    obs, *_ = fresh.step("anything")
    assert "reset" in obs
    fresh.close()


def test_naive_exhausts_attempts_with_cached_identical_resubmissions():
    async def go():
        env = AsyncTrainerEnv()
        info = await run_episode(env, make_agent("naive"), options={"task": Path(__file__).parents[2] / "examples/tasks/calc_chain.toml"})
        ep = env.episode
        assert ep.attempts == 3 and ep.valid_on_attempt is None and info["attempts_left"] == 0
        assert info["reward_breakdown"]["total"] == 0.0  # parseable but never valid
        last = ep.trajectory[-1]["observation"]
        assert "byte-identical" in last and "No attempts left" in last
        env.close()
    asyncio.run(go())


def test_max_turns_truncates_and_no_submission_scores_minus_point_one(tmp_path):
    task = tmp_path / "t.toml"
    task.write_text('family = "calc_chain"\nmax_turns = 3\n')
    env = TrainerEnv(task=task)
    env.reset()
    env.step({"name": "write_file", "arguments": {"path": "job.toml", "content": "not toml ["}})
    env.step("garbage")
    obs, reward, terminated, truncated, info = env.step("<tool_call>{\"name\": \"list_files\"}</tool_call>")
    assert truncated and not terminated and "Out of turns" in obs
    assert reward == -0.1 and info["reward_breakdown"]["note"] == "no parseable submission"
    env.close()


def test_several_calls_in_one_message_run_in_order():
    env = TrainerEnv()
    env.reset()
    text = ('<tool_call>{"name": "write_file", "arguments": {"path": "notes.md", "content": "hi"}}</tool_call>'
            '<tool_call>{"name": "read_file", "arguments": {"path": "notes.md"}}</tool_call>'
            '<tool_call>{"name": "nope", "arguments": {}}</tool_call>')
    obs, reward, terminated, truncated, info = env.step(text)
    assert info["tool"] == ["write_file", "read_file", "nope"] and not info["ok"]
    assert "[read_file] hi" in obs and "unknown tool 'nope'" in obs and info["turns_left"] == 39
    env.close()


def test_get_baseline_scores_has_provenance():
    env = TrainerEnv()
    env.reset()
    obs, *_ = env.step({"name": "get_baseline_scores", "arguments": {}})
    data = json.loads(obs)
    assert data["best_pre"] == 0.742 and data["best_model"] == "Qwen/Qwen3-1.7B"
    assert {row["source"] for row in data["scores"]} == {"reported", "surrogate"}
    env.close()


def test_reset_with_a_taskspec_object_and_unknown_family():
    env = AsyncTrainerEnv()
    spec = trainergym.load_task("calc_chain").model_copy(update={"max_turns": 7})
    obs, info = asyncio.run(env.reset(options={"task": spec}))
    assert info["turns_left"] == 7 and "calc_add" in obs
    with pytest.raises(KeyError):
        asyncio.run(env.reset(options={"family": "nope"}))
    env.close()


@pytest.mark.parametrize("call, argument", [
    ({"name": "write_file", "arguments": {"path": "taskset/x.py", "content": "a = '\ud800'"}}, "content"),
    ({"name": "write_file", "arguments": {"path": "taskset/\ud800.py", "content": "a = 1"}}, "path"),
    ({"name": "write_file", "arguments": {"path": "taskset/\udcff.py", "content": "a = 1"}}, "path"),
    ({"name": "edit_file", "arguments": {"path": "job.toml", "old_string": "[job]", "new_string": "\udfff"}}, "new_string"),
    ({"name": "edit_file", "arguments": {"path": "job.toml", "old_string": "\ud800", "new_string": "x"}}, "old_string"),
    ({"name": "read_file", "arguments": {"path": "\ud800"}}, "path"),
    ({"name": "list_files", "arguments": {"path": "taskset\udc80"}}, "path"),
])
def test_text_that_is_not_utf8_is_an_error_observation(call, argument):
    env = TrainerEnv()
    env.reset()
    before = env.inner.episode.workspace.files()
    obs, reward, terminated, truncated, info = env.step(call)
    assert re.fullmatch(rf"error: bad arguments for {call['name']}: argument '{argument}' holds text that is not "
                        r"valid UTF-8 \(a lone surrogate U\+D[89A-F][0-9A-F]{2} at character \d+\); send plain UTF-8 "
                        r"text", obs), obs
    obs.encode("utf-8")  # the observation itself can be sent on
    assert not info["ok"] and info["attempts_left"] == 3 and info["turns_left"] == 39 and not terminated
    assert env.inner.episode.workspace.files() == before
    # the same call as JSON text (how a model sends it: a \ud800 escape) is refused alike
    obs, *_ , info = env.step(json.dumps(call))
    assert f"argument '{argument}' holds text that is not valid UTF-8" in obs and info["attempts_left"] == 3
    env.close()


def test_submit_refuses_unencodable_names_and_contents_without_spending_an_attempt(monkeypatch, reference_files):
    from tests.fakes.jobs import write_job

    async def go():
        env = AsyncTrainerEnv()
        await env.reset()
        root = env.episode.workspace.root
        write_job(root, reference_files)
        bad_name = os.path.join(os.fsencode(root), b"taskset", b"\xff.py")  # only a non-tool writer can do this
        os.close(os.open(bad_name, os.O_WRONLY | os.O_CREAT, 0o644))
        obs, reward, terminated, truncated, info = await env.step({"name": "submit_job", "arguments": {}})
        assert obs == ("error: submit_job refused: the file name 'taskset/\\xff.py' is not valid UTF-8, so the job "
                       "cannot be bundled. This did not use a submit attempt (attempts left: 3).")
        assert info["attempts_left"] == 3 and env.episode.attempts == 0 and not terminated
        obs, *_ = await env.step({"name": "list_files", "arguments": {"path": "taskset"}})
        assert "taskset/\\xff.py  (0 bytes)" in obs
        os.unlink(bad_name)
        (root / "taskset" / "notes.txt").write_bytes(b"caf\xe9")
        obs, *_, info = await env.step({"name": "submit_job", "arguments": {}})
        assert obs.startswith("error: submit_job refused: taskset/notes.txt is not valid UTF-8 text (byte 3)")
        assert info["attempts_left"] == 3 and env.episode.attempts == 0
        # defence in depth: should the check miss something, the attempt is refunded
        (root / "taskset" / "notes.txt").unlink()
        os.close(os.open(bad_name, os.O_WRONLY | os.O_CREAT, 0o644))
        monkeypatch.setattr(Workspace, "encoding_problem", lambda self: None)
        obs, *_, info = await env.step({"name": "submit_job", "arguments": {}})
        assert obs.startswith("error: submit_job refused: the job holds text that is not valid UTF-8")
        assert info["attempts_left"] == 3 and env.episode.attempts == 0 and not env.episode.done
        monkeypatch.undo()
        os.unlink(bad_name)
        obs, reward, terminated, truncated, info = await env.step({"name": "submit_job", "arguments": {}})
        assert terminated and "VALID" in obs and env.episode.attempts == 1, obs
        env.close()
    asyncio.run(go())


# --- the Gymnasium face: wrappers, rendering, reuse, vector envs ----------------------------------
def test_checker_passes_with_the_ansi_render_mode():
    env = gym.make(trainergym.ENV_ID, render_mode="ansi")
    check_env(env.unwrapped)
    env.reset(seed=0)
    assert env.unwrapped.render_mode == "ansi" and env.render().startswith("=== task calc_chain, seed 0 ===")
    env.close()
    with pytest.raises(ValueError, match="render_mode"):
        TrainerEnv(render_mode="human")


def test_an_episode_cut_by_time_limit_is_ended_and_scored(tmp_path):
    env = gym.make(trainergym.ENV_ID, max_episode_steps=3, runs_dir=tmp_path)
    assert isinstance(env, trainergym.env.core.ScoreTruncated)  # outermost, above gym.make's TimeLimit
    env.reset(seed=0)
    env.step({"name": "write_file", "arguments": {"path": "job.toml", "content": "not toml ["}})
    steps = [env.step({"name": "list_files", "arguments": {}}) for _ in range(2)]
    (_, reward, terminated, truncated, info), inner = steps[-1], env.unwrapped.inner
    assert truncated and not terminated and steps[0][1] == 0.0
    assert inner.episode.done and reward == info["reward_breakdown"]["total"] == inner.episode.reward.total == -0.1
    assert info["truncated_reason"] == "time limit: 3 steps (TimeLimit)"
    record = transcript_records(inner.run_path)
    assert record[-1] == {"event": "end", "reason": "time limit: 3 steps (TimeLimit)", "reward": -0.1}
    assert json.loads((inner.run_path / "reward.json").read_text())["total"] == -0.1
    env.close()


def test_time_limit_applied_by_hand_under_score_truncated_and_the_env_own_limit():
    env = trainergym.env.core.ScoreTruncated(gym.wrappers.TimeLimit(TrainerEnv(), max_episode_steps=1))
    env.reset()
    _, reward, _, truncated, info = env.step({"name": "get_baseline_scores", "arguments": {}})
    assert truncated and reward == -0.1 and info["reward_breakdown"]["note"] == "no parseable submission"
    env.close()
    # the env's own turn limit at the same step: its own end, not a second one
    spec = trainergym.load_task("calc_chain").model_copy(update={"max_turns": 2})
    env = gym.make(trainergym.ENV_ID, max_episode_steps=2, task=spec)
    env.reset()
    env.step("nothing")
    obs, reward, _, truncated, info = env.step("nothing")
    assert truncated and "Out of turns" in obs and "truncated_reason" not in info and reward == -0.1
    assert env.unwrapped.inner.episode.trajectory[-1]["event"] == "step"
    env.close()


def transcript_records(run):
    from trainergym.env import transcript
    return transcript.load(run)


def test_render_ansi_is_the_transcript_of_the_saved_run(reference_run):
    from trainergym.env import transcript

    env, _ = reference_run
    env.render_mode = "ansi"
    try:
        text = env.render()
    finally:
        env.render_mode = None
    assert text == transcript.render(transcript.load(env.inner.run_path))  # one renderer, live or saved
    assert text.startswith("=== task calc_chain, seed 1 ===") and "--- turn 7 ---" in text
    assert "call write_file path=\"job.toml\"" in text and "call submit_job" in text
    assert "episode over (terminated): reward" in text
    assert env.render() is None  # no render mode


def test_reset_after_close_and_an_open_episode_is_ended_on_reset(tmp_path):
    env = TrainerEnv(runs_dir=tmp_path)
    env.reset(seed=0)
    env.step({"name": "list_files", "arguments": {}})
    first = env.inner.episode
    env.close()
    assert first.done and first.trajectory[-1]["reason"] == "the env was closed"
    obs, info = env.reset(seed=1)  # used to raise "Event loop is closed"
    assert "TASK" in obs and info["turns_left"] == 40
    env.reset(seed=2)
    second_runs = sorted(p.name for p in tmp_path.iterdir())
    assert len(second_runs) == 2  # the first episode and the one the reset ended
    env.close()


@pytest.mark.parametrize("shared_memory", [True, False])
def test_async_vector_env_returns_each_env_observation(shared_memory):
    """Gymnasium's AsyncVectorEnv reads a stock Text space's shared memory once; AnyText's own
    shared memory carries every step's text, whatever its characters."""
    vec = gym.vector.AsyncVectorEnv([lambda: gym.make(trainergym.ENV_ID)] * 2, shared_memory=shared_memory)
    try:
        obs, info = vec.reset(seed=0)
        assert [o.startswith("TASK calc_chain") for o in obs] == [True, True]
        text = "naïve ✓ 日本\n" * 3
        obs, reward, terminated, truncated, info = vec.step([
            {"name": "write_file", "arguments": {"path": "notes.md", "content": text}},
            {"name": "read_file", "arguments": {"path": "INSTRUCTIONS.md"}}])
        assert obs[0].startswith("wrote notes.md") and obs[1].startswith("# Your task")
        obs, *_ = vec.step([{"name": "read_file", "arguments": {"path": "notes.md"}},
                            {"name": "list_files", "arguments": {}}])
        assert obs[0] == text and "INSTRUCTIONS.md" in obs[1]
    finally:
        vec.close()


def test_make_vec_async_is_correct():
    vec = gym.make_vec(trainergym.ENV_ID, num_envs=2, vectorization_mode="async")
    try:
        obs, _ = vec.reset(seed=0)
        obs, *_ = vec.step([{"name": "get_baseline_scores", "arguments": {}}, {"name": "list_files", "arguments": {}}])
        assert json.loads(obs[0])["best_pre"] == 0.742 and obs[1].startswith("INSTRUCTIONS.md")
    finally:
        vec.close()


def test_a_probe_the_host_fails_costs_no_attempt_and_one_the_job_fails_does(monkeypatch, reference_files):
    """A sandbox worker the host fails stands for a host failure: the report says the probe could
    not judge the job and the attempt is refunded (nothing cached: the same job may be submitted
    again). A job that sleeps past the wall-clock limit, or burns its CPU time, fails and spends
    its attempt: a job that could choose to be not judged would probe the probe for free (red
    team). Small limits, neither race the other."""
    from functools import partial

    from tests.fakes.jobs import write_job
    from trainergym.env import core
    from trainergym.probe.checks import probe

    init = "from .chains import ChainTaskset\n\n__all__ = ['ChainTaskset']\n"

    async def submit(prelude: str, **limits):
        monkeypatch.setattr(core, "probe", partial(probe, **limits))
        env = AsyncTrainerEnv()
        await env.reset()
        write_job(env.episode.workspace.root, {**reference_files, "taskset/__init__.py": prelude + init})
        obs, reward, terminated, truncated, info = await env.step({"name": "submit_job", "arguments": {}})
        episode = env.episode
        env.close()
        return obs, info, episode

    from trainergym.probe import sandbox

    async def go():
        with monkeypatch.context() as m:
            def fails(self, package_dir, request, follow=None):
                raise sandbox.WorkerError("the confined worker stopped answering for 99 s", infra=True)
            m.setattr(sandbox.WarmWorker, "run", fails)
            obs, info, ep = await submit("")
        assert obs.startswith("NOT JUDGED") and "stopped answering" in obs, obs
        assert "did not use a submit attempt (attempts left: 3)" in obs
        assert info["attempts_left"] == 3 and ep.attempts == 0 and not ep.failed_hashes and not ep.done
        obs, info, ep = await submit("import time\ntime.sleep(60)\n", timeout=60, wall=1)
        assert obs.startswith("INVALID") and "more than 1 s of wall-clock time" in obs and "of CPU" not in obs, obs
        assert info["attempts_left"] == 2 and ep.attempts == 1
        obs, info, ep = await submit("while True:\n    pass\n", timeout=1, wall=60)
        assert obs.startswith("INVALID") and "within 1 s of CPU time" in obs, obs
        assert info["attempts_left"] == 2 and ep.attempts == 1
    asyncio.run(go())
