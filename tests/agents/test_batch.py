"""Many episodes at once: the GPU-job cap holds, a crashing agent does not sink the batch, and
eval-agent prints the held-out table."""

import asyncio
import json
from pathlib import Path

from typer.testing import CliRunner

from trainergym.agents.reference import ReferenceAgent
from trainergym.backends import make_backend
from trainergym.agents.batch import held_out_table, run_many
from trainergym.cli import app


class Crashing:
    def reset(self, observation, info):
        pass

    def act(self, observation, info):
        raise ConnectionError("the endpoint is down")


class Watched:
    """A backend that records how many jobs it had in flight at once. Its first results wait
    (up to 30 s) until `hold` jobs are in flight, so the test does not hang on probe timing."""

    def __init__(self, inner, hold: int = 0):
        self.inner, self.name, self.running, self.peak, self.hold = inner, inner.name, 0, 0, hold

    async def submit(self, bundle, task):
        self.running += 1
        self.peak = max(self.peak, self.running)
        return await self.inner.submit(bundle, task)

    async def result(self, handle, timeout=None):
        for _ in range(600):
            if self.peak >= self.hold:
                break
            await asyncio.sleep(0.05)
        try:
            return await self.inner.result(handle, timeout=timeout)
        finally:
            self.running -= 1

    async def cancel(self, handle):
        await self.inner.cancel(handle)


def test_episodes_run_concurrently_under_the_gpu_cap(tmp_path):
    mock = make_backend("mock", latency=0.3, reuse=False)
    backend = Watched(mock, hold=2)
    made = []

    def agent():
        made.append(ReferenceAgent() if len(made) < 4 else Crashing())
        return made[-1]

    seen = {}
    summaries = asyncio.run(run_many(agent, backend, 5, {"family": "calc_chain"}, concurrency=5, max_gpu_jobs=2,
                                     runs_dir=tmp_path, on_done=lambda s: seen.setdefault(s.seed, s)))
    assert backend.peak == 2  # four jobs wanted the GPUs at once; two got them
    good = [s for s in summaries if s.error is None]
    assert len(good) == 4 and all(s.validated and s.job_succeeded and s.reward > 0.5 for s in good)
    assert {s.source for s in good} == {"surrogate"}
    crashed = [s for s in summaries if s.error]
    assert len(crashed) == 1 and "endpoint is down" in crashed[0].error
    table = held_out_table(summaries)
    assert table["crashed"] == 1 and table["validated"] == 1.0 and table["worst_episode"] == min(s.reward for s in good)
    assert table["sources"] == ["surrogate"]
    assert not mock.in_flight() and len(seen) == 5


def test_eval_agent_prints_the_held_out_columns(tmp_path):
    out = CliRunner().invoke(app, ["eval-agent", "--family", "triage", "--n", "2", "--agent", "naive", "--json",
                                   "--runs-dir", str(tmp_path)])
    assert out.exit_code == 0, out.output
    row = json.loads(out.output.strip().splitlines()[-1])
    assert row["held_out"] is True and row["episodes"] == 2
    assert row["validated"] == 0.0 and row["inner_jobs_succeeded"] == 0.0 and row["worst_episode"] <= 0
    summary = json.loads((Path(row["batch_dir"]) / "summary.json").read_text())
    assert all("the last failed shape" in e["note"] for e in summary["episodes"])  # which check the naive agent fails


def test_a_batch_writes_its_folder_and_summary(tmp_path):
    import csv

    from trainergym.agents.batch import read_summary

    out = CliRunner().invoke(app, ["batch", "--n", "3", "--family", "calc_chain", "--json", "--runs-dir", str(tmp_path)])
    assert out.exit_code == 0, out.output
    printed = json.loads(out.stdout)  # stdout is the JSON alone: the progress went to stderr
    batch = Path(printed["batch_dir"])
    assert batch.parent == tmp_path and batch.name.startswith("batch-")
    record = read_summary(batch)
    rows = record["episodes"]
    assert [r["episode_id"] for r in rows] == [d["episode_id"] for d in printed["episodes_detail"]]
    for row in rows:  # each episode's folder is in the batch, and its row carries every reward term
        reward = json.loads((batch / row["episode_id"] / "reward.json").read_text())
        assert row["r_total"] == reward["total"] == row["reward"] and row["r_best_pre"] == reward["best_pre"]
        assert row["family"] == "calc_chain" and row["gpu_usd"] > 0 and row["source"] == "surrogate"
    with open(batch / "summary.csv") as f:
        assert [float(r["r_total"]) for r in csv.DictReader(f)] == [r["r_total"] for r in rows]
    assert record["agent"] == "reference" and record["table"]["mean_reward"] == printed["mean_reward"]
