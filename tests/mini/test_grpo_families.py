"""GRPO through TRL's GRPOTrainer on the families whose tools answer from a world (one of them
mutates it), from a toy base: the whole training path runs, with the family's check as reward."""

import functools
from dataclasses import replace

import pytest

from tests.marks import import_extra

pytestmark = pytest.mark.extras
import_extra("trl", "the mini backend", "mini")

from trainergym.mini.base import build_base  # noqa: E402
from trainergym.mini.knobs import reference_table  # noqa: E402
from trainergym.mini.scale import SCALES  # noqa: E402
from trainergym.mini.train import check_reward, train  # noqa: E402
from trainergym.task.spec import get_family  # noqa: E402


@pytest.mark.slow
@pytest.mark.parametrize("family_id", ["ledger", "multi_hop"])
def test_two_steps_of_grpo_on_a_world_family(family_id, tmp_path, monkeypatch):
    toy = replace(SCALES["micro"], name="toy", hidden=32, heads=2, mlp=64, max_len=512, sft_items=64, sft_batch=8,
                  sft_max_steps=4, sft_eval_every=4, dev_items=4, target=1.1, batch_cap=8)
    monkeypatch.setitem(SCALES, "toy", toy)
    family = get_family(family_id)
    base = build_base(family, "toy", cache=tmp_path, log=lambda _: None)
    job = dict(reference_table(family), max_steps=2, batch_size=8, group_size=4, warmup_steps=0)
    tasks = family.generate("grpo-test", 16, namespace="public", difficulty=1)
    result = train(job, base, family, tasks, functools.partial(check_reward, family.__name__),
                   family.generate("grpo-eval", 4, namespace="public", difficulty=1), seeds=[0])
    seed = result.seeds[0]
    assert len(seed.rewards) == 2 and seed.rollouts == 16
    assert 0.0 <= result.pre <= 1.0 and result.n == 1
