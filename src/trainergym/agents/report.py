"""`trainergym report`: the figures a researcher looks at instead of reading summary rows.

Inputs are any mix of batch folders (`runs/batch-<id>/`) or their `summary.json`, single episode
run folders (`runs/<episode-id>/`, read into a one-row summary), and training logs: Tinker's
`metrics.jsonl` (tinker-cookbook's log dir) and TRL's `trainer_state.json` (an output dir or one of
its `checkpoint-*`). Out come one PNG per figure with a JSON of exactly the series it plots beside
it, and `report.html`, one self-contained page (images inlined as base64, the numbers in tables).

Every figure's title or caption says where its numbers come from: a post score (and the GPU
dollars) is `measured` or `surrogate` (the mock backend), and a surrogate is never drawn as a
measurement. matplotlib is an optional extra (`trainergym[report]`), imported only when drawing.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainergym.agents.batch import TERMS, read_summary
from trainergym.agents.compare import RESAMPLES, bootstrap_ci
from trainergym.env.reward import W_QUALITY, W_SPEED, W_VALIDATION

INSTALL_HINT = "trainergym report needs matplotlib: pip install 'trainergym[report]'"
HTML_NAME = "report.html"

# tinker-cookbook 0.6.1: rl/metric_util.compute_trajectory_metrics prefixes every rollout metric
# with env/all/ (and env/<tag>/ per logging tag); RLTestSetEvaluator prefixes its own with its name
# ("test" by default), so the held-out reward is test/env/all/reward/total. The evaluation loop
# also logs eval/by_<axis>/<same key> aliases, which would draw the same curve twice.
TINKER_TRAIN_KEY = "env/all/reward/total"
_TINKER_HELD_OUT = re.compile(r"^(?!eval/by_)(.+)/env/all/reward/total$")
_TINKER_TAG = re.compile(r"^env/([^/]+)/reward/total$")
_TINKER_SHARED_TAGS = {"all", "trainergym"}  # every group carries "trainergym": its curve is env/all's
# TRL 1.16 GRPOTrainer.log: `reward` (the weighted sum of the reward functions, averaged) in training,
# `eval_reward` when evaluating (Trainer.log appends each as a log_history entry with its `step`).
TRL_TRAIN_KEY = "reward"
_TRL_HELD_OUT = re.compile(r"^eval_(?:.+_)?reward$")

SOURCE_WORDS = {"measured": "measured (trained and scored)", "surrogate": "surrogate (the mock backend, not training)",
                "measured (mini scale)": "measured (mini scale: a tiny model trained and scored, not a full-scale run)"}


class ReportError(ValueError):
    """An input the report cannot read, or matplotlib missing; its message is one line."""


@dataclass
class TrainingLog:
    """One training run's reward curves: `train` and each held-out series as (step, value) pairs."""

    name: str
    path: Path
    kind: str  # tinker | trl
    source: str  # where its rewards come from, in words (the log may not say)
    train: list[tuple[int, float]] = field(default_factory=list)
    train_key: str = ""
    held_out: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    per_tag: dict[str, list[tuple[int, float]]] = field(default_factory=dict)  # Tinker's env/<family>/ curves


@dataclass
class Inputs:
    """What `load` read: episode rows (summary rows, plus `origin` and the result's `pre`), the
    batches' records without their rows, and training logs."""

    rows: list[dict] = field(default_factory=list)
    batches: list[dict] = field(default_factory=list)
    logs: list[TrainingLog] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)  # one line per input: what it was read as


@dataclass
class Plot:
    """One figure: its matplotlib Figure, the series it draws (`data`, JSON-able) and a table."""

    name: str
    title: str
    caption: str
    figure: Any  # matplotlib.figure.Figure
    data: dict
    table: list[dict]


# --- reading ------------------------------------------------------------------------------------

def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ReportError(f"{path}: not readable JSON ({type(e).__name__}: {e})") from None


def _maybe_json(path: Path) -> dict | None:
    try:
        value = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return value if isinstance(value, dict) else None


def _result_pre(run_dir: str | None, batch_dir: Path | None) -> float | None:
    """The pre score the episode's result carries (a real or surrogate eval of its base model)."""
    if not run_dir:
        return None
    candidates = [Path(run_dir)] + ([batch_dir / Path(run_dir).name] if batch_dir else [])
    for d in candidates:
        result = _maybe_json(d / "result.json")
        if result is not None:
            return result.get("pre")
    return None


