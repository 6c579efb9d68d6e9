"""The command line, run as a user runs it."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).with_name("trainergym")
ROOT = Path(__file__).parents[1]


def episode(tmp_path, *args):
    out = subprocess.run([str(BIN), "episode", *args, "--runs-dir", str(tmp_path / "runs")], capture_output=True,
                         text=True, timeout=300, env=os.environ.copy(), cwd=ROOT)
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.slow
def test_reference_beats_naive_by_point_two_for_seeds_1_to_5(tmp_path):
    for seed in range(1, 6):
        ref = json.loads(episode(tmp_path, "--family", "calc_chain", "--agent", "reference", "--json", "--seed", str(seed)))
        naive = json.loads(episode(tmp_path, "--family", "calc_chain", "--agent", "naive", "--json", "--seed", str(seed)))
        assert ref["attempts"] == 1 and ref["reward"]["validation"] == 1.0
        assert ref["reward"]["total"] - naive["reward"]["total"] >= 0.2, (seed, ref["reward"], naive["reward"])
        run = Path(ref["run_dir"])
        for name in ("trajectory.jsonl", "manifest.json", "result.json", "workspace/job.toml"):
            assert (run / name).is_file()


@pytest.mark.slow
@pytest.mark.parametrize("family", ["multi_hop", "string_pipeline", "ledger", "dispatch", "triage"])
def test_reference_beats_naive_on_every_family(tmp_path, family):
    ref = json.loads(episode(tmp_path, "--family", family, "--agent", "reference", "--json"))
    naive = json.loads(episode(tmp_path, "--family", family, "--agent", "naive", "--json"))
    assert ref["attempts"] == 1 and ref["reward"]["validation"] == 1.0, ref
    assert ref["reward"]["total"] - naive["reward"]["total"] >= 0.2, (ref["reward"], naive["reward"])


def test_families_lists_held_out_and_baselines(tmp_path):
    out = subprocess.run([str(BIN), "families", "--json"], capture_output=True, text=True, cwd=ROOT)
    rows = {r["id"]: r for r in json.loads(out.stdout)["families"]}
    assert rows["triage"]["held_out"] and not rows["calc_chain"]["held_out"]
    assert {b["source"] for r in rows.values() for b in r["baselines"]} <= {"reported", "measured", "surrogate"}
    table = subprocess.run([str(BIN), "families"], capture_output=True, text=True, cwd=ROOT).stdout
    assert "triage" in table and "0.742" in table


def test_table_output_says_where_figures_come_from(tmp_path):
    out = episode(tmp_path, "--task", str(ROOT / "examples/tasks/calc_chain.toml"))
    for term in ("validation", "post (hidden eval)", "post expected", "uplift", "job quality", "speed", "total", "surrogate"):
        assert term in out


def test_no_reward_noise_pays_the_expected_post_whatever_the_seed(tmp_path):
    runs = [json.loads(episode(tmp_path, "--no-reward-noise", "--json", "--seed", str(seed))) for seed in (1, 2)]
    for run in runs:
        r = run["reward"]
        assert r["post"] == r["post_expected"] == run["result"]["details"]["post_expected"] and not r["reward_noise"]
        assert r["source"] == "surrogate"
    assert runs[0]["reward"]["total"] == runs[1]["reward"]["total"]
    assert runs[0]["result"]["post"] != runs[1]["result"]["post"]  # the draws differ; the reward ignores them


def test_bad_arguments_give_a_clear_message(tmp_path):
    out = subprocess.run([str(BIN), "episode", "--family", "calc_chain", "--task", "x.toml"], capture_output=True, text=True)
    assert out.returncode != 0 and "not both" in out.stderr


@pytest.mark.parametrize("argv, says", [
    (["episode", "--backend", "local"], "nvidia-smi finds none"),
    (["batch", "--n", "1", "--backend", "local"], "nvidia-smi finds none"),
    (["eval-agent", "--family", "triage", "--n", "1", "--backend", "runpod"], "RUNPOD_API_KEY"),
    (["episode", "--backend", "runpod"], "RUNPOD_API_KEY"),
    (["worker", "--backend", "runpod", "--once"], "RUNPOD_API_KEY"),
    (["worker", "--backend", "local", "--once"], "nvidia-smi finds none"),
    (["episode", "--backend", "tpu"], "available: mock, local, runpod"),
    (["episode", "--backend", "fleet"], "worker --backend mock"),
])
def test_a_backend_that_cannot_run_here_says_why_in_one_line(tmp_path, argv, says):
    env = {k: v for k, v in os.environ.items() if k != "RUNPOD_API_KEY"}
    env["PATH"] = f"{tmp_path}:/usr/bin:/bin"  # no nvidia-smi on the path, whatever the host
    out = subprocess.run([str(BIN), *argv, "--runs-dir" if argv[0] != "worker" else "--db",
                          str(tmp_path / ("runs" if argv[0] != "worker" else "jobs.db"))],
                         capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
    assert out.returncode == 2 and says in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr + out.stdout


def test_probe_command_exit_status_and_json(tmp_path):
    good = subprocess.run([str(BIN), "probe", str(ROOT / "envs/calc_chain/reference_job"), "--json"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert good.returncode == 0 and json.loads(good.stdout)["ok"]
    (tmp_path / "job.toml").write_text("[job]\n")
    bad = subprocess.run([str(BIN), "probe", str(tmp_path), "--family", "calc_chain"], capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode == 1 and "INVALID" in bad.stdout and "prime_rl" in bad.stdout


def test_probe_bundle_out_writes_the_validated_bundle_and_how_to_train_it(tmp_path):
    out = tmp_path / "out"
    good = subprocess.run([str(BIN), "probe", str(ROOT / "envs/calc_chain/reference_job"), "--bundle-out", str(out)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert good.returncode == 0, good.stdout + good.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    name = manifest["taskset_id"]
    assert (out / "rl.toml").is_file() and (out / "workspace/job.toml").is_file()
    assert (out / "package/pyproject.toml").is_file() and (out / "package" / name / "__init__.py").is_file()
    assert manifest["probe"]["verified_share"] == 1.0 and f'id = "{name}"' in (out / "rl.toml").read_text()
    said = " ".join(good.stdout.split())  # rich wraps long lines
    assert f"bundle written to {out}" in said and f"rl @ {out / 'rl.toml'}" in said and "[deployment]" in said


@pytest.mark.parametrize("make, says", [
    (lambda out: (out.mkdir(), (out / "x").write_text("x")), "exists and is not empty"),
    (lambda out: out.write_text("x"), "exists and is not a directory"),
    (lambda out: None, "cannot be created"),  # its parent is a file
])
def test_probe_bundle_out_refuses_an_unusable_directory_in_one_line(tmp_path, make, says):
    out = tmp_path / "out"
    make(out)
    if "created" in says:
        (tmp_path / "file").write_text("x")
        out = tmp_path / "file" / "out"
    bad = subprocess.run([str(BIN), "probe", str(ROOT / "envs/calc_chain/reference_job"), "--bundle-out", str(out)],
                         capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert bad.returncode == 2 and says in bad.stderr, bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1 and "Traceback" not in bad.stderr + bad.stdout


def test_probe_bundle_out_writes_nothing_for_a_job_that_fails(tmp_path):
    (tmp_path / "job.toml").write_text("[job]\n")
    out = tmp_path / "out"
    bad = subprocess.run([str(BIN), "probe", str(tmp_path), "--bundle-out", str(out), "--json"], capture_output=True,
                         text=True, cwd=ROOT, timeout=120)
    assert bad.returncode == 1 and json.loads(bad.stdout)["bundle_out"] is None and not out.exists()


def test_jobs_lists_and_inspects_the_queue(tmp_path):
    from trainergym.infra.queue import JobQueue
    from trainergym.job.result import RunResult

    q = JobQueue(tmp_path / "jobs.db")
    job = q.enqueue("h", "calc_chain", "/b", family="calc_chain", base_model="Qwen/Qwen3-1.7B")
    q.lease("w")
    q.complete(job.id, "w", RunResult(status="succeeded", pre=0.5, post=0.81))
    out = subprocess.run([str(BIN), "jobs", "--db", str(tmp_path / "jobs.db"), "--json"], capture_output=True, text=True)
    data = json.loads(out.stdout)
    assert data["counts"] == {"done": 1} and data["jobs"][0]["result"]["post"] == 0.81
    one = subprocess.run([str(BIN), "jobs", job.id, "--db", str(tmp_path / "jobs.db")], capture_output=True, text=True)
    assert json.loads(one.stdout)["state"] == "done"
    table = subprocess.run([str(BIN), "jobs", "--db", str(tmp_path / "jobs.db")], capture_output=True, text=True).stdout
    assert job.id in table and "0.81" in table


def test_worker_mock_drains_fifty_jobs(tmp_path, task, reference_files):
    from tests.fakes.jobs import write_job
    from trainergym.job.bundle import build_bundle, parse_job
    from trainergym.infra.queue import JobQueue

    q = JobQueue(tmp_path / "jobs.db")
    for i in range(50):
        files = {**reference_files, "job.toml": reference_files["job.toml"].replace('notes = """', f'notes = """v{i} ')}
        write_job(tmp_path / f"ws{i}", files)
        job, _ = parse_job(files["job.toml"])
        bundle = build_bundle(tmp_path / f"ws{i}", tmp_path / f"b{i}", job, task)
        q.enqueue(bundle.manifest.content_hash, task.id, bundle.root, family=task.family, base_model=job.job.base_model)
    out = subprocess.run([str(BIN), "worker", "--backend", "mock", "--once", "--max-pods", "8", "--db", str(tmp_path / "jobs.db"),
                          "--workdir", str(tmp_path / "work")], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    assert q.counts() == {"done": 50} and "pods left: 0" in out.stdout
    assert all(j.result.source == "surrogate" for j in q.jobs())


def test_episode_with_the_llm_agent_prints_tokens_and_dollars(tmp_path, monkeypatch):
    from tests.fakes.openai_server import FakeOpenAI
    from tests.fakes.openai_server import reference_policy

    prices = tmp_path / "prices.toml"
    prices.write_text('["fake-model"]\ninput = 2.0\noutput = 8.0\n')
    monkeypatch.setenv("FAKE_KEY", "k")
    monkeypatch.setenv("TRAINERGYM_LEDGER", str(tmp_path / "ledger.db"))
    with FakeOpenAI(reference_policy()) as fake:
        out = json.loads(episode(tmp_path, "--agent", "llm", "--model", "fake-model", "--base-url", fake.url,
                                 "--api-key-env", "FAKE_KEY", "--prices", str(prices), "--stream", "--json"))
        reported = list(fake.usage)
    llm = out["llm"]
    assert out["reward"]["validation"] == 1.0 and llm["calls"] == len(reported) == out["turns"]
    assert llm["prompt_tokens"] == sum(u["prompt_tokens"] for u in reported) and llm["usd_source"] == ["price table"]
    messages = json.loads((Path(out["run_dir"]) / "messages.json").read_text())
    assert messages[0]["role"] == "system" and any(m["role"] == "tool" for m in messages)
    costs = subprocess.run([str(BIN), "costs", "--json"], capture_output=True, text=True, env=os.environ.copy())
    ledger = json.loads(costs.stdout)
    assert ledger["spent_usd"] == pytest.approx(llm["usd"])
    by_source = {(r["kind"], r["source"]): r for r in ledger["rows"]}
    assert set(by_source) == {("llm", "price table"), ("gpu", "surrogate")}  # the mock job's dollars: simulated
    assert out["result"]["cost_usd"] > 0 and ledger["simulated_usd"] == pytest.approx(out["result"]["cost_usd"])
    # Both rows are the episode's: `costs --episode` lists the job's simulated dollars next to its calls.
    one = subprocess.run([str(BIN), "costs", "--episode", out["episode_id"], "--json"], capture_output=True, text=True,
                         env=os.environ.copy())
    assert {r["kind"] for r in json.loads(one.stdout)["rows"]} == {"llm", "gpu"}, one.stdout + one.stderr


def test_the_llm_agent_needs_its_key(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "OPENROUTER_API_KEY"}
    out = subprocess.run([str(BIN), "episode", "--agent", "llm"], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode != 0 and "OPENROUTER_API_KEY" in out.stderr


def test_doctor_names_the_mode_that_runs_and_what_each_guarantees(tmp_path):
    env = {**os.environ, "TRAINERGYM_SANDBOX": "namespaces"}
    env.pop("RUNPOD_API_KEY", None)  # doctor would check it with a call to Runpod
    out = subprocess.run([str(BIN), "doctor", "--json"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    report = json.loads(out.stdout)
    assert [m["mode"] for m in report["modes"]] == ["bwrap", "namespaces", "none"]
    assert report["requested"] == "namespaces" and report["runs"] in ("namespaces", "unavailable")
    assert (out.returncode == 0) == (report["runs"] == "namespaces")
    assert report["data_dir_modes"].get(Path(report["data_dir"]).name) == "0o700"
    bad = subprocess.run([str(BIN), "doctor"], capture_output=True, text=True, cwd=ROOT, timeout=60,
                         env={**env, "TRAINERGYM_SANDBOX": "bogus"})
    assert bad.returncode == 2 and "auto, bwrap, namespaces, none" in bad.stderr and "Traceback" not in bad.stderr
