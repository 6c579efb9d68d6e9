"""The mini backend: a real episode trained end to end on the CPU, with the job's rewards confined.

Fast: the calc_chain reference job cut to 2 GRPO steps, one seed, an untrained micro-scale model
passed as `base_model` (a warmed-up base takes minutes to build), 8 hidden-eval items. What it
shows is the wiring: the result is measured at the mini scale with pre, post and seeds; the reward
is paid against the mini base's own pre; the job's reward ran in the probe's sandbox (a reward
that reads a host file, or raises, gets zeros and a note, not a crash).
"""

import asyncio
import json
import time

import pytest

from tests.marks import import_extra

import_extra("trl", "the mini backend", "mini")

from tests.fakes.jobs import backdoor, write_job  # noqa: E402
from trainergym.agents.reference import reference_job_files  # noqa: E402
from trainergym.backends import BackendUnavailable, make_backend  # noqa: E402
from trainergym.backends.mini import ConfinedReward, read_notes, to_probe_rollout  # noqa: E402
from trainergym.job.bundle import build_bundle, parse_job  # noqa: E402
from trainergym.job.result import RunResult  # noqa: E402
from trainergym.mini.rollout import Task  # noqa: E402
from trainergym.task.spec import get_family, load_task  # noqa: E402

pytestmark = pytest.mark.extras

FAST = {"max_steps = 60": "max_steps = 2", "warmup_steps = 10": "warmup_steps = 0"}


def short(files: dict) -> dict:
    text = files["job.toml"]
    for a, b in FAST.items():
        text = text.replace(a, b)
    return {**files, "job.toml": text}


@pytest.fixture(scope="module")
def untrained_base(tmp_path_factory):
    """A freshly initialised micro-scale Qwen3 with the family's tokenizer, as a user's directory."""
    from trainergym.mini.scale import get_scale, make_model
    from trainergym.mini.tokenizer import build_tokenizer

    path = tmp_path_factory.mktemp("base")
    tok = build_tokenizer(get_family("calc_chain"))
    make_model(get_scale("micro"), tok).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def bundle(tmp_path, files, name="b"):
    write_job(tmp_path / f"ws-{name}", files)
    job, issues = parse_job(files["job.toml"])
    assert job is not None, issues
    return build_bundle(tmp_path / f"ws-{name}", tmp_path / name, job, load_task("calc_chain"))


def backend(base):
    return make_backend("mini", device="cpu", seeds=1, eval_n=8, base_model=base)


def test_an_episode_trains_for_real_at_the_mini_scale(tmp_path, untrained_base, monkeypatch):
    from trainergym.agents.reference import ReferenceAgent
    from trainergym.agents import run_episode
    from trainergym.env.core import AsyncTrainerEnv

    monkeypatch.setattr("trainergym.agents.reference.reference_job_files",
                        lambda family: short(reference_job_files(family)))
    started = time.time()
    env = AsyncTrainerEnv(backend=backend(untrained_base), runs_dir=tmp_path / "runs")
    try:
        info = asyncio.run(run_episode(env, ReferenceAgent(), seed=0, options={"family": "calc_chain"}))
    finally:
        env.close()
    result, r = env.episode.result, info["reward_breakdown"]
    assert result is not None and result.status == "succeeded", result
    assert (result.source, result.scale, result.source_label) == ("measured", "mini", "measured (mini scale)")
    assert result.pre is not None and result.post is not None and result.eval_n == 8
    d = result.details
    assert d["seeds"] == [0] and d["n"] == 1 and d["posts"] == [result.post] and len(d["reward_curves"]["0"]) == 2
    assert d["base_source"] == "user" and any("batch_size" in u for u in d["unhonoured"])
    # the share of the job's tasks a rollout of this base can finish is measured, and said when short
    cut = any("of the job's tasks need more than" in u for u in d["unhonoured"])
    assert 0 <= d["job_tasks_fitting"] <= 1 and cut == (d["job_tasks_fitting"] < 0.95)
    assert d["reward_confinement"].startswith(("bubblewrap", "namespaces"))
    # paid against the mini base's own pre, never baselines.toml's full-scale figures
    assert r["best_pre"] == result.pre and r["best_pre_source"].startswith("measured (mini scale")
    assert r["source"] == "measured (mini scale)"
    from trainergym.infra.costs import Ledger

    billed = [row for row in Ledger().rows(env.episode.id) if row["kind"] == "gpu"]
    assert len(billed) == 1 and billed[0]["usd"] == 0 and "on the CPU" in billed[0]["note"], billed
    saved = json.loads((env.run_path / "result.json").read_text())
    assert RunResult.model_validate(saved).scale == "mini"
    from typer.testing import CliRunner

    from trainergym.cli import app

    shown = CliRunner().invoke(app, ["show", str(env.run_path)])
    assert shown.exit_code == 0, shown.stderr
    for part in ("the job's result (measured (mini scale))", "scale: mini", "source: measured (mini scale)",
                 "best_pre_source: measured (mini scale"):
        assert part in shown.stdout, part
    assert time.time() - started < 120