def episode_row(run_dir: Path) -> dict:
    """A one-row summary (the columns of a batch's summary.json) from an episode's run folder:
    reward.json, result.json and manifest.json when a job ran, the trajectory's reset and turns.
    `seconds` and `usd` stay None: the folder does not record them (the agent's dollars are in
    the cost ledger, `trainergym costs --episode ID`)."""
    run_dir = Path(run_dir)
    reward = _read_json(run_dir / "reward.json")
    if not isinstance(reward, dict) or "total" not in reward:
        raise ReportError(f"{run_dir / 'reward.json'}: not an episode reward (no total)")
    result = _maybe_json(run_dir / "result.json") or {}
    manifest = _maybe_json(run_dir / "manifest.json") or {}
    reset, turns = {}, 0
    try:
        lines = (run_dir / "trajectory.jsonl").read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if event.get("event") == "reset":
            reset = event
        elif event.get("event") == "step":
            turns = max(turns, int(event.get("turn") or 0))
    task = reset.get("task") or manifest.get("task_id") or "?"
    row = {"episode_id": run_dir.name, "task": task, "family": manifest.get("family") or task,
           "seed": reset.get("seed"), "reward": reward["total"], "validated": bool(reward.get("validated")),
           "job_succeeded": result.get("status") == "succeeded", "turns": turns, "note": reward.get("note"),
           "seconds": None, "usd": None, "source": result.get("source"), "error": None,
           "gpu_usd": result.get("cost_usd"), "run_dir": str(run_dir)}
    row.update({f"r_{k}": reward.get(k) for k in TERMS})
    row["pre"] = result.get("pre")
    return row


def _tinker_source(log_dir: Path) -> str:
    """The backend named in the run's config.json (tinker-cookbook writes it beside the metrics)."""
    config = _maybe_json(log_dir / "config.json")
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                if k == "backend" and isinstance(v, str):
                    found.append(v)
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(config)
    return _backend_source(sorted(set(found)), "its config.json")


def _backend_source(backends: list[str], where: str) -> str:
    if not backends:
        return f"rewards' source not recorded in {where} (surrogate on the mock backend, measured on GPU backends)"
    if backends == ["mock"]:
        return "rewards from surrogate post scores (mock backend, not training)"
    if "mock" in backends:
        return f"rewards partly surrogate: backends {', '.join(backends)}"
    return f"rewards from measured post scores ({', '.join(backends)} backend)"


def read_tinker(path: Path) -> TrainingLog:
    """tinker-cookbook's metrics.jsonl: one record per line, `step` and the flat metric keys.
    Lines that are not JSON objects (a run still writing its last line) are skipped."""
    series: dict[str, dict[int, float]] = {}
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(record, dict) or not isinstance(record.get("step"), int):
            continue
        for key, value in record.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                series.setdefault(key, {})[record["step"]] = float(value)  # a resumed run's later row wins

    def pairs(key: str) -> list[tuple[int, float]]:
        return sorted(series[key].items())

    held_out = {k: pairs(k) for k in sorted(series) if _TINKER_HELD_OUT.match(k)}
    if TINKER_TRAIN_KEY not in series and not held_out:
        raise ReportError(f"{path}: a .jsonl without {TINKER_TRAIN_KEY} or a held-out reward: not a "
                          "tinker-cookbook metrics.jsonl of an RL run")
    tags = {m.group(1): pairs(k) for k in sorted(series) if (m := _TINKER_TAG.match(k))
            and m.group(1) not in _TINKER_SHARED_TAGS}
    return TrainingLog(name=path.parent.name or path.name, path=path, kind="tinker", source=_tinker_source(path.parent),
                       train=pairs(TINKER_TRAIN_KEY) if TINKER_TRAIN_KEY in series else [],
                       train_key=TINKER_TRAIN_KEY, held_out=held_out, per_tag=tags)


