"""A job's knobs at the mini scale: learning rates relative to the family reference job's, the
schedule step by step, and every knob it cannot honour listed."""

from trainergym.mini.knobs import map_knobs, prime_rl_table, reference_table
from trainergym.mini.scale import get_scale
from trainergym.task.spec import get_family


def test_learning_rate_is_relative_to_the_reference_job():
    family = get_family("calc_chain")
    ref = reference_table(family)
    gpu = get_scale("gpu")
    assert map_knobs(ref, ref, gpu).lr == gpu.tuned_lr
    assert abs(map_knobs(dict(ref, lr=ref["lr"] * 10), ref, gpu).lr - 10 * gpu.tuned_lr) < 1e-12
    k = map_knobs(dict(ref, min_lr=ref["lr"] / 10), ref, gpu)
    assert abs(k.min_lr - gpu.tuned_lr / 10) < 1e-12


def test_schedule_warmup_then_decay_to_min_lr():
    ref = reference_table(get_family("calc_chain"))
    job = dict(ref, scheduler="linear", warmup_steps=4, max_steps=14, min_lr=ref["lr"] / 2)
    k = map_knobs(job, ref, get_scale("gpu"))
    lrs = [k.lr_at(s) for s in range(14)]
    assert lrs[0] == k.lr / 4 and lrs[3] == k.lr
    assert lrs[4] == k.lr and abs(k.lr_at(14) - k.min_lr) < 1e-12
    assert all(a >= b for a, b in zip(lrs[4:], lrs[5:]))
    cos = map_knobs(dict(job, scheduler="cosine"), ref, get_scale("gpu"))
    assert abs(cos.lr_at(9) - (k.lr + k.min_lr) / 2) < 1e-12  # halfway through the decay
    const = map_knobs(dict(job, scheduler="constant", warmup_steps=0), ref, get_scale("gpu"))
    assert {const.lr_at(s) for s in range(14)} == {const.lr}


def test_what_the_scale_cannot_honour_is_listed():
    ref = reference_table(get_family("calc_chain"))
    job = dict(ref, batch_size=512, optimizer="muon", loss="ipo", algorithm="max_rl", max_off_policy_steps=4,
               kl_tau=0.1, lora={"rank": 8})
    k = map_knobs(job, ref, get_scale("micro"))
    text = "\n".join(k.unhonoured)
    for word in ("batch_size 512 -> 32", "max_tokens", "seq_len", "muon", "ipo", "max_rl", "max_off_policy_steps",
                 "kl_tau", "lora"):
        assert word in text
    assert k.batch_size == 32 and k.batch_size % k.group_size == 0
    assert k.max_turns == ref["max_turns"] and k.temperature == ref["temperature"]


def test_job_forms():
    family = get_family("calc_chain")
    path = family.REFERENCE_JOB / "job.toml"
    assert prime_rl_table(path) == prime_rl_table({"prime_rl": prime_rl_table(path)}) == reference_table(family)
