import json
import tomllib

import pytest

from tests.fakes.jobs import write_job
from trainergym.task import hidden
from trainergym.job.bundle import build_bundle, check_bounds, content_hash, parse_job, render_rl_toml
from trainergym.job.stack import PIN


def test_reference_job_parses_and_is_within_bounds(task, reference_files):
    job, issues = parse_job(reference_files["job.toml"])
    assert issues == [] and job is not None
    assert check_bounds(job, task) == []


@pytest.mark.parametrize("text, fragment", [
    ("[job\n", "not valid TOML"),
    ('[job]\nbase_model = "Qwen/Qwen3-1.7B"\n', "prime_rl: Field required"),
    ('[job]\nbase_model = "Qwen/Qwen3-1.7B"\n[prime_rl]\nmax_steps = 10\nbatch_sise = 64\n', "batch_sise: unknown key"),
    ('[job]\nbase_model = "Qwen/Qwen3-1.7B"\n[prime_rl]\nmax_steps = "ten"\n', "max_steps"),
    ('[job]\nbase_model = "Qwen/Qwen3-1.7B"\n[prime_rl]\nmax_steps = 10\nscheduler = "cosine"\nwarmup_steps = 10\n', "warmup_steps"),
    ('[job]\nbase_model = "Qwen/Qwen3-1.7B"\n[prime_rl]\nmax_steps = 10\nscheduler = "linear"\nlr = 1e-6\nmin_lr = 1e-5\n',
     "min_lr (1e-05) is above lr (1e-06)"),
    ('[job]\nbase_model = "Qwen/Qwen3-1.7B"\n[prime_rl]\nmax_steps = 10\noptimizer = "sgd"\n', "optimizer"),
    ('[job]\nbase_model = "Qwen/Qwen3-1.7B"\n[deployment]\nnum_train_gpus = 8\n[prime_rl]\nmax_steps = 10\n', "deployment"),
])
def test_parse_errors_are_itemised(text, fragment):
    job, issues = parse_job(text)
    assert job is None and any(fragment in i.message for i in issues), issues


def test_min_lr_is_free_where_no_schedule_reads_it():
    job, issues = parse_job('[job]\nbase_model = "Qwen/Qwen3-1.7B"\n[prime_rl]\nmax_steps = 10\nlr = 1e-6\nmin_lr = 1e-5\n')
    assert issues == [] and job.prime_rl.scheduler == "constant"
    job, issues = parse_job('[job]\nbase_model = "Qwen/Qwen3-1.7B"\n[prime_rl]\nmax_steps = 10\nscheduler = "cosine"\n'
                            'lr = 1e-6\nmin_lr = 1e-6\n')
    assert issues == []  # a decay to lr itself is constant, not a rise


def test_bounds_are_checked_against_the_task(task):
    job, _ = parse_job('[job]\nbase_model = "Qwen/Qwen3-4B"\n[prime_rl]\nmax_steps = 900\nbatch_size = 100\ngroup_size = 16\nmax_turns = 40\n')
    messages = " | ".join(i.message for i in check_bounds(job, task))
    for fragment in ("Qwen3-4B", "max_steps = 900", "not divisible", "max_turns = 40"):
        assert fragment in messages


def test_rendered_rl_toml_is_complete(task, reference_files):
    job, _ = parse_job(reference_files["job.toml"])
    rl = render_rl_toml(job, "job_abc", task)
    assert rl["max_steps"] == job.prime_rl.max_steps and rl["seq_len"] == job.prime_rl.seq_len
    assert rl["model"]["name"] == job.job.base_model
    orch = rl["orchestrator"]
    assert orch["batch_size"] % orch["group_size"] == 0 and orch["group_size"] >= 2
    src = orch["train"]["source"][0]["env"]
    assert src["taskset"]["id"] == "job_abc"
    assert src["agent"]["harness"]["id"] == "null" and src["agent"]["runtime"]["type"] == "subprocess"
    assert src["agent"]["max_turns"] == job.prime_rl.max_turns
    assert rl["trainer"]["scheduler"]["warmup_steps"] < rl["max_steps"]
    assert "wandb" not in rl["monitors"]
    assert "deployment" not in rl  # the runner adds it from the GPUs of the host it runs on


def test_rollouts_stop_while_one_more_turn_fits_seq_len(task, reference_files):
    job, _ = parse_job(reference_files["job.toml"])
    agent = render_rl_toml(job, "job_abc", task)["orchestrator"]["train"]["source"][0]["env"]["agent"]
    assert agent["max_total_tokens"] == job.prime_rl.seq_len - job.prime_rl.max_tokens


def test_content_hash_covers_the_agents_files_only(tmp_path, reference_files):
    write_job(tmp_path, reference_files)
    h = content_hash(tmp_path)
    (tmp_path / "INSTRUCTIONS.md").write_text("given")
    (tmp_path / "taskset" / "__pycache__").mkdir()
    (tmp_path / "taskset" / "__pycache__" / "x.pyc").write_bytes(b"junk")
    assert content_hash(tmp_path) == h
    (tmp_path / "taskset" / "extra.py").write_text("x = 1\n")
    assert content_hash(tmp_path) != h


def test_bundle_layout_and_no_hidden_items(tmp_path, task, reference_files):
    write_job(tmp_path / "ws", reference_files)
    job, _ = parse_job(reference_files["job.toml"])
    bundle = build_bundle(tmp_path / "ws", tmp_path / "bundle", job, task)
    name = bundle.manifest.taskset_id
    assert name.startswith("job_") and (bundle.root / "package" / name / "__init__.py").is_file()
    assert tomllib.loads((bundle.root / "package" / "pyproject.toml").read_text())["project"]["name"] == name.replace("_", "-")
    assert tomllib.loads(bundle.rl_toml.read_text())["orchestrator"]["train"]["source"][0]["env"]["taskset"]["id"] == name
    manifest = json.loads((bundle.root / "manifest.json").read_text())
    assert manifest["stack"] == PIN.model_dump() and manifest["content_hash"] == bundle.manifest.content_hash
    text = "".join(p.read_text(errors="replace") for p in bundle.root.rglob("*") if p.is_file())
    assert not any(ex.prompt in text for ex in hidden.hidden_eval("calc_chain"))
    assert hidden.secret_seed() not in text