def read_trl(path: Path, state: dict | None = None) -> TrainingLog:
    """TRL's trainer_state.json: `log_history` entries, each with its `step`."""
    state = state if state is not None else _read_json(path)
    history = state.get("log_history") if isinstance(state, dict) else None
    if not isinstance(history, list):
        raise ReportError(f"{path}: no log_history: not a transformers/TRL trainer_state.json")
    train: dict[int, float] = {}
    held: dict[str, dict[int, float]] = {}
    for entry in history:
        if not isinstance(entry, dict) or not isinstance(entry.get("step"), int):
            continue
        for key, value in entry.items():
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
                continue
            if key == TRL_TRAIN_KEY:
                train[entry["step"]] = float(value)
            elif _TRL_HELD_OUT.match(key):
                held.setdefault(key, {})[entry["step"]] = float(value)
    if not train and not held:
        raise ReportError(f"{path}: its log_history has no `{TRL_TRAIN_KEY}` or `eval_reward`: not a GRPOTrainer run")
    run_dir = path.parent.parent if path.parent.name.startswith("checkpoint-") else path.parent
    name = run_dir.name
    return TrainingLog(name=name or path.name, path=path, kind="trl",
                       source=_backend_source([], "trainer_state.json"), train=sorted(train.items()),
                       train_key=TRL_TRAIN_KEY, held_out={k: sorted(v.items()) for k, v in sorted(held.items())})


def _latest_checkpoint_state(directory: Path) -> Path | None:
    """trainer_state.json of the output dir, else of its highest checkpoint-<step> (the fullest history)."""
    if (directory / "trainer_state.json").is_file():
        return directory / "trainer_state.json"
    states = [(int(p.parent.name.split("-", 1)[1]), p) for p in directory.glob("checkpoint-*/trainer_state.json")
              if p.parent.name.split("-", 1)[1].isdigit()]
    return max(states)[1] if states else None


def _add_batch(into: Inputs, path: Path) -> None:
    record = read_summary(path)
    batch_dir = path if path.is_dir() else path.parent
    origin = record.get("batch_id") or batch_dir.name
    for row in record["episodes"]:
        into.rows.append({**row, "origin": origin, "pre": _result_pre(row.get("run_dir"), batch_dir)})
    into.batches.append({k: v for k, v in record.items() if k != "episodes"} | {"path": str(path)})
    into.sources.append(f"{path}: batch {origin}, {len(record['episodes'])} episodes")


def _add_episode(into: Inputs, run_dir: Path) -> None:
    row = episode_row(run_dir)
    into.rows.append({**row, "origin": "episode"})
    into.sources.append(f"{run_dir}: episode {row['episode_id']}")


def _add_log(into: Inputs, log: TrainingLog) -> None:
    into.logs.append(log)
    into.sources.append(f"{log.path}: {log.kind} training log, {len(log.train)} steps")


def load(inputs: list[Path]) -> Inputs:
    """Read every input by what it is; ReportError (one line) for anything else. An episode that
    comes twice (a batch and its own folder) is kept once, as first read."""
    out = Inputs()
    for raw in inputs:
        path = Path(raw)
        if not path.exists():
            raise ReportError(f"{path}: no such file or directory")
        if path.is_dir():
            if (path / "summary.json").is_file():
                _add_batch(out, path)
            elif (path / "reward.json").is_file():
                _add_episode(out, path)
            elif (path / "metrics.jsonl").is_file():
                _add_log(out, read_tinker(path / "metrics.jsonl"))
            elif state := _latest_checkpoint_state(path):
                _add_log(out, read_trl(state))
            else:
                raise ReportError(f"{path}: not a batch (summary.json), an episode run folder (reward.json), a Tinker "
                                  "log dir (metrics.jsonl) or a TRL output dir (trainer_state.json)")
        elif path.suffix == ".jsonl":
            _add_log(out, read_tinker(path))
        elif path.suffix == ".json":
            record = _read_json(path)
            if isinstance(record, dict) and isinstance(record.get("episodes"), list):
                _add_batch(out, path)
            elif isinstance(record, dict) and "log_history" in record:
                _add_log(out, read_trl(path, record))
            elif isinstance(record, dict) and path.name == "reward.json":
                _add_episode(out, path.parent)
            else:
                raise ReportError(f"{path}: JSON that is neither a batch summary (episodes), an episode's reward.json "
                                  "nor a trainer_state.json (log_history)")
        else:
            raise ReportError(f"{path}: not a batch, episode run folder, metrics.jsonl or trainer_state.json")
    seen: set[str] = set()
    unique = []
    for row in out.rows:
        if row.get("episode_id") not in seen or row.get("episode_id") in (None, "-"):
            seen.add(row.get("episode_id"))
            unique.append(row)
    out.rows = unique
    return out


# --- numbers ------------------------------------------------------------------------------------

