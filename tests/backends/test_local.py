"""The local backend end to end with fake GPU commands: an episode's validated job goes
through the durable queue and the runner, and comes back as a result."""

import asyncio
import sys

import pytest

from tests.fakes.jobs import write_job
from tests.fakes.gpu_host import FAKE_SCORE, FAKE_TRAIN
from trainergym import AsyncTrainerEnv
from trainergym.agents import make_agent, run_episode
from trainergym.backends.local import LocalBackend
from trainergym.job.bundle import build_bundle, parse_job
from trainergym.host.runner import Commands


@pytest.fixture
def backend(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINERGYM_ALLOW_UNCONFINED", "1")
    (tmp_path / "train.py").write_text(FAKE_TRAIN)
    (tmp_path / "score.py").write_text(FAKE_SCORE)

    def make(train_mode="ok"):
        commands = Commands(setup=["true"], train=[sys.executable, str(tmp_path / "train.py"), train_mode, "{run_dir}"],
                            score=[sys.executable, str(tmp_path / "score.py"), "--weights", "{weights}", "--items",
                                   "{eval_file}", "--out", "{score_file}", "--mode", "ok", "--log", str(tmp_path / "s.log")])
        return LocalBackend(tmp_path / f"local-{train_mode}", commands=commands, gpu="NVIDIA A40", gpu_count=2,
                            poll_seconds=0.1, confinement="none")  # the fake trainer runs under sys.executable
    return make


def test_local_backend_runs_an_episode(backend):
    local = backend()
    env = AsyncTrainerEnv(backend=local)
    info = asyncio.run(run_episode(env, make_agent("reference")))
    result = info["result"]
    assert result["status"] == "succeeded" and result["source"] == "measured" and result["eval_n"] == 200
    assert (result["pre"], result["post"]) == (0.5, 0.75)
    assert info["reward_breakdown"]["validated"] and info["reward_breakdown"]["post"] == 0.75
    assert local.queue.counts() == {"done": 1}
    env.close()
    local.close()


def test_failures_and_dedupe_and_cancel(backend, tmp_path, task, reference_files):
    local = backend("oom")
    write_job(tmp_path / "ws", reference_files)
    job, _ = parse_job(reference_files["job.toml"])
    bundle = build_bundle(tmp_path / "ws", tmp_path / "bundle", job, task)

    async def go():
        handle = await local.submit(bundle, task)
        assert (await local.submit(bundle, task)).job_id == handle.job_id  # deduped by content hash
        result = await local.result(handle, timeout=60)
        assert result.status == "failed" and result.failure_reason == "out of memory" and "OutOfMemoryError" in result.log_tail
        assert local.queue.get(handle.job_id).attempts == 1  # a job's own failure is not retried
        local.queue.enqueue("other-hash", task.id, bundle.root, family=task.family, base_model=job.job.base_model)
        other = local.queue.jobs("queued")[0]
        from trainergym.backends import JobHandle

        h = JobHandle(job_id=other.id, content_hash="other-hash", backend="local")
        await local.cancel(h)
        await local.cancel(h)
        assert (await local.result(h, timeout=5)).status == "cancelled"

    asyncio.run(go())
    local.close()
