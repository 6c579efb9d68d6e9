"""Mutations of a family's reference job, for the attack suite and the surrogate's ranking:
each appends code to the job's taskset package that rewrites its rewards or what its
`load()` yields, so one mutation applies to every family."""

from __future__ import annotations

from pathlib import Path

from trainergym.task import hidden
from trainergym.agents.reference import reference_job_files
from trainergym.job.bundle import build_bundle, parse_job

# Appended to the reference job's taskset/__init__.py: wraps every @vf.reward of the job's Task
# classes so that it returns EXPR, where `honest` is the reference reward and `reply` the
# final reply.
WRAP = '''
import functools as _ft, re as _re, sys as _sys
import verifiers.v1 as _vf


def _tg_patch(cls):
    for name, fn in list(vars(cls).items()):
        if callable(fn) and getattr(fn, "reward", False):
            @_ft.wraps(fn)
            async def patched(self, trace, _fn=fn):
                honest = await _fn(self, trace)
                reply = trace.last_reply or ""
                return float({expr})
            setattr(cls, name, patched)


for _m in [m for n, m in list(_sys.modules.items()) if n == __name__ or n.startswith(__name__ + ".")]:
    for _c in list(vars(_m).values()):
        if isinstance(_c, type) and issubclass(_c, _vf.Task) and _c.__module__.startswith(__name__):
            _tg_patch(_c)
'''

# Rewrites what load() yields: `_tg_tasks(tasks)` -> tasks, defined by each attack.
LOAD = '''
import sys as _sys2
import verifiers.v1 as _vf2

for _m in [m for n, m in list(_sys2.modules.items()) if n == __name__ or n.startswith(__name__ + ".")]:
    for _c in list(vars(_m).values()):
        if isinstance(_c, type) and issubclass(_c, _vf2.Taskset) and _c.__module__.startswith(__name__):
            _orig_load = _c.load
            def _load(self, _orig=_orig_load):
                return _tg_tasks(list(_orig(self)))
            _c.load = _load
'''


def job_files(family: str) -> dict[str, str]:
    return dict(reference_job_files(family))


def append(files: dict, text: str) -> dict:
    files = dict(files)
    files["taskset/__init__.py"] = files["taskset/__init__.py"] + "\n" + text
    return files


def backdoor(family: str, expr: str, prelude: str = "") -> dict:
    return append(job_files(family), prelude + WRAP.replace("{expr}", expr))


# Task.with_data is verifiers 0.4.0's; prime-rl's (a60a606), which the probe runs jobs on, lacks it.
WITH_DATA = """
def _with_data(task, **update):
    return type(task)(task.data.model_copy(update=update), task.config)
"""


def data_attack(family: str, body: str, extra: dict | None = None) -> dict:
    files = append(job_files(family), WITH_DATA + body + LOAD)
    return {**files, **(extra or {})}


def hidden_rows(family: str) -> list[dict]:
    return [ex.model_dump() for ex in hidden.hidden_eval(family)]


def reword(text: str) -> str:
    """Same numbers and names, other words."""
    swaps = {"Start with": "Begin from", "Step": "Then, stage", "What is": "Tell me", "Finish with": "End on",
             "the": "that", "it": "the value", "Use": "Employ", "and": "plus"}
    for a, b in swaps.items():
        text = text.replace(a, b)
    return text.replace("\n", " | ")


def leak_body(extend_to: int = 0, only: bool = False) -> str:
    """Appends the rows of `taskset/extra.jsonl` to the tasks (after repeating them up to
    `extend_to`), or with `only`, yields those rows alone."""
    return f'''
import json as _json, pathlib as _pl
def _tg_tasks(tasks):
    rows = [_json.loads(l) for l in (_pl.Path(__file__).parent / "extra.jsonl").read_text().splitlines()]
    base = list(tasks)
    while len(base) < {extend_to}:
        base += tasks
    extra = []
    for r in rows:
        upd = {{"prompt": r["prompt"], "answer": r["answer"]}}
        if "world" in type(tasks[0].data).model_fields:
            upd["world"] = r["world"]
        extra.append(_with_data(tasks[0], **upd))
    return extra if {only} else base + extra
'''


def write_job(root, files):
    """Write {relative path: content} under root."""
    for rel, content in files.items():
        path = Path(root) / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)


def bundles(tmp_path, task, reference_files, n):
    """`n` bundles of the reference job that differ only in their notes (so in their hashes)."""
    out = []
    for i in range(n):
        files = {**reference_files, "job.toml": reference_files["job.toml"].replace('notes = """', f'notes = """variant {i} ')}
        write_job(tmp_path / f"ws{i}", files)
        job, _ = parse_job(files["job.toml"])
        out.append(build_bundle(tmp_path / f"ws{i}", tmp_path / f"b{i}", job, task))
    return out