def _num(value: Any) -> float | None:
    """A finite float, or None (missing, NaN: a crashed episode's reward)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _crashed(row: dict) -> bool:
    return bool(row.get("error")) or _num(row.get("reward")) is None


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def contributions(row: dict) -> dict[str, float | None]:
    """The reward's weighted parts: 0.35·V, 0.60·Q, 0.05·S, and `other` (what the total holds
    beyond them: -0.1 for no parseable submission); all None for an episode that raised."""
    total = _num(row.get("reward"))
    if total is None:
        return {"validation": None, "quality": None, "speed": None, "other": None, "total": None}
    v = W_VALIDATION * (_num(row.get("r_validation")) or 0.0)
    q = W_QUALITY * (_num(row.get("r_job_quality")) or 0.0)
    s = W_SPEED * (_num(row.get("r_speed")) or 0.0)
    other = total - (v + q + s)
    return {"validation": v, "quality": q, "speed": s, "other": other if abs(other) > 1e-9 else 0.0, "total": total}


def sources_line(rows: list[dict]) -> str:
    """Where the rows' post scores come from, in words: what every figure of episodes states."""
    counts: dict[str, int] = {}
    for r in rows:
        if r.get("source") and _num(r.get("r_post")) is not None:  # a failed job has a source but no post
            counts[r["source"]] = counts.get(r["source"], 0) + 1
    if not counts:
        return "post scores: none (no job finished training)"
    if len(counts) == 1:
        (source, _), = counts.items()
        return f"post scores: {SOURCE_WORDS.get(source, source)}"
    return "post scores: mixed, " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))


def _family_best_pre_source(family: str, best_pre: float | None) -> str | None:
    """The provenance of the family's best untrained baseline (reported/measured/surrogate) when this
    installation's value is the one the episodes used."""
    from trainergym.task import baselines

    try:
        b = baselines.best_pre(family)
    except (KeyError, ValueError):
        return None
    return b.source if best_pre is not None and abs(b.score - best_pre) < 1e-9 else None


# --- drawing ------------------------------------------------------------------------------------

def _matplotlib() -> tuple[Any, Any]:
    """(Figure, FigureCanvasAgg): figures drawn on the Agg canvas, without pyplot's global state."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise ReportError(INSTALL_HINT) from None
    return Figure, FigureCanvasAgg


def _figure(width: float, height: float = 4.2) -> Any:
    Figure, FigureCanvasAgg = _matplotlib()
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _text(s: str) -> str:
    """Text for matplotlib: a dollar sign is literal here, not the start of mathtext."""
    return s.replace("$", r"\$")


def _title(fig: Any, title: str) -> None:
    """The figure's title, wrapped to its width (a long title would be cut, not shrunk)."""
    fig.suptitle(_text(textwrap.fill(title, int(fig.get_figwidth() * 11))), fontsize=10)


def _legend(fig: Any, ax: Any) -> None:
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        fig.legend(handles, [_text(x) for x in labels], loc="outside lower center", ncol=2, fontsize=7, frameon=False)


def _width(n: int) -> float:
    return max(7.0, min(22.0, 2.5 + 0.35 * n))


def _episode_labels(rows: list[dict]) -> list[str]:
    return [str(i) for i in range(len(rows))]


