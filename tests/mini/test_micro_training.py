"""Real GRPO at the micro scale on this machine's CPU: a steered, real effect in minutes.

The calc_chain micro base (shipped prebuilt as package data, rebuilt here if its key is stale)
trains the family reference job's knobs (its own 60 steps) on the family's level-1 items, two
seeds, and the same job at 100x its learning rate, one seed, with the family's own check as the
reward; both are scored greedy on public held-out items. The reference must not lose accuracy
against the base, in the mean of its seeds, beyond the eval's noise (one seed alone can: at this
scale a seed ends anywhere within about 0.07 of the base); lr x100 must collapse it below the base.
"""

import functools
import time

import pytest

from tests.marks import import_extra

pytestmark = pytest.mark.extras
import_extra("trl", "the mini backend", "mini")

from trainergym.mini.base import build_base, find_base  # noqa: E402
from trainergym.mini.knobs import reference_table  # noqa: E402
from trainergym.mini.train import check_reward, train  # noqa: E402
from trainergym.task.spec import get_family  # noqa: E402

STEPS = 60
EVAL_N = 128


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_reference_keeps_accuracy_and_lr_x100_collapses_it():
    import torch

    torch.set_num_threads(1)  # on 2 shared cores, two threads contend: 1 trains these steps ~2x faster under load
    family = get_family("calc_chain")
    base = find_base(family, "micro") or build_base(family, "micro")  # shipped: a stale one is test_base's failure
    started = time.time()
    ref = reference_table(family)
    tasks = family.generate("mini-test-job", 500, namespace="public", difficulty=1)
    eval_items = family.generate("mini-test-eval", EVAL_N, namespace="public", difficulty=1)
    reward = functools.partial(check_reward, family.__name__)
    jobs = {name: dict(ref, max_steps=STEPS, lr=ref["lr"] * mult) for name, mult in (("reference", 1), ("lr_x100", 100))}
    seeds = {"reference": [0, 1], "lr_x100": [0]}
    results = {name: train(job, base, family, tasks, reward, eval_items, seeds=seeds[name]) for name, job in jobs.items()}
    pre = results["reference"].pre
    noise = 1.5 * (pre * (1 - pre) / EVAL_N) ** 0.5
    assert 0.15 <= pre <= 0.75, f"the micro base should leave room to improve (pre {pre:.3f})"
    assert results["reference"].post_mean >= pre - noise, results["reference"].as_dict()
    assert results["lr_x100"].post_mean < pre / 2, results["lr_x100"].as_dict()
    assert results["reference"].n == 2 and len(results["reference"].seeds[0].rewards) == STEPS
    assert any("batch_size" in line for line in results["reference"].unhonoured)
    assert time.time() - started < 180, "the micro configuration must train both jobs within 3 minutes"