def _play(family, row, reply=None) -> list[dict]:
    """The family solver's rollout of `row` as the engine's messages (its reply, or `reply`)."""
    solved = family.solve(row)
    messages = []
    for k, c in enumerate(solved["calls"]):
        messages.append({"role": "assistant", "content": "", "tool_calls": [
            {"id": f"c{k}", "type": "function", "function": {"name": c["tool"], "arguments": json.dumps(c["arguments"])}}]})
        messages.append({"role": "tool", "tool_call_id": f"c{k}", "name": c["tool"], "content": str(c["result"])})
    return messages + [{"role": "assistant", "content": solved["reply"] if reply is None else reply}]


@pytest.mark.parametrize("expr", ["len(open({seed!r}).read()) + 1", "1 / 0"], ids=["reads-a-host-file", "raises"])
def test_a_reward_reading_a_host_file_or_raising_gets_zeros_and_a_note(tmp_path, expr):
    from trainergym.paths import data_dir

    seed_file = data_dir() / "a-secret"
    seed_file.write_text("s3cret")  # there on the host, in the data directory; not in the sandbox
    family = get_family("calc_chain")
    b = bundle(tmp_path, short(backdoor("calc_chain", expr.format(seed=str(seed_file)))))
    reward = ConfinedReward(b.root / "package", b.manifest.taskset_id, 10_000, 120.0, tmp_path / "notes")
    try:
        rows = reward.open()
        assert reward([Task.from_row(r) for r in rows[:4]], [_play(family, r) for r in rows[:4]]) == [0.0] * 4
    finally:
        reward.close()
    notes = read_notes(tmp_path / "notes")
    assert sum(notes.values()) == 4 and all("reward 0" in k for k in notes), notes
    assert ("FileNotFoundError" if "open" in expr else "ZeroDivisionError") in next(iter(notes))


@pytest.mark.slow
def test_a_job_whose_reward_reads_a_host_file_trains_on_zeros_with_a_note(tmp_path, untrained_base):
    from trainergym.paths import data_dir

    (data_dir() / "a-secret").write_text("s3cret")
    files = short(backdoor("calc_chain", f"len(open({str(data_dir() / 'a-secret')!r}).read()) + 1"))
    result = backend(untrained_base).run(bundle(tmp_path, files), load_task("calc_chain"))
    assert result.status == "succeeded" and result.scale == "mini", result
    notes = result.details["reward_notes"]
    assert sum(notes.values()) == 64 and all("reward 0" in k for k in notes), notes
    assert result.details["reward_curves"]["0"] == [0.0, 0.0] and "rewards were 0" in result.log_tail


def test_the_confined_reward_pays_what_the_jobs_reward_pays(tmp_path):
    """The reference job's reward, in the sandbox, on the family solver's rollout of its own task
    (as the engine's messages) and on a wrong reply; then after its session is closed."""
    family = get_family("calc_chain")
    b = bundle(tmp_path, short(dict(reference_job_files("calc_chain"))))
    reward = ConfinedReward(b.root / "package", b.manifest.taskset_id, 10_000, 120.0, tmp_path / "notes")
    rows = reward.open()
    try:
        tasks, completions = [], []
        for i in range(3):
            right = _play(family, rows[i])
            solved = family.solve(rows[i])
            assert to_probe_rollout(right)["reply"] == solved["reply"]
            assert [c["tool"] for c in to_probe_rollout(right)["calls"]] == [c["tool"] for c in solved["calls"]]
            task = Task.from_row(rows[i])
            tasks += [task, task]
            completions += [right, _play(family, rows[i], "Answer: -123456789")]
        assert reward(tasks, completions) == [1.0, 0.0] * 3
    finally:
        reward.close()
    try:
        assert reward(tasks[:1], completions[:1]) == [1.0]  # a new session in this process, after the old one
    finally:
        reward.close()  # or its sandbox outlives the test (the attack tests count what is left)