def plot_decomposition(rows: list[dict]) -> Plot:
    """Each episode's reward stacked by term (positive parts up, negative down), its total marked,
    crashed episodes marked with a red x; quality from a surrogate post score is hatched."""
    parts = [contributions(r) for r in rows]
    crashed = [_crashed(r) for r in rows]
    surrogate = [r.get("source") == "surrogate" for r in rows]
    fig = _figure(_width(len(rows)))
    ax = fig.add_subplot()
    xs = list(range(len(rows)))
    up, down = [0.0] * len(rows), [0.0] * len(rows)
    styles = [("validation", f"{W_VALIDATION:.2f}·validation", "#4C72B0"),
              ("quality", f"{W_QUALITY:.2f}·job quality", "#55A868"),
              ("speed", f"{W_SPEED:.2f}·speed", "#C44E52"),
              ("other", "no parseable submission", "#8C8C8C")]
    for key, label, color in styles:
        values = [p[key] or 0.0 for p in parts]
        if key == "other" and not any(values):
            continue
        bottoms = [up[i] if v >= 0 else down[i] for i, v in enumerate(values)]
        hatches = ["//" if key == "quality" and surrogate[i] else "" for i in xs]
        bars = ax.bar(xs, values, bottom=bottoms, color=color, label=label, width=0.75, edgecolor="white", linewidth=0.3)
        for bar, hatch in zip(bars, hatches):
            bar.set_hatch(hatch)
        for i, v in enumerate(values):
            (up if v >= 0 else down)[i] += v
    totals = [p["total"] for p in parts]
    ax.scatter([x for x, t in zip(xs, totals) if t is not None], [t for t in totals if t is not None],
               marker="D", s=18, color="black", zorder=3, label="total reward")
    if any(crashed):
        ax.scatter([x for x, c in zip(xs, crashed) if c], [max(up[x], 0.0) + 0.04 for x, c in zip(xs, crashed) if c],
                   marker="x", s=50, color="red", zorder=4, label="crashed (not the agent's doing)")
    if any(surrogate):
        ax.bar([0], [0], color="white", edgecolor="#55A868", hatch="//", label="hatched: quality on a surrogate post")
    ax.axhline(0, color="black", linewidth=0.6)
    ax.set_xticks(xs, _episode_labels(rows) if len(rows) <= 60 else [""] * len(rows), fontsize=7)
    ax.set_xlabel("episode (index in the table below)")
    ax.set_ylabel("reward contribution")
    src = sources_line(rows)
    title = f"Reward decomposition per episode ({src})"
    _title(fig, title)
    _legend(fig, ax)
    caption = (f"Stacked: {W_VALIDATION}·validation + {W_QUALITY}·job_quality + {W_SPEED}·speed = the episode reward "
               f"(black diamond); {src}. Crashed episodes (red x) are apart from the agent's record"
               + (f": {sum(crashed)} of {len(rows)}." if any(crashed) else ": none."))
    data = {"episode_id": [r.get("episode_id") for r in rows], "origin": [r.get("origin") for r in rows],
            "source": [r.get("source") for r in rows], "crashed": crashed,
            **{k: [p[k] for p in parts] for k in ("validation", "quality", "speed", "other", "total")},
            "weights": {"validation": W_VALIDATION, "quality": W_QUALITY, "speed": W_SPEED}}
    table = [{"#": i, "episode": r.get("episode_id"), "family": r.get("family"), "source": r.get("source") or "-",
              "0.35·V": p["validation"], "0.60·Q": p["quality"], "0.05·S": p["speed"], "reward": p["total"],
              "crashed": r.get("error") or ("yes" if c else "")}
             for i, (r, p, c) in enumerate(zip(rows, parts, crashed))]
    return Plot("reward_decomposition", title, caption, fig, data, table)


def _families(rows: list[dict]) -> list[str]:
    return sorted({r.get("family") or r.get("task") or "?" for r in rows})


def plot_reward_by_family(rows: list[dict], seed: int = 0) -> Plot:
    """Mean episode reward per family with a 95% bootstrap interval over its episodes (crashed
    episodes left out, as in the held-out table), each episode a dot."""
    fams = _families(rows)
    stats = []
    for fam in fams:
        values = [_num(r["reward"]) for r in rows if (r.get("family") or r.get("task") or "?") == fam and not _crashed(r)]
        values = [v for v in values if v is not None]
        lo, hi = bootstrap_ci(values, seed=seed) if values else (None, None)  # compare's: the same intervals
        fam_rows = [r for r in rows if (r.get("family") or r.get("task") or "?") == fam]
        stats.append({"family": fam, "n": len(values), "crashed": len(fam_rows) - len(values), "mean": _mean(values),
                      "ci95_low": lo, "ci95_high": hi, "values": values, "sources": sorted({r["source"] for r in fam_rows if r.get("source")})})
    fig = _figure(max(6.0, 1.2 * len(fams) + 3))
    ax = fig.add_subplot()
    xs = list(range(len(fams)))
    means = [s["mean"] if s["mean"] is not None else 0.0 for s in stats]
    err = [[(s["mean"] - s["ci95_low"]) if s["mean"] is not None else 0.0 for s in stats],
           [(s["ci95_high"] - s["mean"]) if s["mean"] is not None else 0.0 for s in stats]]
    ax.bar(xs, means, width=0.6, yerr=err, capsize=6, color="#4C72B0", alpha=0.8, label="mean reward, 95% bootstrap interval")
    for x, s in zip(xs, stats):
        k = len(s["values"])
        ax.scatter([x - 0.25 + 0.5 * (j + 0.5) / k for j in range(k)], s["values"], s=10, color="black", zorder=3)
    ax.axhline(0, color="black", linewidth=0.6)
    ax.set_xlim(-0.6, len(fams) - 0.4)
    ax.set_xticks(xs, [f"{s['family']}\n(n={s['n']})" for s in stats], fontsize=8)
    ax.set_ylabel("episode reward")
    src = sources_line(rows)
    title = f"Reward by family, 95% intervals ({src})"
    _title(fig, title)
    _legend(fig, ax)
    caption = (f"Bars: mean reward over the family's episodes that did not crash; whiskers: percentile bootstrap "
               f"({RESAMPLES} resamples of episodes, seed {seed}); dots: episodes. {src}.")
    data = {"seed": seed, "resamples": RESAMPLES, "families": stats}
    table = [{k: v for k, v in s.items() if k != "values"} | {"sources": ", ".join(s["sources"]) or "-"} for s in stats]
    return Plot("reward_by_family", title, caption, fig, data, table)


