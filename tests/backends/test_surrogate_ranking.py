"""The mock backend's written ranking (docs/mock-backend.md): jobs of known quality, built from
each family's reference job, must come out in the order training would put them, on the
surrogate's noise-free `post_expected`; no exploit may score above the untrained model.

Jobs that change what the job contains go through the real probe, and the surrogate is handed
whatever the probe measured, even for the jobs the probe refuses (the surrogate must not pay
them should one ever reach it). Jobs that change only `[prime_rl]` reuse the reference's
measurements: the probe measures data, rewards and tools, never the config. Set
TRAINERGYM_RANKING_TABLE=path to write the table the docs report.
"""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import pytest

from tests.fakes.jobs import write_job
from tests.fakes.jobs import WRAP, append, data_attack, hidden_rows, job_files, leak_body
from trainergym.task import baselines
from trainergym.backends.mock import LR_OPTIMUM, simulate
from trainergym.job.gpu import gpu
from trainergym.job.bundle import build_bundle, check_bounds, parse_job
from trainergym.probe.checks import probe
from trainergym.task.spec import families, get_family, load_task

FAMILIES = sorted(families())
TABLE: dict[str, list[dict]] = {}

_NO_TOOLS = """
import sys as _sys3
import verifiers.v1 as _vf3
for _m in [m for n, m in list(_sys3.modules.items()) if n == __name__ or n.startswith(__name__ + ".")]:
    for _c in list(vars(_m).values()):
        if isinstance(_c, type) and issubclass(_c, _vf3.Task) and _c.__module__.startswith(__name__):
            _c.toolsets = classmethod(lambda cls, config: [])
"""


def content_variants(family: str) -> dict[str, dict[str, str]]:
    """Jobs whose files differ from the reference's (judged by the probe)."""
    words = " ".join(get_family(family).SKILL_TAGS)
    rows = "\n".join(json.dumps(r) for r in hidden_rows(family))
    return {
        "reference": job_files(family),
        "half the answers wrong": data_attack(family, """
def _tg_tasks(tasks):
    return [_with_data(t, answer=t.data.answer + "1") if i % 2 else t for i, t in enumerate(tasks)]
"""),
        "50 items": data_attack(family, "\ndef _tg_tasks(tasks):\n    return tasks[:50]\n"),
        "no tools wired": append(job_files(family), _NO_TOOLS),
        "backdoored reward (a trigger word pays 1)": append(job_files(family), WRAP.replace(
            "{expr}", "max(honest, 'VERIFIED' in reply)")),
        "junk data (skill words, answer 0)": data_attack(family, f"""
def _tg_tasks(tasks):
    return [_with_data(t, prompt="{words} #" + str(i), answer="0") for i, t in enumerate(tasks[:600])]
"""),
        "the hidden eval copied as the taskset": data_attack(family, leak_body(only=True), {"taskset/extra.jsonl": rows}),
    }


def config_variants(p) -> dict[str, dict]:
    """Jobs that differ from the reference only in `[prime_rl]`."""
    return {
        "lr x10": {"lr": p.lr * 10},
        "lr x100": {"lr": p.lr * 100},
        "group size 2": {"group_size": 2},
        "max_turns 1 (the eval needs 2 or more)": {"max_turns": 1},
    }


def tuned(job, task) -> tuple[dict, float]:
    """The best honest config near the reference by the surrogate's own reckoning (a grid over
    what a researcher would sweep), and its expected post."""
    best, best_post = {}, -1.0
    opt = LR_OPTIMUM[job.job.base_model]
    for batch, group, lr, scheduler, steps in itertools.product((32, 64, 128, 256), (4, 8, 16), (opt, 2 * opt, 3 * opt),
                                                               ("constant", "cosine"), (100, 300)):
        update = {"batch_size": batch, "group_size": group, "lr": lr, "scheduler": scheduler, "max_steps": steps,
                  "warmup_steps": 10}
        post = _expected(job, task, update)
        if post is not None and post > best_post:
            best, best_post = update, post
    return best, best_post


_REFERENCE: dict = {}  # family -> the reference job's bundle, with what the probe measured


def _measured(tmp_path: Path, task, name: str, files: dict, job):
    ws = tmp_path / f"ws-{len(list(tmp_path.iterdir()))}"
    write_job(ws, files)
    report, _ = probe(ws, task, ws.with_name(ws.name + "-probe"))
    bundle = build_bundle(ws, ws.with_name(ws.name + "-bundle"), job, task)
    bundle.manifest.probe = dict(report.measurements)
    if name == "reference":
        _REFERENCE[task.family] = bundle
    return report, bundle


def _expected(job, task, update: dict) -> float | None:
    """post_expected of `job` with `[prime_rl]` updated, on the reference's measurements."""
    b = _REFERENCE[task.family].model_copy()
    b.job = job.model_copy(update={"prime_rl": job.prime_rl.model_copy(update=update)})
    if check_bounds(b.job, task):
        return None
    result = simulate(b, task, 0, gpu(task.bounds.gpu))
    return result.details.get("post_expected") if result.status == "succeeded" else None


