from pathlib import Path

import pytest

from trainergym.task.spec import ALLOWED_BASE_MODELS, TaskSpec, families, load_task


def test_family_is_discovered_through_entry_points():
    assert "calc_chain" in families()


def test_task_by_family_id_and_by_path_agree(task):
    from_file = load_task(Path(__file__).parents[2] / "examples/tasks/calc_chain.toml")
    assert from_file == task
    assert task.family == "calc_chain" and not task.held_out
    assert task.max_submit_attempts == 3
    assert set(task.eval_tool_names) == {"calc_add", "calc_sub", "calc_mul", "calc_div", "calc_mod"}
    assert len(task.dev_examples) >= 5
    assert set(task.bounds.base_models) <= set(ALLOWED_BASE_MODELS)


def test_task_file_overrides_and_errors(tmp_path):
    f = tmp_path / "t.toml"
    f.write_text('family = "calc_chain"\nid = "cc-small"\nmax_submit_attempts = 1\n[bounds]\ngpu = "RTX 4090"\n')
    t = load_task(f)
    assert (t.id, t.max_submit_attempts, t.bounds.gpu, t.bounds.gpu_count) == ("cc-small", 1, "RTX 4090", 2)
    f.write_text('id = "x"\n')
    with pytest.raises(ValueError, match="family"):
        load_task(f)
    with pytest.raises(FileNotFoundError):
        load_task(tmp_path / "missing.toml")
    with pytest.raises(KeyError, match="unknown family"):
        load_task("no_such_family")
    f.write_text('family = "calc_chain"\n[bounds]\nbase_models = ["gpt2"]\n')
    with pytest.raises(ValueError, match="not supported"):
        load_task(f)
    f.write_text('family = "calc_chain"\n[bounds]\ngpu_count = 1\n')
    with pytest.raises(ValueError, match="one to train and one for inference"):
        load_task(f)


def test_spec_round_trips_through_json(task):
    assert TaskSpec.model_validate_json(task.model_dump_json()) == task