def plot_post_vs_pre(rows: list[dict]) -> Plot:
    """Per family: the best untrained model's score (best_pre), the result's own pre where it has one,
    and the trained model's post (mean over jobs that succeeded; dots per job)."""
    fams = _families(rows)
    stats = []
    for fam in fams:
        fam_rows = [r for r in rows if (r.get("family") or r.get("task") or "?") == fam]
        best = [v for r in fam_rows if (v := _num(r.get("r_best_pre"))) is not None]
        pre = [v for r in fam_rows if (v := _num(r.get("pre"))) is not None]
        post_rows = [r for r in fam_rows if _num(r.get("r_post")) is not None]
        best_pre = _mean(best)
        stats.append({"family": fam, "best_pre": best_pre, "best_pre_source": _family_best_pre_source(fam, best_pre),
                      "pre": _mean(pre), "n_pre": len(pre), "post": _mean([r["r_post"] for r in post_rows]),
                      "n_post": len(post_rows), "posts": [r["r_post"] for r in post_rows],
                      "post_sources": [r.get("source") for r in post_rows],
                      "post_expected": _mean([v for r in post_rows if (v := _num(r.get("r_post_expected"))) is not None])})
    fig = _figure(max(6.0, 1.6 * len(fams) + 3))
    ax = fig.add_subplot()
    width = 0.26
    series = [("best_pre", "best_pre (best untrained model)", "#8C8C8C", -width),
              ("pre", "pre (the result's base model, where recorded)", "#CCB974", 0.0),
              ("post", "post (trained; mean over succeeded jobs)", "#55A868", width)]
    for key, label, color, dx in series:
        xs = [i + dx for i, s in enumerate(stats) if s[key] is not None]
        ys = [s[key] for s in stats if s[key] is not None]
        if ys:
            ax.bar(xs, ys, width=width, color=color, label=label)
    for i, s in enumerate(stats):
        for post, source in zip(s["posts"], s["post_sources"]):
            ax.scatter([i + width], [post], s=12, zorder=3, color="black" if source == "measured" else "white",
                       edgecolors="black", linewidths=0.6)
    ax.scatter([], [], s=12, color="black", label="a measured post")
    ax.scatter([], [], s=12, color="white", edgecolors="black", label="a surrogate post")
    ax.set_ylim(0, 1.05)
    ax.set_xticks(range(len(stats)), [f"{s['family']}\n(jobs={s['n_post']})" for s in stats], fontsize=8)
    ax.set_ylabel("hidden-eval score")
    src = sources_line(rows)
    title = f"Post vs best_pre per family ({src})"
    _title(fig, title)
    _legend(fig, ax)
    provenance = ", ".join(f"{s['family']}: {s['best_pre_source']}" for s in stats if s["best_pre_source"])
    caption = (f"{src}. best_pre is the frozen baseline the uplift is measured against"
               + (f" (provenance {provenance})" if provenance else "") + "; pre is the result's own score of its base "
               "model (same source as its post). A surrogate result's noise-free post_expected is in the table.")
    data = {"families": stats}
    table = [{k: v for k, v in s.items() if k not in ("posts", "post_sources")} for s in stats]
    return Plot("post_vs_pre", title, caption, fig, data, table)