def test_worker_mini_drains_the_queue(tmp_path, untrained_base):
    from trainergym.backends.queued import enqueue_bundle
    from trainergym.infra.queue import JobQueue

    queue = JobQueue(tmp_path / "jobs.db")
    job = enqueue_bundle(queue, tmp_path / "keep", bundle(tmp_path, short(dict(reference_job_files("calc_chain")))),
                         load_task("calc_chain"))
    assert make_backend("mini", device="cpu", seeds=1, eval_n=4, base_model=untrained_base).drain(queue, once=True) == 1
    done = queue.get(job.id)
    assert done.state == "done", done.result
    assert done.result.scale == "mini" and done.result.source_label == "measured (mini scale)"
    assert done.result.details["n"] == 1 and done.result.job_id == job.id


def test_cancel_stops_a_training_job_at_its_next_reward_batch(tmp_path, untrained_base):
    files = dict(reference_job_files("calc_chain"))
    files["job.toml"] = files["job.toml"].replace("max_steps = 60", "max_steps = 200")
    b = bundle(tmp_path, files)
    mini = backend(untrained_base)

    async def go():
        handle = await mini.submit(b, load_task("calc_chain"))
        await asyncio.sleep(8)  # the session is open and training has begun (or is about to)
        await mini.cancel(handle)
        await mini.cancel(handle)  # idempotent
        return await mini.result(handle, timeout=120)

    started = time.time()
    result = asyncio.run(go())
    assert result.status == "cancelled" and result.scale == "mini", result
    assert time.time() - started < 120


def test_bad_options_say_why_in_one_line(tmp_path):
    with pytest.raises(BackendUnavailable, match="not a Hugging Face model directory"):
        make_backend("mini", base_model=tmp_path)
    with pytest.raises(BackendUnavailable, match="unknown mini scale"):
        make_backend("mini", scale="huge", device="cpu")


@pytest.mark.slow
def test_seeds_in_processes_of_their_own_each_score_in_a_sandbox_of_their_own(tmp_path, untrained_base):
    """The GPU path on the CPU: two seeds side by side in spawned processes, the reward pickled as
    its configuration; each process opens its own confined session and the notes of both come back."""
    from trainergym.mini.base import Base
    from trainergym.mini.train import train

    (tmp_path / "secret").write_text("s3cret")
    b = bundle(tmp_path, short(backdoor("calc_chain", f"len(open({str(tmp_path / 'secret')!r}).read()) + 1")))
    notes = tmp_path / "notes"
    reward = ConfinedReward(b.root / "package", b.manifest.taskset_id, 10_000, 120.0, notes)
    rows = reward.open()
    reward.close()
    family = get_family("calc_chain")
    base = Base.from_dir(untrained_base, "calc_chain", "micro")
    result = train(b.job.model_dump(), base, family, rows, reward, rows[:4], seeds=[0, 1], device="cpu", parallel=2)
    assert result.n == 2 and all(s.rewards == [0.0, 0.0] for s in result.seeds)
    assert len(list(notes.glob("notes-*.jsonl"))) == 2 and sum(read_notes(notes).values()) == 128


def test_rollouts_prices_and_eval_items():
    from trainergym.backends.mini import eval_rows, gpu_price

    call = {"role": "assistant", "content": "thinking", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "calc_add", "arguments": "not json"}}]}
    cut = to_probe_rollout([call, {"role": "tool", "tool_call_id": "c1", "name": "calc_add", "content": "3"}])
    assert cut == {"calls": [{"tool": "calc_add", "arguments": {}, "result": "3"}], "reply": ""}  # ended on a call
    assert to_probe_rollout([]) == {"calls": [], "reply": ""}
    assert gpu_price("NVIDIA A40") == 0.44 and gpu_price("NVIDIA A100-SXM4-80GB") == 1.39 and gpu_price("NVIDIA H200") == 0
    rows = eval_rows("calc_chain", "micro")
    assert rows and {r["difficulty"] for r in rows} == {1} and len(eval_rows("calc_chain", "micro", 5)) == 5
