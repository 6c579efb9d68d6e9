"""Base models: keyed by content, found again, warmed up on the public stream only."""

import json

import pytest

from tests.marks import import_extra

pytestmark = pytest.mark.extras
import_extra("torch", "the mini backend", "mini")

from trainergym.mini import base as mini_base  # noqa: E402
from trainergym.mini.scale import SCALES, Scale  # noqa: E402
from trainergym.task.spec import get_family  # noqa: E402


def test_key_is_stable_and_covers_family_scale_config_and_seed():
    calc, hop = get_family("calc_chain"), get_family("multi_hop")
    micro = SCALES["micro"]
    key = mini_base.base_key(calc, micro, 0)
    assert key == mini_base.base_key(calc, micro, 0)
    others = {mini_base.base_key(calc, micro, 1), mini_base.base_key(hop, micro, 0),
              mini_base.base_key(calc, SCALES["gpu"], 0),
              mini_base.base_key(calc, Scale(**{**micro.as_dict(), "target": 0.5}), 0)}
    assert key not in others and len(others) == 4


def test_find_base_wants_the_same_key(tmp_path):
    hop = get_family("multi_hop")  # no prebuilt base ships for it
    assert mini_base.find_base(hop, "micro", 0, cache=tmp_path) is None
    key = mini_base.base_key(hop, SCALES["micro"], 0)
    stale = tmp_path / f"multi_hop-micro-{key[:16]}"
    stale.mkdir()
    (stale / "base.json").write_text(json.dumps({"key": "0" * 64}))
    assert mini_base.find_base(hop, "micro", 0, cache=tmp_path) is None
    (stale / "base.json").write_text(json.dumps({"key": key}))
    assert mini_base.find_base(hop, "micro", 0, cache=tmp_path).path == stale


def test_the_shipped_micro_base_is_current(tmp_path):
    """The prebuilt calc_chain micro base matches this code's key: a change to a keyed module
    needs `build_base(calc_chain, "micro")` and the result copied to trainergym/mini/data."""
    found = mini_base.find_base(get_family("calc_chain"), "micro", 0, cache=tmp_path)
    assert found is not None and found.path.parent == mini_base.MINI_DIR / "data"
    assert 0.15 <= found.info["dev_accuracy"] <= 0.5


def test_warmup_reads_the_public_stream_only(monkeypatch):
    calc = get_family("calc_chain")
    seen = []
    real = calc.generate

    def spy(seed, n, namespace="public", difficulty=None):
        seen.append(namespace)
        return real(seed, n, namespace=namespace, difficulty=difficulty)

    monkeypatch.setattr(calc, "generate", spy)
    mini_base.warmup_rows(calc, 3, "s", 1)
    assert seen == ["public"]


def test_trace_masks_only_the_model_tokens():
    from trainergym.mini.tokenizer import build_tokenizer

    calc = get_family("calc_chain")
    tok = build_tokenizer(calc)
    row = calc.generate("mask", 1, namespace="public", difficulty=1)[0]
    ids, mask = mini_base.trace_ids(tok, calc, row)
    text = tok.decode([i for i, m in zip(ids, mask) if m])
    assert "<tool_response>" not in text and text.count("<tool_call>") == len(calc.solve(row)["calls"])
    assert text.endswith(calc.solve(row)["reply"] + "<|im_end|>")
    assert mini_base.trace_ids(tok, calc, {"prompt": "nonsense", "answer": "1"}) is None


def test_a_users_model_directory_is_a_base(tmp_path):
    import shutil

    shipped = mini_base.find_base(get_family("calc_chain"), "micro", 0, cache=tmp_path / "empty")
    user = tmp_path / "my-model"
    shutil.copytree(shipped.path, user)
    base = mini_base.Base.from_dir(user, "calc_chain", "micro")
    assert base.info == {"source": "user"} and len(base.key) == 64
    micro = SCALES["micro"]
    assert base.caps() == {"max_len": micro.max_len, "max_new": micro.max_len, "max_tokens": micro.max_tokens_cap}
    model, tok = base.load()
    assert model.config.vocab_size == len(tok)
    (user / "config.json").unlink()
    import pytest

    with pytest.raises(ValueError, match="config.json"):
        mini_base.Base.from_dir(user, "calc_chain")


def test_a_toy_base_builds_caches_and_reloads(tmp_path, monkeypatch):
    """The whole warm-up path on a long-trace family at a toy size: built, cached by key, found again."""
    from dataclasses import replace

    toy = replace(SCALES["micro"], name="toy", hidden=32, heads=2, mlp=64, max_len=400, sft_items=64, sft_batch=8, sft_max_steps=4,
                  sft_eval_every=4, dev_items=4, target=1.1)
    monkeypatch.setitem(SCALES, "toy", toy)
    family = get_family("dispatch")
    base = mini_base.build_base(family, "toy", cache=tmp_path, log=lambda _: None)
    assert base.info["steps"] == 4 and base.info["warmup"]["namespace"] == "public"
    assert base.caps()["max_new"] <= toy.max_len and base.caps()["max_tokens"] <= toy.max_tokens_cap
    assert mini_base.find_base(family, "toy", cache=tmp_path).path == base.path
    model, tok = base.load()
    assert sum(p.numel() for p in model.parameters()) == base.info["parameters"]


def test_training_caps_grow_with_the_jobs_tasks(tmp_path):
    from trainergym.mini.rollout import Task
    from trainergym.mini.tokenizer import load_tokenizer
    from trainergym.mini.train import training_caps

    calc = get_family("calc_chain")
    base = mini_base.find_base(calc, "micro", 0, cache=tmp_path)
    tok = load_tokenizer(base.path)
    easy = [Task.from_row(r) for r in calc.generate("caps", 20, namespace="public", difficulty=1)]
    hard = [Task.from_row(r) for r in calc.generate("caps", 20, namespace="public", difficulty=3)]
    assert training_caps(base, calc, tok, easy) == {k: base.caps()[k] for k in ("max_new", "max_tokens")}
    grown = training_caps(base, calc, tok, hard)
    assert grown["max_new"] > base.caps()["max_new"] and grown["max_tokens"] >= base.caps()["max_tokens"]
    assert grown["max_new"] <= SCALES["micro"].max_len and grown["max_tokens"] <= SCALES["micro"].max_tokens_cap