def plot_cost(rows: list[dict]) -> Plot:
    """Dollars per episode, stacked: the agent's LLM spend (metered calls) and the job's GPU bill,
    measured and surrogate in their own colours, never one bar for both."""
    llm = [_num(r.get("usd")) or 0.0 for r in rows]
    gpu = {"measured": [], "surrogate": [], "unknown": []}
    for r in rows:
        g = _num(r.get("gpu_usd")) or 0.0
        source = "measured" if str(r.get("source") or "").startswith("measured") else r.get("source")  # mini scale too
        kind = source if source in ("measured", "surrogate") else "unknown"
        for k in gpu:
            gpu[k].append(g if k == kind else 0.0)
    fig = _figure(_width(len(rows)))
    ax = fig.add_subplot()
    xs = list(range(len(rows)))
    bottom = [0.0] * len(rows)
    styles = [("agent LLM $ (measured: metered model calls)", llm, "#4C72B0", ""),
              ("GPU $ measured (billed)", gpu["measured"], "#C44E52", ""),
              ("GPU $ SURROGATE (the mock backend's simulated bill, not spent)", gpu["surrogate"], "#F2B8B8", "//"),
              ("GPU $ of unknown source", gpu["unknown"], "#8C8C8C", "")]
    for label, values, color, hatch in styles:
        if any(values):
            ax.bar(xs, values, bottom=bottom, color=color, hatch=hatch, label=label, width=0.75, edgecolor="white", linewidth=0.3)
            bottom = [b + v for b, v in zip(bottom, values)]
    ax.set_xticks(xs, _episode_labels(rows) if len(rows) <= 60 else [""] * len(rows), fontsize=7)
    ax.set_xlabel("episode (index in the table below)")
    ax.set_ylabel("US dollars")
    recorded_llm = sum(1 for r in rows if _num(r.get("usd")) is not None)
    gpu_words = [w for w, k in (("measured", "measured"), ("SURROGATE", "surrogate"), ("unknown", "unknown")) if any(gpu[k])]
    title = (f"Cost per episode (GPU $: {' + '.join(gpu_words) or 'none'}; "
             f"agent LLM $: {'measured' if recorded_llm else 'none recorded'})")
    _title(fig, title)
    if any(bottom):
        _legend(fig, ax)
    totals = {"llm_usd": sum(llm), **{f"gpu_{k}_usd": sum(v) for k, v in gpu.items()}}
    caption = (f"Totals: agent LLM ${totals['llm_usd']:.4f} (metered, {recorded_llm} of {len(rows)} episodes have a "
               f"record; a scripted agent has none, a single episode folder keeps it in the ledger: trainergym costs "
               f"--episode ID); GPU ${totals['gpu_measured_usd']:.4f} measured, ${totals['gpu_surrogate_usd']:.4f} "
               "surrogate (simulated by the mock backend, never spent).")
    data = {"episode_id": [r.get("episode_id") for r in rows], "llm_usd": llm,
            "llm_recorded": [_num(r.get("usd")) is not None for r in rows],
            **{f"gpu_{k}_usd": v for k, v in gpu.items()}, "totals": totals}
    table = [{"#": i, "episode": r.get("episode_id"), "agent LLM $": _num(r.get("usd")), "GPU $": _num(r.get("gpu_usd")),
              "GPU source": r.get("source") or "-"} for i, r in enumerate(rows)]
    return Plot("cost", title, caption, fig, data, table)


def plot_training(log: TrainingLog, index: int = 0) -> Plot:
    """Reward over training steps, with the held-out curve(s) when the log has them."""
    fig = _figure(8.5)
    ax = fig.add_subplot()
    if log.train:
        ax.plot(*zip(*log.train), color="#4C72B0", linewidth=1.6, label=f"train ({log.train_key})")
    for tag, points in log.per_tag.items():
        ax.plot(*zip(*points), linewidth=0.8, linestyle="--", alpha=0.7, label=f"train, {tag}")
    for key, points in log.held_out.items():
        ax.plot(*zip(*points), marker="o", markersize=4, linewidth=1.4, color="#C44E52" if len(log.held_out) == 1 else None,
                label=f"held-out ({key})")
    ax.set_xlabel("training step")
    ax.set_ylabel("mean episode reward")
    title = f"Reward over steps: {log.kind} run {log.name} ({log.source})"
    _title(fig, title)
    _legend(fig, ax)
    caption = (f"From {log.path}. {log.source}. " + (f"Held-out: {', '.join(log.held_out)}." if log.held_out
                                                        else "No held-out curve in this log."))
    data = {"path": str(log.path), "kind": log.kind, "source": log.source,
            "train": {"key": log.train_key, "steps": [s for s, _ in log.train], "values": [v for _, v in log.train]},
            "held_out": {k: {"steps": [s for s, _ in p], "values": [v for _, v in p]} for k, p in log.held_out.items()},
            "per_tag": {k: {"steps": [s for s, _ in p], "values": [v for _, v in p]} for k, p in log.per_tag.items()}}
    last = lambda points: points[-1][1] if points else None  # noqa: E731
    table = [{"series": f"train ({log.train_key})", "points": len(log.train), "first": log.train[0][1] if log.train else None,
              "last": last(log.train), "max": max((v for _, v in log.train), default=None)}]
    table += [{"series": f"held-out ({k})", "points": len(p), "first": p[0][1], "last": last(p),
               "max": max(v for _, v in p)} for k, p in log.held_out.items()]
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", log.name)[:60]
    return Plot(f"training_{index}_{log.kind}_{safe}", title, caption, fig, data, table)


