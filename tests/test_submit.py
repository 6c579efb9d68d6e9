"""The queue from the command line: `trainergym submit` probes job directories and queues what
passes, `trainergym jobs` shows them, and two `trainergym worker --backend mock --once`
processes drain one queue together, each job done after exactly one attempt."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes.jobs import write_job

BIN = Path(sys.executable).with_name("trainergym")
ROOT = Path(__file__).parents[1]


def cli(*args, timeout=600):
    return subprocess.run([str(BIN), *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          env=os.environ.copy(), cwd=ROOT)


@pytest.mark.slow
def test_six_submitted_jobs_are_drained_once_by_two_workers(tmp_path, reference_files):
    dirs = []
    for i in range(6):  # six jobs that differ only in their notes, so in their bundles' hashes
        files = {**reference_files, "job.toml": reference_files["job.toml"].replace('notes = """', f'notes = """variant {i} ')}
        write_job(tmp_path / f"job{i}", files)
        dirs.append(tmp_path / f"job{i}")
    broken = tmp_path / "broken"
    write_job(broken, {**reference_files, "job.toml": reference_files["job.toml"].replace("max_steps = 60", "max_steps = -1")})
    db, work = tmp_path / "jobs.db", tmp_path / "work"

    out = cli("submit", *dirs, broken, "--family", "calc_chain", "--db", db, "--workdir", work, "--json")
    assert out.returncode == 1, out.stderr  # one job failed its probe
    rows = json.loads(out.stdout)["jobs"]
    assert [r["ok"] for r in rows] == [True] * 6 + [False]
    assert rows[-1]["job_id"] is None and "max_steps" in json.dumps(rows[-1]["report"])
    assert len({r["job_id"] for r in rows[:6]}) == 6 and all(r["state"] == "queued" for r in rows[:6])

    again = cli("submit", dirs[0], "--family", "calc_chain", "--db", db, "--workdir", work)
    assert again.returncode == 0 and f"queued as {rows[0]['job_id']}" in again.stdout  # the same bundle, not twice

    # Three pods each, so both lease jobs and run side by side on their own virtual clocks.
    workers = [subprocess.Popen([str(BIN), "worker", "--backend", "mock", "--once", "--max-pods", "3", "--db", str(db),
                                 "--workdir", str(work), "--seed", str(seed)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, cwd=ROOT) for seed in (1, 2)]
    for w in workers:
        _, err = w.communicate(timeout=600)
        assert w.returncode == 0, err

    listed = json.loads(cli("jobs", "--db", db, "--json").stdout)
    assert listed["counts"] == {"done": 6}
    assert [j["attempts"] for j in listed["jobs"]] == [1] * 6
    assert all(j["result"]["source"] == "surrogate" for j in listed["jobs"])
    assert len({j["result"]["details"]["pod"] for j in listed["jobs"]}) >= 2


def test_submit_refuses_in_one_line(tmp_path):
    for args, says in ((["submit", tmp_path], "--family"),
                       (["submit", tmp_path / "missing", "--family", "calc_chain"], "is not a directory"),
                       (["submit", tmp_path, "--family", "nosuch"], "unknown family 'nosuch'")):
        out = cli(*args, "--db", tmp_path / "jobs.db", timeout=120)
        assert out.returncode == 2 and says in out.stderr and "Traceback" not in out.stderr, out.stderr
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr


@pytest.mark.slow
def test_a_worker_killed_mid_job_loses_nothing_and_two_restarted_run_each_job_once(tmp_path, reference_files):
    """SIGKILL a worker while it holds jobs; two fresh `worker --once` wait its leases out, take
    those jobs over and finish the queue: every job done once, the killed attempts counted."""
    import signal
    import time

    from trainergym.infra.queue import JobQueue

    dirs = []
    for i in range(4):
        files = {**reference_files, "job.toml": reference_files["job.toml"].replace('notes = """', f'notes = """kill {i} ')}
        write_job(tmp_path / f"job{i}", files)
        dirs.append(tmp_path / f"job{i}")
    db, work = tmp_path / "jobs.db", tmp_path / "work"
    assert cli("submit", *dirs, "--family", "calc_chain", "--db", db, "--workdir", work).returncode == 0
    worker = [str(BIN), "worker", "--backend", "mock", "--max-pods", "2", "--db", str(db), "--workdir", str(work),
              "--lease-seconds", "4"]
    first = subprocess.Popen(worker, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    queue, held = JobQueue(db), {}
    deadline = time.monotonic() + 120
    while not held and time.monotonic() < deadline:
        held = {j.id for j in queue.jobs() if j.state in ("leased", "running")}
        time.sleep(0.05)
    first.send_signal(signal.SIGKILL)
    first.wait()
    held = {j.id for j in queue.jobs() if j.state in ("leased", "running")}  # what it held when it died
    assert held, "the worker finished before it could be killed mid-job"
    started = time.monotonic()
    again = [subprocess.Popen([*worker, "--once", "--seed", str(seed)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, cwd=ROOT) for seed in (1, 2)]
    for w in again:
        _, err = w.communicate(timeout=600)
        assert w.returncode == 0, err
    jobs = queue.jobs()
    assert [j.state for j in jobs] == ["done"] * 4, [(j.id, j.state) for j in jobs]
    assert all(j.attempts == (2 if j.id in held else 1) for j in jobs), [(j.id, j.attempts) for j in jobs]
    assert time.monotonic() - started >= 3  # they waited for the dead worker's leases to expire


def test_a_truncated_queue_is_refused_never_read_as_empty(tmp_path):
    db = tmp_path / "jobs.db"
    db.write_bytes(b"")  # what the red team found: six jobs vanished into an "empty" queue
    for args in (["worker", "--backend", "mock", "--once"], ["jobs"]):
        out = cli(*args, "--db", db, timeout=120)
        assert out.returncode == 2 and "is empty (0 bytes)" in out.stderr and "Traceback" not in out.stderr, out.stderr
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert db.read_bytes() == b""