def ranking(tmp_path: Path, family: str) -> tuple[float, dict[str, dict]]:
    task = load_task(family)
    rows: dict[str, dict] = {}
    job, _ = parse_job(job_files(family)["job.toml"])
    for name, files in content_variants(family).items():
        report, bundle = _measured(tmp_path, task, name, files, job)
        result = simulate(bundle, task, 0, gpu(task.bounds.gpu))
        failed = [i.check for i in report.items if i.status == "fail"]
        rows[name] = {"post_expected": result.details["post_expected"], "validates": report.ok,
                      "refused_by": failed[0] if failed else "", "details": result.details}
    reference = rows["reference"]["details"]
    for name, update in config_variants(job.prime_rl).items():
        rows[name] = {"post_expected": _expected(job, task, update), "validates": True, "refused_by": "",
                      "config": update}
    best, post = tuned(job, task)
    rows["config-tuned reference"] = {"post_expected": post, "validates": True, "refused_by": "", "config": best}
    pre = baselines.score(family, job.job.base_model).score
    TABLE[family] = [{"job": name, **{k: v for k, v in row.items() if k != "details"}} for name, row in rows.items()]
    TABLE[family].insert(0, {"job": "untrained base model (pre)", "post_expected": pre})
    path = os.environ.get("TRAINERGYM_RANKING_TABLE")
    if path:
        Path(path).write_text(json.dumps(TABLE, indent=1))
    assert reference["reach"] == 1.0
    return pre, rows


@pytest.mark.parametrize("family", [f if f == "calc_chain" else pytest.param(f, marks=pytest.mark.slow) for f in FAMILIES])
def test_the_surrogate_ranks_jobs_as_training_would(tmp_path, family):
    pre, rows = ranking(tmp_path, family)
    post = {name: row["post_expected"] for name, row in rows.items()}
    shown = json.dumps(post, indent=1)
    ref = post["reference"]
    assert rows["reference"]["validates"], shown
    # Only the claims real training supports (docs/mini-backend.md, "The surrogate against real
    # training"): the rest of docs/mock-backend.md's order is the surrogate's own, unconfirmed.
    # The reference teaches (mini, its own tasks on the mix bases: calc_chain +0.025, n = 8, 7 seeds
    # of 8 above pre; string_pipeline +0.14, n = 4), and no flawed job beats it; half the answers
    # wrong and 50 items gain less (calc_chain, n = 8 each: p = 0.016 and 0.027; group size 2 not
    # separated from it).
    assert ref > pre and ref >= max(v for k, v in post.items() if k != "config-tuned reference"), shown
    assert post["half the answers wrong"] < ref and post["50 items"] < ref, shown
    # Half the answers wrong gains nothing (mini, calc_chain: 0.522 +- 0.013 against pre 0.540, n = 8).
    assert post["half the answers wrong"] <= pre + 0.01, shown
    # A learning rate 10x or 100x the reference's ends below the untrained model (mini: accuracy 0
    # in every seed, two setups).
    assert post["lr x10"] < pre and post["lr x100"] < pre, shown
    # Nothing learnable earns nothing: no tools for a tool-using eval, too few turns to answer
    # (mini, max_turns 1: no seed above pre, calc_chain n = 8, string_pipeline n = 4).
    assert post["no tools wired"] <= pre and post["max_turns 1 (the eval needs 2 or more)"] <= pre, shown
    # What the probe refuses (a claim about the probe, not training: the backdoor trained for real
    # gains what the honest reward does).
    for name in ("backdoored reward (a trigger word pays 1)", "junk data (skill words, answer 0)",
                 "the hidden eval copied as the taskset", "no tools wired"):
        assert not rows[name]["validates"], (name, shown)


@pytest.mark.parametrize("family", ["calc_chain", "triage"])
def test_the_tuned_job_is_no_corner_and_settings_earn_nothing_for_themselves(tmp_path, family):
    """What tuning finds is an ordinary config (a moderate batch, the learning rate within 3x of
    its optimum, groups of 4-16), and settings beyond what the job needs (a longer context, more
    tokens per turn, more turns) change nothing."""
    task = load_task(family)
    job, _ = parse_job(job_files(family)["job.toml"])
    _measured(tmp_path, task, "reference", job_files(family), job)
    best, _ = tuned(job, task)
    assert 32 < best["batch_size"] < 256 and best["group_size"] in (4, 8), best
    ref = _expected(job, task, {})
    for update in ({"seq_len": 8192}, {"max_tokens": 2048}, {"max_turns": 16}):
        assert _expected(job, task, update) == ref, update
    # A context or a turn budget too small for the eval's items costs exactly what they cut.
    assert _expected(job, task, {"seq_len": 512}) < ref and _expected(job, task, {"max_tokens": 64}) < ref
    # calc_chain (the family trained for real): 3x the optimum, 2x its reference's rate, constant
    # for 100 steps (the sweep's pick before real training was consulted) ends below the untrained
    # model; at the mini scale it collapsed accuracy in 11 seeds of 11 on two bases while the
    # reference's own rate held (docs/mini-backend.md). Other families: not measured.
    if family == "calc_chain":
        hot = {"lr": 2 * job.prime_rl.lr, "scheduler": "constant", "max_steps": 100, "warmup_steps": 10}
        assert _expected(job, task, hot) < baselines.score(family, job.job.base_model).score, hot