def build(data: Inputs, seed: int = 0) -> list[Plot]:
    """Every figure the inputs support: the four episode figures when there are episodes, one
    reward curve per training log."""
    _matplotlib()
    plots = []
    if data.rows:
        plots += [plot_decomposition(data.rows), plot_reward_by_family(data.rows, seed),
                  plot_post_vs_pre(data.rows), plot_cost(data.rows)]
    plots += [plot_training(log, i) for i, log in enumerate(data.logs)]
    return plots


# --- writing ------------------------------------------------------------------------------------

def _jsonable(value: Any) -> Any:
    """Strict JSON: NaN and infinities become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, metadata={"Software": None})  # no version stamp: reproducible bytes
    return buf.getvalue()


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return "-" if not math.isfinite(value) else f"{value:.4f}"
    if value is None:
        return "-"
    if isinstance(value, (list, tuple)):
        return html.escape(", ".join(str(v) for v in value))
    return html.escape(str(value))


def _table(rows: list[dict]) -> str:
    if not rows:
        return ""
    head = "".join(f"<th>{html.escape(str(k))}</th>" for k in rows[0])
    body = "".join("<tr>" + "".join(f"<td>{_cell(v)}</td>" for v in r.values()) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


_STYLE = ("body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}"
          "table{border-collapse:collapse;font-size:12px;margin:.5em 0 2em}td,th{border:1px solid #ccc;padding:2px 6px}"
          "td{text-align:right}img{max-width:100%}.caption{font-size:13px;color:#444}")


def write_html(out: Path, data: Inputs, plots: list[Plot], pngs: dict[str, bytes]) -> Path:
    """report.html: the inputs, each batch's held-out table, then every figure inlined with its table."""
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>trainergym report</title>"
             f"<style>{_STYLE}</style></head><body><h1>trainergym report</h1>",
             "<h2>Inputs</h2><ul>" + "".join(f"<li>{html.escape(s)}</li>" for s in data.sources) + "</ul>"]
    if data.batches:
        rows = [{"batch": b.get("batch_id"), "agent": b.get("agent"), "backend": b.get("backend"),
                 **{k: v for k, v in (b.get("table") or {}).items()}} for b in data.batches]
        parts.append("<h2>Batches (held-out table)</h2>" + _table(rows))
    if data.rows:
        parts.append(f"<p class='caption'>Episodes: {len(data.rows)}; {html.escape(sources_line(data.rows))}.</p>")
    for p in plots:
        b64 = base64.b64encode(pngs[p.name]).decode()
        parts.append(f"<section id='{p.name}'><h2>{html.escape(p.title)}</h2>"
                     f"<img alt='{html.escape(p.title, quote=True)}' src='data:image/png;base64,{b64}'>"
                     f"<p class='caption'>{html.escape(p.caption)}</p>{_table(p.table)}</section>")
    parts.append("</body></html>")
    path = out / HTML_NAME
    path.write_text("\n".join(parts))
    return path


def report(inputs: list[Path], out: Path, seed: int = 0) -> list[Path]:
    """Read `inputs`, draw every figure they support into `out` (created) as `<name>.png` with
    `<name>.json` (the plotted series) beside it, and `report.html`; returns the written paths,
    the HTML last. ReportError (one line) for an unreadable input, no inputs, or no matplotlib."""
    _matplotlib()
    if not inputs:
        raise ReportError("nothing to report: give batch folders, summary.json files, episode run folders or training logs")
    data = load(list(inputs))
    plots = build(data, seed)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written, pngs = [], {}
    for p in plots:
        pngs[p.name] = _png(p.figure)
        (out / f"{p.name}.png").write_bytes(pngs[p.name])
        (out / f"{p.name}.json").write_text(json.dumps(_jsonable({"title": p.title, "caption": p.caption, **p.data}), indent=1))
        written += [out / f"{p.name}.png", out / f"{p.name}.json"]
    written.append(write_html(out, data, plots, pngs))
    return written
