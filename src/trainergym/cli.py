"""`trainergym` command line."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text
from typer.core import TyperGroup

from trainergym.env.transcript import printable
from trainergym.job.result import source_label
from trainergym.paths import data_dir


class _OneLineErrors(TyperGroup):
    """The option parser's errors (an unknown option, a count out of range) in the same one line as
    ours, instead of Typer's usage banner and boxed panel: a log or an agent reads one line."""

    def main(self, *args, standalone_mode: bool = True, **kwargs):
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        try:
            status = super().main(*args, standalone_mode=False, **kwargs)
        except typer.TyperException as e:  # Typer's own click: a usage error, a bad parameter
            if type(e).__name__ != "NoArgsIsHelpError":  # the help is already printed
                where = e.ctx.command_path if getattr(e, "ctx", None) else "trainergym"
                what = (e.format_message() if hasattr(e, "format_message") else str(e)).rstrip(".")
                _usage_error(f"{where}: {what}; `{where} --help` lists what it takes")
            sys.exit(e.exit_code)
        except typer.Abort:
            sys.exit(1)
        sys.exit(status if isinstance(status, int) else 0)


app = typer.Typer(cls=_OneLineErrors, add_completion=False, no_args_is_help=True,
                  help="Writing an RL training job, as an environment.")
# Piped or redirected output is read in files and logs, not an 80-column terminal: tables get room.
console = Console(width=None if sys.stdout.isatty() or "COLUMNS" in os.environ else 160)


def _working(what: str):
    """A spinner on stderr while something slow runs (an episode, a probe); nothing when stderr is
    not a terminal."""
    return Console(stderr=True).status(what)


from trainergym.backends.measure import baselines_app  # noqa: E402 - a sub-app: trainergym baselines ...

app.add_typer(baselines_app, name="baselines")


@app.callback()
def main() -> None:
    """trainergym: run episodes of the WriteTrainingJob environment."""


# Options shared by the commands that run episodes (episode, batch, eval-agent).
TASK = typer.Option(None, help="task file (e.g. examples/tasks/calc_chain.toml)")
FAMILY = typer.Option(None, help="family id, when no task file is given")
AGENT = typer.Option("reference", help="reference | naive | llm")
BACKEND = typer.Option("mock", help="mock (a surrogate, no GPU) | local (this host's GPUs) | runpod (rented pods; "
                                            "jobs run once `trainergym worker --backend runpod` drains the queue) | "
                                            "mini (real GRPO of a tiny model here, on a GPU or the CPU; extra mini)")
BASE_MODEL = typer.Option(None, "--base-model", help="mini backend: a local Hugging Face model directory to train "
                                                     "instead of the family's mini base")
RUNS_DIR = typer.Option(Path("runs"), help="where runs/<episode-id>/ are written")
JSON = typer.Option(False, "--json", help="print one JSON object")
REWARD_NOISE = typer.Option(True, "--reward-noise/--no-reward-noise",
                            help="mock backend: the reward sees an n=200 eval's sampling noise (off: its expected post)")
# ... and those of the `llm` agent.
MODEL = typer.Option(None, help="llm agent: model id at the endpoint (default openai/gpt-4.1-mini)")
BASE_URL = typer.Option(None, help="llm agent: OpenAI-compatible base URL (default OpenRouter)")
API_KEY_ENV = typer.Option(None, help="llm agent: variable holding the API key (default OPENROUTER_API_KEY)")
BUDGET = typer.Option(None, min=0.0, help="llm agent: dollars one episode may spend; it stops before passing them")
STREAM = typer.Option(False, "--stream", help="llm agent: stream responses")
PRICES = typer.Option(None, help="llm agent: TOML file of prices per model, over the packaged table")


def _agent_factory(agent: str, model, base_url, api_key_env, budget_usd, stream, prices):
    """A zero-argument maker of fresh agents (one per episode); errors surface now, not mid-batch."""
    from trainergym.agents import make_agent

    llm = {"model": model, "base_url": base_url, "api_key_env": api_key_env, "budget_usd": budget_usd,
           "stream": stream, "prices": prices} if agent == "llm" else {}
    try:
        make_agent(agent, **llm)
    except OSError as e:
        raise _usage_error(f"--prices {prices} cannot be read: {e.strerror or e}") from None
    except ValueError as e:  # an unknown agent or model, a prices file that is not TOML
        raise _usage_error(str(e) if prices is None else f"{e} (--prices {prices})") from None
    return lambda: make_agent(agent, **llm)


def _agent_label(agent: str, model: Optional[str]) -> str:
    """How a batch names its agent: `llm:<model>` for the llm agent (which model is what differs)."""
    if agent != "llm":
        return agent
    from trainergym.agents.llm import LLMConfig

    return f"llm:{model or LLMConfig.model_fields['model'].default}"


def _usage_error(message: str) -> typer.Exit:
    """One line on stderr for a user error (printed as it is: `[[rung]]` is no markup); the caller
    raises the returned exit (status 2)."""
    Console(stderr=True).print(Text.assemble(("error: ", "red"), " ".join(message.split())), highlight=False, soft_wrap=True)
    return typer.Exit(2)


def _task(task: Optional[Path], family: Optional[str]):
    """The task spec named by --task or --family (None when neither is given), or one line saying
    what is wrong with them (exit 2)."""
    import tomllib

    from trainergym.task.spec import load_task

    if task is not None and family is not None:
        raise _usage_error("give --task or --family, not both")
    if task is None and family is None:
        return None
    try:
        return load_task(task or family)
    except KeyError as e:  # an unknown family
        raise _usage_error(e.args[0]) from None
    except tomllib.TOMLDecodeError as e:
        raise _usage_error(f"task file {task} is not valid TOML: {e}") from None
    except (ValueError, OSError) as e:
        raise _usage_error(str(e)) from None


def _queue(db: Optional[Path], lease_seconds: Optional[float] = None):
    """The job queue at --db (default `<data dir>/jobs.db`), or one line when its directory does not
    exist (a typo must not create a new, empty queue somewhere)."""
    from trainergym.infra.queue import JobQueue

    if db is not None and not db.parent.is_dir():
        raise _usage_error(f"--db {db}: the directory {db.parent} does not exist; give the path of a queue database "
                           "(default <data dir>/jobs.db)")
    try:
        return JobQueue(db or data_dir() / "jobs.db", **({"lease_seconds": lease_seconds} if lease_seconds else {}))
    except Exception as e:  # noqa: BLE001 - sqlite3 and OS errors: not a database we can open
        raise _usage_error(f"--db {db or data_dir() / 'jobs.db'} cannot be opened as a queue: {e}") from None


def _writable_dir(path: Path, option: str) -> Path:
    """`path`, created if needed, or one line saying it cannot be written (exit 2)."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise _usage_error(f"{option} {path} cannot be created: {e.strerror or e}; give a writable directory") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise _usage_error(f"{option} {path} is not writable; give a writable directory")
    return path


def _backend(name: str, worker: bool = False, **options):
    """The backend called `name`, or one line saying why it cannot run here (exit 2)."""
    from trainergym.backends import BackendUnavailable, make_backend

    if name == "fleet" and not worker:
        raise _usage_error("the fleet backend is the worker's simulated fleet: use `trainergym worker --backend mock`")
    if options.get("base_model") is not None and name != "mini":
        raise _usage_error(f"--base-model is the mini backend's (--backend mini), not {name}'s")
    options = {k: v for k, v in options.items() if not (k == "base_model" and v is None)}
    try:
        return make_backend(name, **options)
    except (ValueError, BackendUnavailable) as e:
        raise _usage_error(str(e)) from None


def _options(task: Optional[Path], family: Optional[str]) -> Optional[dict]:
    """The episode options for --task / --family, checked now rather than mid-episode (the task,
    and the baselines its reward is paid against)."""
    from trainergym.task import baselines

    spec = _task(task, family)
    try:
        baselines.best_pre(spec.family if spec else "calc_chain")
    except baselines.BaselineFileError as e:
        raise _usage_error(str(e)) from None
    return {"task": task or family} if (task or family) else None


@app.command()
def episode(
    task: Optional[Path] = TASK,
    family: Optional[str] = FAMILY,
    agent: str = AGENT,
    backend: str = BACKEND,
    seed: int = typer.Option(0, help="seed of the backend's noise and the episode"),
    runs_dir: Path = RUNS_DIR,
    reward_noise: bool = REWARD_NOISE,
    as_json: bool = JSON,
    model: Optional[str] = MODEL, base_url: Optional[str] = BASE_URL, api_key_env: Optional[str] = API_KEY_ENV,
    budget_usd: Optional[float] = BUDGET, stream: bool = STREAM, prices: Optional[Path] = PRICES,
    base_model: Optional[Path] = BASE_MODEL,
) -> None:
    """Run one episode and show its reward breakdown (and, for the llm agent, tokens and dollars)."""
    from trainergym.agents import run_episode
    from trainergym.env.core import AsyncTrainerEnv

    options = _options(task, family)
    the_agent = _agent_factory(agent, model, base_url, api_key_env, budget_usd, stream, prices)()
    runs_dir = _writable_dir(runs_dir, "--runs-dir")
    env = AsyncTrainerEnv(backend=_backend(backend, seed=seed, base_model=base_model), runs_dir=runs_dir,
                          reward_noise=reward_noise)
    try:
        with _working(f"episode running ({agent} agent, {backend} backend)"):
            info = asyncio.run(run_episode(env, the_agent, seed=seed, options=options))
    finally:
        env.close()
    ep = env.episode
    usage = getattr(the_agent, "usage", None)
    out = {
        "episode_id": ep.id, "task": ep.task.id, "agent": agent, "backend": backend, "seed": seed,
        "turns": ep.turns, "attempts": ep.attempts, "reward": info["reward_breakdown"],
        "result": info.get("result"), "run_dir": str(env.run_path), "truncated_reason": info.get("truncated_reason"),
        "crashed": info.get("crashed"),
    }
    if usage is not None:
        out["llm"] = {"model": the_agent.config.model, "calls": usage.calls, "prompt_tokens": usage.prompt_tokens,
                      "completion_tokens": usage.completion_tokens, "usd": round(usage.usd, 6),
                      "usd_source": sorted(usage.sources)}
        (env.run_path / "messages.json").write_text(json.dumps(the_agent.messages, indent=1))
    if as_json:
        print(json.dumps(out))
        raise typer.Exit(1 if out["crashed"] else 0)
    r = info["reward_breakdown"]
    res = info.get("result") or {}
    table = Table(title=f"episode {ep.id}  ({agent} agent, {backend} backend)")
    table.add_column("term")
    table.add_column("value", justify="right")
    table.add_column("source")
    fmt = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731
    src = source_label(res.get("source"), res.get("scale")) or "-"
    table.add_row("validation", fmt(r["validation"]), f"attempt {ep.valid_on_attempt or '-'} of {ep.attempts}")
    table.add_row("post (hidden eval)", fmt(r["post"]), src if r.get("reward_noise", True) else f"{src}, expected")
    if r.get("post_expected") is not None and r.get("reward_noise", True):
        table.add_row("post expected", fmt(r["post_expected"]), f"{src}, without eval noise")
    table.add_row("best_pre", fmt(r["best_pre"]), f"{r.get('best_pre_source') or 'baselines file'}"
                  + (f" ({r['best_pre_model']})" if r.get("best_pre_model") else ""))
    table.add_row("uplift", fmt(r["uplift"]), src)
    table.add_row("job quality", fmt(r["job_quality"]), "0.25 post + 0.75 uplift term")
    table.add_row("speed", fmt(r["speed"]), src)
    table.add_row("total", fmt(r["total"]), "0.35 V + 0.60 Q + 0.05 S", style="bold")
    console.print(table)
    if r.get("note"):
        console.print(printable(f"note: {r['note']}"), markup=False, soft_wrap=True)
    if res and res.get("status") not in (None, "succeeded"):
        detail = f" ({res['failure_detail']})" if res.get("failure_detail") else ""
        console.print(printable(f"job {res['status']}: {res.get('failure') or 'no reason given'}"
                                f"{' in ' + res['failed_phase'] if res.get('failed_phase') else ''}{detail}"),
                      markup=False, soft_wrap=True)
    if usage is not None:
        llm = out["llm"]
        console.print(f"{llm['model']}: {llm['calls']} calls, {llm['prompt_tokens']} prompt + {llm['completion_tokens']} "
                      f"completion tokens, ${llm['usd']:.4f} ({', '.join(llm['usd_source'])})")
    if src == "surrogate":
        console.print("[yellow]post, uplift and speed come from the mock backend's surrogate, not from training.[/yellow]")
    console.print(f"run written to {env.run_path}")
    if out["crashed"]:
        Console(stderr=True).print(printable(f"crashed: {out['crashed']}"), style="red", markup=False, soft_wrap=True)
        raise typer.Exit(1)


def _say_sources(sources: list[str]) -> None:
    """Where the post scores behind the rewards came from (none: no job ran)."""
    if "surrogate" in sources:
        console.print("[yellow]rewards use the mock backend's surrogate post scores, not training.[/yellow]")
    elif sources:
        console.print(f"post scores: {', '.join(sources)}")


def _run_many(make, backend: str, n: int, options, concurrency: int, max_gpu_jobs: int, seed: int, runs_dir: Path,
              reward_noise: bool = True, meta: dict | None = None, base_model: Optional[Path] = None):
    """Run the batch into a fresh `runs_dir/batch-<id>/` and write its summary there; returns the
    summaries and the batch folder."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from trainergym.agents.batch import new_batch_dir, run_many, write_summary

    chosen = _backend(backend, seed=seed, base_model=base_model)
    batch_dir = new_batch_dir(_writable_dir(runs_dir, "--runs-dir"))
    # On stderr, so that stdout holds only the table or the JSON (`batch --json | jq` works).
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=Console(stderr=True)) as progress:
        bar = progress.add_task("episodes", total=n)

        def done(summary) -> None:
            progress.update(bar, advance=1, description=f"last: {summary.reward:+.3f}" if summary.error is None else "last: crashed")

        summaries = asyncio.run(run_many(make, chosen, n, options, concurrency, max_gpu_jobs, seed,
                                         batch_dir, on_done=done, reward_noise=reward_noise))
    write_summary(batch_dir, summaries, {"backend": backend, "options": options, "seed": seed, "n": n,
                                         "reward_noise": reward_noise, **(meta or {})})
    return summaries, batch_dir


@app.command()
def batch(
    n: int = typer.Option(8, min=1, help="episodes to run"),
    concurrency: int = typer.Option(8, min=1, help="episodes running at once"),
    max_gpu_jobs: int = typer.Option(4, min=1, help="training jobs in flight at once"),
    task: Optional[Path] = TASK,
    family: Optional[str] = FAMILY,
    agent: str = AGENT,
    backend: str = BACKEND,
    seed: int = typer.Option(0, help="seed of the first episode (episode i gets seed + i)"),
    runs_dir: Path = RUNS_DIR,
    reward_noise: bool = REWARD_NOISE,
    as_json: bool = JSON,
    model: Optional[str] = MODEL, base_url: Optional[str] = BASE_URL, api_key_env: Optional[str] = API_KEY_ENV,
    budget_usd: Optional[float] = BUDGET, stream: bool = STREAM, prices: Optional[Path] = PRICES,
    base_model: Optional[Path] = BASE_MODEL,
) -> None:
    """Run many episodes concurrently, with a cap on GPU jobs in flight, and a progress view."""
    import dataclasses
    import time

    make = _agent_factory(agent, model, base_url, api_key_env, budget_usd, stream, prices)
    started = time.perf_counter()
    summaries, batch_dir = _run_many(make, backend, n, _options(task, family), concurrency, max_gpu_jobs, seed, runs_dir,
                                     reward_noise, meta={"agent": _agent_label(agent, model)}, base_model=base_model)
    minutes = (time.perf_counter() - started) / 60
    from trainergym.agents.batch import held_out_table

    out = {**held_out_table(summaries), "episodes_per_minute": n / minutes, "batch_dir": str(batch_dir),
           "episodes_detail": [dataclasses.asdict(s) for s in summaries]}
    crashed = sum(1 for s in summaries if s.error)
    if as_json:
        print(json.dumps(out))
        raise typer.Exit(1 if crashed else 0)
    table = Table(title=f"{n} episodes ({agent} agent, {backend} backend, concurrency {concurrency})")
    for col in ("episode", "reward", "validated", "job", "turns", "note"):
        table.add_column(col, no_wrap=col == "episode")  # an id cut short cannot be found in runs/
    for s in summaries:
        table.add_row(s.episode_id, "crashed" if s.error else f"{s.reward:+.3f}", "yes" if s.validated else "no",
                      "succeeded" if s.job_succeeded else "-", str(s.turns), Text(printable(s.error or s.note or "")))
    console.print(table)
    mean = "-" if out["mean_reward"] is None else f"{out['mean_reward']:+.3f}"
    console.print(f"mean reward {mean}; {out['episodes_per_minute']:.1f} episodes per minute")
    _say_sources(out["sources"])
    console.print(f"batch written to {batch_dir} (summary.json, summary.csv)", markup=False, soft_wrap=True)
    if crashed:
        Console(stderr=True).print(f"{crashed} of {n} episodes crashed (not counted in the mean): see the note column",
                                   style="red")
        raise typer.Exit(1)


@app.command("eval-agent")
def eval_agent(
    family: str = typer.Option("triage", help="the family to evaluate on (triage is the held-out one)"),
    n: int = typer.Option(10, min=1, help="episodes"),
    agent: str = AGENT,
    concurrency: int = typer.Option(8, min=1, help="episodes running at once"),
    max_gpu_jobs: int = typer.Option(4, min=1, help="training jobs in flight at once"),
    backend: str = BACKEND,
    seed: int = typer.Option(0, help="seed of the first episode"),
    runs_dir: Path = RUNS_DIR,
    reward_noise: bool = REWARD_NOISE,
    as_json: bool = JSON,
    model: Optional[str] = MODEL, base_url: Optional[str] = BASE_URL, api_key_env: Optional[str] = API_KEY_ENV,
    budget_usd: Optional[float] = BUDGET, stream: bool = STREAM, prices: Optional[Path] = PRICES,
    base_model: Optional[Path] = BASE_MODEL,
) -> None:
    """Evaluate an agent on one family: the original's held-out table."""
    from trainergym.agents.batch import held_out_table
    from trainergym.task.spec import get_family

    fam = get_family(_task(None, family).family)
    make = _agent_factory(agent, model, base_url, api_key_env, budget_usd, stream, prices)
    summaries, batch_dir = _run_many(make, backend, n, {"family": family}, concurrency, max_gpu_jobs, seed, runs_dir,
                                     reward_noise, meta={"agent": _agent_label(agent, model)}, base_model=base_model)
    out = {"family": family, "held_out": fam.HELD_OUT, "agent": agent, "backend": backend, **held_out_table(summaries),
           "batch_dir": str(batch_dir)}
    if as_json:
        print(json.dumps(out))
        raise typer.Exit(1 if out["crashed"] else 0)
    fmt = lambda v, pct=False: "-" if v is None else (f"{v:.0%}" if pct else f"{v:+.3f}")  # noqa: E731
    table = Table(title=f"{agent} agent on {family}{' (held out)' if fam.HELD_OUT else ''}, {n} episodes, {backend} backend")
    for col in ("mean reward", "validated", "inner jobs succeeded", "worst episode"):
        table.add_column(col, justify="right")
    table.add_row(fmt(out["mean_reward"]), fmt(out["validated"], True), fmt(out["inner_jobs_succeeded"], True),
                  fmt(out["worst_episode"]))
    console.print(table)
    _say_sources(out["sources"])
    console.print(f"batch written to {batch_dir} (summary.json, summary.csv)", markup=False, soft_wrap=True)
    if out["crashed"]:
        Console(stderr=True).print(f"{out['crashed']} of {n} episodes crashed (counted apart: not in the mean nor the "
                                   "shares); `trainergym batch` shows why", style="red")
        raise typer.Exit(1)


@app.command("show")
def show(
    run: Path = typer.Argument(..., help="an episode's run folder (runs/<episode-id>/, or inside runs/batch-<id>/)"),
    html: Optional[Path] = typer.Option(None, "--html", help="also write the page as one self-contained HTML file"),
    max_chars: Optional[int] = typer.Option(None, min=100, help="cut each tool result to this many characters"),
) -> None:
    """An episode as a readable transcript: the task, each tool call and its result (the probe's
    report among them), the job it submitted, the job's result and the reward with its sources."""
    from rich.rule import Rule
    from rich.syntax import Syntax

    from trainergym.env.transcript import TRAJECTORY_FILE, load, render

    if not (run / TRAJECTORY_FILE).is_file():
        raise _usage_error(f"{run} is not an episode's run folder (no {TRAJECTORY_FILE}); `ls runs/` lists them, and a "
                           "batch keeps its episodes in runs/batch-<id>/")
    try:
        records = load(run)
        reward = json.loads((run / "reward.json").read_text()) if (run / "reward.json").is_file() else None
        result = json.loads((run / "result.json").read_text()) if (run / "result.json").is_file() else None
    except (OSError, ValueError) as e:
        raise _usage_error(f"{run}: a record cannot be read ({e})") from None
    out = Console(record=html is not None, width=console.width)
    out.print(Rule(f"episode {run.name}"))
    out.print(render(records, max_chars=max_chars), markup=False, highlight=False)
    job = run / "workspace" / "job.toml"
    if job.is_file():
        out.print(Rule("the job (workspace/job.toml)"))
        out.print(Syntax(printable(job.read_text(errors="replace")), "toml", theme="ansi_dark"))
    if result is not None:
        out.print(Rule(f"the job's result ({source_label(result.get('source'), result.get('scale')) or '?'})"))
        keep = ("status", "failure", "failed_phase", "failure_detail", "pre", "post", "eval_n", "train_seconds",
                "steps_done", "gpu", "gpu_count", "cost_usd", "source", "scale")
        out.print(printable("\n".join(f"{k}: {result[k]}" for k in keep if result.get(k) is not None)), markup=False)
    if reward is not None:
        out.print(Rule("the reward"))
        terms = ("validation", "post", "post_expected", "source", "best_pre", "best_pre_source", "uplift",
                 "uplift_term", "job_quality", "speed", "total", "note")
        out.print(printable("\n".join(f"{k}: {reward[k]}" for k in terms if reward.get(k) not in (None, ""))), markup=False)
        if reward.get("source") == "surrogate":
            out.print("post, uplift and speed come from the mock backend's surrogate, not from training.", style="yellow")
    if html is not None:
        try:
            out.save_html(str(html))
        except OSError as e:
            raise _usage_error(f"--html {html} cannot be written: {e.strerror or e}") from None
        console.print(f"written to {html}", markup=False)


@app.command("compare")
def compare_batches(
    batches: list[Path] = typer.Argument(..., help="batch folders (runs/batch-<id>/) or their summary.json"),
    as_json: bool = JSON,
) -> None:
    """Compare agents from their batches: mean reward with 95% bootstrap intervals per family and
    overall, validated share, crashes, and each batch's difference from the first (significant
    when its interval excludes zero)."""
    from trainergym.agents.batch import read_summary
    from trainergym.agents.compare import compare

    try:
        records = [read_summary(b) for b in batches]
    except ValueError as e:
        raise _usage_error(str(e)) from None
    labels = [f"{r.get('agent', '?')} ({r['batch_id']})" for r in records]
    table = compare(records)
    if as_json:
        print(json.dumps({"batches": labels, "families": {f: [c.__dict__ | {"significant": c.significant} for c in cells]
                                                           for f, cells in table.items()}}))
        return
    sources = sorted({r.get("source") for rec in records for r in rec["episodes"] if r.get("source")})
    out = Table(title="mean reward [95% bootstrap interval], validated share, crashed"
                      + (" (surrogate post scores: mock backend)" if "surrogate" in sources else ""))
    out.add_column("family")
    for i, label in enumerate(labels):
        out.add_column(label if i == 0 else f"{label}\nvs first", no_wrap=False)
    fmt = lambda v: "-" if v is None else f"{v:+.3f}"  # noqa: E731
    for family, cells in table.items():
        row = []
        for c in cells:
            text = "no episodes" if c.mean is None else f"{fmt(c.mean)} [{fmt(c.ci[0])}, {fmt(c.ci[1])}]\n" \
                                                            f"n={c.n}, valid {c.validated:.0%}, crashed {c.crashed}"
            if c.diff is not None:
                text += f"\ndiff {fmt(c.diff[0])} [{fmt(c.diff[1])}, {fmt(c.diff[2])}]" + (" *" if c.significant else "")
            row.append(text)
        out.add_row(family, *row, style="bold" if family == "all" else None)
    console.print(out)
    if len(records) > 1:
        console.print("* the difference's 95% interval excludes zero (resampling episodes within each batch)")


@app.command("report")
def report_figures(
    inputs: list[Path] = typer.Argument(..., help="batch folders (runs/batch-<id>/) or their summary.json, episode run "
                                        "folders (runs/<episode-id>/), Tinker metrics.jsonl or its log dir, TRL "
                                        "trainer_state.json or its output dir"),
    out: Path = typer.Option(..., "--out", help="directory for the figures (PNG, with the plotted series as JSON) and "
                                                 "report.html"),
    seed: int = typer.Option(0, "--seed", help="the bootstrap's seed (0: the intervals trainergym compare prints)"),
    as_json: bool = JSON,
) -> None:
    """Figures of batches, episodes and training logs: PNGs and one self-contained report.html,
    each figure saying whether its numbers are measured or surrogate."""
    from trainergym.agents.report import ReportError, report

    try:
        written = report(inputs, out, seed=seed)
    except ReportError as e:
        raise _usage_error(str(e)) from None
    figures = [str(p) for p in written if p.suffix == ".png"]
    if as_json:
        print(json.dumps({"html": str(written[-1]), "figures": figures}))
        return
    console.print(f"{len(figures)} figures and {written[-1]} written to {out}", markup=False)


@app.command("probe")
def probe_job(
    job_dir: Path = typer.Argument(..., help="a job directory holding job.toml and taskset/"),
    task: Optional[Path] = typer.Option(None, help="task file the job is for"),
    family: Optional[str] = typer.Option(None, help="family id the job is for (default calc_chain)"),
    bundle_out: Optional[Path] = typer.Option(None, "--bundle-out", help="a new or empty directory: when the job "
                                              "passes, write the bundle it validated there (rl.toml, package/, "
                                              "manifest.json, workspace/)"),
    as_json: bool = JSON,
) -> None:
    """Validate a job directory outside any episode; exit status 0 only when it passes. With
    --bundle-out, a job that passes leaves its bundle there, to read or to train by hand."""
    import tempfile

    from trainergym.probe.checks import probe
    from trainergym.task.spec import load_task

    spec = _task(task, family) or load_task("calc_chain")
    if not job_dir.is_dir():
        raise _usage_error(f"{job_dir} is not a directory: give a job directory holding job.toml and taskset/")
    if bundle_out is not None:
        _refuse_unusable_out(bundle_out)  # before the probe, which takes a while
    written = None
    with tempfile.TemporaryDirectory(prefix="tg-probe-cli-") as tmp:
        with _working(f"probing {job_dir} (sandboxed)"):
            report, bundle = probe(job_dir.resolve(), spec, Path(tmp) / "bundle")
        # Only a job that passed has a bundle: the library would never train a failed one.
        if bundle_out is not None and bundle is not None:
            written = _copy_bundle(bundle.root, bundle_out)
    if as_json:
        print(json.dumps({"ok": report.ok, "task": spec.id, "bundle_out": str(written) if written else None,
                          **report.model_dump(mode="json")}))
    else:
        console.print(report.render(), markup=False)
        console.print(f"confinement: {report.confinement}" if report.confinement else "", markup=False)
        if written is not None:
            console.print(_by_hand(written, spec.family), markup=False, highlight=False, soft_wrap=True)
        elif bundle_out is not None:
            console.print(f"no bundle written to {bundle_out}: only a job that passes has one", markup=False)
    raise typer.Exit(0 if report.ok else 1)


def _refuse_unusable_out(out: Path) -> None:
    """One line and exit 2 unless `out` is an empty directory or one we can create, and writable."""
    try:
        if out.exists() or out.is_symlink():
            if not out.is_dir():
                raise _usage_error(f"--bundle-out {out} exists and is not a directory")
            if any(out.iterdir()):
                raise _usage_error(f"--bundle-out {out} exists and is not empty: give a new or empty directory")
            where = out
        else:
            where = next(parent for parent in out.absolute().parents if parent.exists())
            if not where.is_dir():
                raise _usage_error(f"--bundle-out {out} cannot be created: {where} is not a directory")
    except OSError as e:
        raise _usage_error(f"--bundle-out {out} cannot be read: {e}") from None
    if not os.access(where, os.W_OK | os.X_OK):
        raise _usage_error(f"--bundle-out {out} is not writable ({where} refuses writes)")


def _copy_bundle(root: Path, out: Path) -> Path:
    """The validated bundle at `root`, copied to `out` (an empty or new directory); exit 2 if the copy fails."""
    import shutil

    try:
        shutil.copytree(root, out, symlinks=True, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
    except OSError as e:
        raise _usage_error(f"writing the bundle to {out} failed: {e}") from None
    return out.resolve()


def _by_hand(out: Path, family: str) -> str:
    """Where the bundle went and how to train it with prime-rl by hand, as the runner does."""
    from trainergym.job.stack import PRIME_RL_COMMIT, PRIME_RL_REPO, family_specs

    try:
        specs = " ".join(family_specs(family)) + " "  # never trainergym: it would move prime-rl's verifiers
    except KeyError:
        specs = f"<the {family} family's package> "
    return (f"bundle written to {out} (rl.toml, package/, manifest.json, workspace/)\n"
            f"to train it by hand on a host with at least 2 GPUs, in a checkout of {PRIME_RL_REPO} at "
            f"{PRIME_RL_COMMIT[:7]}:\n"
            f"  cd <prime-rl checkout> && git submodule update --init --recursive && uv sync --locked --all-extras "
            f"&& uv pip install {specs}{out / 'package'}\n"
            f"  uv run --project <prime-rl checkout> rl @ {out / 'rl.toml'}\n"
            "rl.toml has no [deployment]: trainergym's runner adds it on the GPU host from the GPUs it has; by hand, "
            "prime-rl's default is 1 training and 1 inference GPU, or add [deployment] with num_train_gpus and "
            "num_infer_gpus")


@app.command("submit")
def submit(
    job_dirs: list[Path] = typer.Argument(..., help="job directories, each holding job.toml and taskset/"),
    task: Optional[Path] = typer.Option(None, help="task file the jobs are for"),
    family: Optional[str] = typer.Option(None, help="family id the jobs are for"),
    db: Optional[Path] = typer.Option(None, help="queue database (default: <data dir>/jobs.db)"),
    workdir: Optional[Path] = typer.Option(None, help="where queued bundles are kept for the workers "
                                                      "(default: <data dir>/worker)"),
    as_json: bool = JSON,
) -> None:
    """Probe job directories and queue the bundle of each that passes, for `trainergym worker` to
    train; a job that fails its probe is not queued and its report is printed. Exit status 0 only
    when every job was queued."""
    import tempfile

    from trainergym.backends.queued import enqueue_bundle
    from trainergym.probe.checks import probe

    spec = _task(task, family)
    if spec is None:
        raise _usage_error("say which task the jobs are for: --family F (e.g. calc_chain) or --task FILE")
    for job_dir in job_dirs:
        if not job_dir.is_dir():
            raise _usage_error(f"{job_dir} is not a directory: give job directories holding job.toml and taskset/")
    queue = _queue(db)
    keep = workdir or data_dir() / "worker"
    rows = []
    with tempfile.TemporaryDirectory(prefix="tg-submit-") as tmp:
        for i, job_dir in enumerate(job_dirs):
            with _working(f"probing {job_dir} (sandboxed)"):
                report, bundle = probe(job_dir.resolve(), spec, Path(tmp) / f"bundle-{i}")
            job = enqueue_bundle(queue, keep, bundle, spec) if bundle is not None else None
            rows.append({"dir": str(job_dir), "ok": report.ok, "job_id": job.id if job else None,
                         "state": job.state if job else None, "content_hash": job.content_hash if job else None,
                         "report": report.model_dump(mode="json")})
            if not as_json:
                if job is None:
                    console.print(report.render(), markup=False)
                    console.print(f"{job_dir}: not queued (the probe failed)", markup=False, style="red", soft_wrap=True)
                else:
                    again = "" if job.state == "queued" and job.attempts == 0 else f" (already {job.state})"
                    console.print(f"{job_dir}: queued as {job.id}{again}, bundle {job.content_hash[:12]}", markup=False,
                                  soft_wrap=True)
    if as_json:
        print(json.dumps({"task": spec.id, "queue": queue.path, "jobs": rows}))
    elif any(r["job_id"] for r in rows):
        console.print(f"queue {queue.path}: {queue.counts()}; drain it with `trainergym worker --backend runpod|local` "
                      "(or `--backend mini` to train a tiny model here, `--backend mock` to rehearse on simulated pods)", markup=False, soft_wrap=True)
    raise typer.Exit(0 if all(r["job_id"] for r in rows) else 1)


@app.command("jobs")
def jobs(
    job_id: Optional[str] = typer.Argument(None, help="show one job in full"),
    db: Path = typer.Option(None, help="queue database (default: <data dir>/jobs.db)"),
    state: Optional[str] = typer.Option(None, help="only jobs in this state: queued, leased, running, done, failed"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
) -> None:
    """List and inspect the jobs of the durable queue."""
    from typing import get_args

    from trainergym.infra.queue import State

    if state is not None and state not in get_args(State):
        raise _usage_error(f"--state {state!r} is not a job state; use one of {', '.join(get_args(State))}")
    queue = _queue(db)
    if job_id:
        job = queue.get(job_id)
        if job is None:
            raise _usage_error(f"no job {job_id!r} in {queue.path}; `trainergym jobs` lists them")
        print(job.model_dump_json(indent=2))
        return
    rows = queue.jobs(state)  # type: ignore[arg-type]
    if as_json:
        print(json.dumps({"counts": queue.counts(), "jobs": [j.model_dump(mode="json") for j in rows]}))
        return
    table = Table(title=f"jobs ({', '.join(f'{k} {v}' for k, v in sorted(queue.counts().items())) or 'none'})")
    for col in ("id", "task", "state", "attempts", "owner", "post / reason"):
        table.add_column(col)
    for j in rows:
        outcome = "" if j.result is None else (f"{j.result.post} ({j.result.source_label})" if j.state == "done"
                                               else j.result.failure_reason or "")
        table.add_row(j.id, j.task_id, j.state, f"{j.attempts}/{j.max_attempts}", j.owner or "", outcome)
    console.print(table)


@app.command("worker")
def worker(
    backend: str = typer.Option("mock", help="runpod (rented pods) | local (this host's GPUs) | mock (the runpod "
                                             "dispatcher on simulated pods and a virtual clock) | mini (real GRPO of "
                                             "a tiny model here, one job at a time)"),
    max_pods: int = typer.Option(16, min=1, help="cap on pods (runpod, mock) or concurrent jobs (local)"),
    once: bool = typer.Option(False, "--once", help="exit when no job is queued, leased or running (a dead "
                                                 "worker's jobs are taken over once their leases expire) and no pod is left"),
    ladder: Optional[Path] = typer.Option(None, help="TOML file of \\[\\[rung]] tables: gpu_type, gpu_count, cloud"),
    db: Optional[Path] = typer.Option(None, help="queue database (default: <data dir>/jobs.db)"),
    workdir: Optional[Path] = typer.Option(None, help="where bundles, pod state and runs live (default: <data dir>/worker; "
                                                      "the local backend as root: /var/lib/trainergym/worker-<hash of the "
                                                      "data dir>, which a trainer's own uid can reach)"),
    seed: int = typer.Option(0, help="seed of the simulated fleet (mock)"),
    lease_seconds: Optional[float] = typer.Option(None, min=1, help="how long a job's lease lasts without a heartbeat: "
                                                  "a dead worker's job is taken over after this (default 600 mock, "
                                                  "300 runpod, 120 local and mini)"),
) -> None:
    """Drain the job queue on GPUs, with a live view of pods and jobs."""
    from rich.live import Live

    if backend not in ("runpod", "local", "mock", "mini"):
        raise _usage_error(f"unknown worker backend {backend!r}; available: runpod, local, mock, mini")
    if backend == "mini":  # trains here, one job at a time: no pods, no dispatcher
        queue = _queue(db, lease_seconds)
        runner = _backend("mini", seed=seed)
        with _working(f"training queued jobs with the mini backend on {runner.device}"):
            ran = runner.drain(queue, once=once)
        console.print(f"queue: {queue.counts()}; {ran} job(s) trained at the mini scale [measured (mini scale)]")
        return
    _queue(db)  # a --db in a missing directory is refused before any pod is rented
    # A worker drains the queue: its `mock` is the simulated fleet, not the in-process surrogate.
    runner = _backend("fleet" if backend == "mock" else backend, worker=True, seed=seed, workdir=workdir, queue=db,
                      max_jobs=max_pods, ladder=ladder, lease_seconds=lease_seconds)
    simulated = " (simulated)" if backend == "mock" else ""
    if backend == "local":
        runner.drain(once=once)
        console.print(f"queue: {runner.queue.counts()}")
        return
    pool = runner.pool

    def view() -> Table:
        table = Table(title=f"{backend} worker: jobs {runner.queue.counts()}  billed ${pool.billed_usd():.2f}{simulated}")
        for col in ("pod", "gpu", "state", "job"):
            table.add_column(col)
        for pod in pool.live:
            table.add_row(pod.id or pod.name, pod.gpus, pod.state, pod.job_id or "")
        return table

    with Live(view(), console=console, refresh_per_second=2, transient=False) as live:
        original = runner.tick

        def tick() -> None:
            original()
            live.update(view())

        runner.tick = tick
        try:
            runner.drain(once=once)
        except KeyboardInterrupt:  # stop renting what serves no job; pods running jobs are left to re-attach to
            pool.shutdown(keep_busy=True)
    console.print(f"queue: {runner.queue.counts()}; pods left: {len(pool.live)}; billed ${pool.billed_usd():.2f}{simulated}")
    if pool.live and not simulated:
        Console(stderr=True).print(f"{len(pool.live)} pods still run jobs and bill ({', '.join(p.id for p in pool.live)}): "
                                   "run the worker again to re-attach to them and finish their jobs, or terminate them in "
                                   "Runpod's console", style="yellow", soft_wrap=True)


@app.command("serve")
def serve_command(
    host: str = typer.Option("127.0.0.1", help="interface to listen on (0.0.0.0 to serve other hosts, as in a container)"),
    port: int = typer.Option(8000, min=1, max=65535, help="TCP port"),
    backend: str = BACKEND,
    task: Optional[Path] = TASK,
    family: Optional[str] = FAMILY,
    max_sessions: int = typer.Option(16, min=1, help="concurrent sessions (WebSocket connections), one episode each"),
    job_timeout: Optional[float] = typer.Option(None, min=0, help="seconds a submitted job may take"),
    reward_noise: bool = REWARD_NOISE,
    runs_dir: Optional[Path] = typer.Option(None, help="write runs/<episode-id>/ records here (default: none)"),
) -> None:
    """Serve the environment over OpenEnv's protocol (/ws, /health, /schema): one episode per
    session. Needs the openenv extra. A reset may name a family (or pass a TaskSpec);
    --task/--family set the default."""
    try:
        from trainergym.adapters.openenv import serve
        from trainergym.backends import BackendUnavailable
    except ImportError as e:
        raise _usage_error(str(e)) from None
    if task or family:
        _task(task, family)  # a bad task file or family fails now, in one line
    try:
        serve(host, port, backend=backend, task=str(task) if task else family, max_sessions=max_sessions,
              job_timeout=job_timeout, reward_noise=reward_noise, runs_dir=runs_dir)
    except (ValueError, BackendUnavailable) as e:  # raised before the server starts
        raise _usage_error(str(e)) from None


@app.command("pod-serve")
def pod_serve(
    port: int = typer.Option(8000, help="port the provider's proxy forwards to"),
    host: str = typer.Option("0.0.0.0", help="address to listen on"),
    workdir: Path = typer.Option(Path("/workspace/trainergym"), help="bundles, runs, the prime-rl checkout, the pre-score cache"),
) -> None:
    """Serve jobs on a GPU pod (run by the pod's bootstrap; settings come from TRAINERGYM_ENV_B64)."""
    from trainergym.host.pod_service import serve

    serve(workdir, host, port)


@app.command("costs")
def costs(
    episode: Optional[str] = typer.Option(None, help="one episode's entries"),
    as_json: bool = JSON,
) -> None:
    """The cost ledger: model calls and GPU bills, with where each dollar figure came from."""
    from trainergym.infra.costs import Ledger

    ledger = Ledger()
    rows = ledger.rows(episode) if episode else ledger.by_source()
    if episode and not rows:
        raise _usage_error(f"no entries for episode {episode!r} in {ledger.path}; `trainergym costs` shows every entry, "
                           "and an episode's id is its runs/ folder's name")
    simulated = sum(r["usd"] or 0.0 for r in rows if r["source"] == "surrogate")
    spent = ledger.totals(episode=episode)["usd"] - simulated
    if as_json:
        print(json.dumps({"ledger": str(ledger.path), "rows": rows, "total": ledger.totals(episode=episode),
                          "spent_usd": spent, "simulated_usd": simulated}))
        return
    columns = ("kind", "source", "model", "prompt_tokens", "completion_tokens", "usd") + (("note",) if episode else ("entries",))
    table = Table(title=f"cost ledger {ledger.path}" + (f", episode {episode}" if episode else ""))
    for col in columns:
        table.add_column(col.replace("_", " "), justify="right" if col in ("prompt_tokens", "completion_tokens", "usd", "entries") else "left")
    for row in rows:
        table.add_row(*[f"{row[c]:.4f}" if c == "usd" else str(row.get(c) if row.get(c) is not None else "-") for c in columns])
    console.print(table)
    console.print(f"spent ${spent:.4f}" + (f"; simulated (mock backend, never billed) ${simulated:.4f}" if simulated else ""))


@app.command("families")
def list_families(as_json: bool = JSON) -> None:
    """List the installed task families with held-out flags and untrained baselines."""
    from trainergym.task import baselines
    from trainergym.task.spec import families

    rows = []
    for fid, fam in sorted(families().items()):
        rows.append({"id": fid, "title": fam.TITLE, "held_out": fam.HELD_OUT,
                     "baselines": [b.model_dump(exclude_none=True) for b in baselines.for_family(fid)]})
    if as_json:
        print(json.dumps({"families": rows}))
        return
    table = Table(title="task families")
    for col in ("family", "title", "held out", "best_pre", "per model (source, n)"):
        table.add_column(col)
    for row in rows:
        bs = row["baselines"]
        best = max(bs, key=lambda b: b["score"]) if bs else None
        table.add_row(row["id"], row["title"], "yes" if row["held_out"] else "",
                      f"{best['score']:.3f}" if best else "-",
                      "\n".join(f"{b['model']}: {b['score']:.3f} ({b['source']}, n={b['n']})" for b in bs))
    console.print(table)


@app.command("stack")
def stack_command(
    build: bool = typer.Option(False, "--build", help="build it now, fetching what it needs (uv, network)"),
    as_json: bool = JSON,
) -> None:
    """prime-rl's stack, where the probe runs agent code: its verifiers and config classes at the
    pin, built once into a cache (from TRAINERGYM_STACK_WHEELS, else git at the pinned commits)."""
    from trainergym.job import stack, stack_env

    try:
        built = stack_env.build(offline=not build)
    except stack_env.StackUnavailable as e:
        hint = "" if build else "; `trainergym stack --build` fetches what it needs"
        print(json.dumps({"pinned": False, "why_not": str(e)}) if as_json else f"error: prime-rl's stack: {e}{hint}")
        raise typer.Exit(1) from None
    if as_json:
        print(json.dumps({"pinned": True, "pin": stack.PIN.model_dump(), **built.__dict__}))
    else:
        console.print(f"{built.describe()}\npython: {built.python}")


@app.command("doctor")
def doctor(
    as_json: bool = JSON,
    backend: Optional[str] = typer.Option(None, help="also exit 1 when this host misses what `--backend local|runpod|mini` "
                                                     "needs to train"),
    workdir: Optional[Path] = typer.Option(None, help="the local worker's work directory to check (default: its own)"),
) -> None:
    """What this host has and lacks: the sandbox modes for agent code, the stack the probe runs,
    the data directory's modes, and for training the GPUs, CUDA, disk, uv and the provider key."""
    from trainergym.doctor import run

    try:
        status = run(console, as_json, backend=backend, workdir=workdir)
    except ValueError as e:  # an unknown TRAINERGYM_SANDBOX
        raise _usage_error(str(e)) from None
    raise typer.Exit(status)


mini_app = typer.Typer(cls=_OneLineErrors, add_completion=False, no_args_is_help=True,
                       help="The mini backend's base models: tiny Qwen3s warmed up per family (extra mini).")
app.add_typer(mini_app, name="mini")


@mini_app.command("build-base")
def mini_build_base(
    family: str = typer.Option(..., help="family id, e.g. calc_chain"),
    scale: str = typer.Option("micro", help="micro (CPU-sized) | gpu (the prototype's size, for a GPU)"),
    device: Optional[str] = typer.Option(None, help="torch device: cuda, cuda:N or cpu (default: cuda when present)"),
    force: bool = typer.Option(False, "--force", help="build again even when the cache holds this key"),
    eval_n: Optional[int] = typer.Option(None, min=1, max=200, help="hidden-eval items the pre score is measured on "
                                                                  "(default: every one at the scale's difficulty)"),
    as_json: bool = JSON,
) -> None:
    """Warm up (or find cached) the family's mini base model at a scale, on its public
    distribution only; print its content key, where it is, and its pre score on the hidden eval."""
    import time

    from trainergym.backends.mini import detect_device, eval_rows, missing_extra, quiet

    if why := missing_extra():
        raise _usage_error(why)
    quiet()
    spec = _task(None, family)
    from trainergym.mini import train as mini_train
    from trainergym.mini.base import build_base, find_base
    from trainergym.mini.rollout import accuracy
    from trainergym.mini.scale import get_scale
    from trainergym.task.spec import get_family

    try:
        get_scale(scale)
    except ValueError as e:
        raise _usage_error(str(e)) from None
    fam = get_family(spec.family)
    device = device or detect_device()
    if device.startswith("cuda") and detect_device() != "cuda":
        raise _usage_error(f"--device {device}: torch sees no GPU here; use --device cpu (and --scale micro)")
    err = Console(stderr=True)
    started = time.time()
    cached = None if force else find_base(fam, scale)
    with _working(f"building the {scale} base of {fam.ID} on {device}"):
        base = cached or build_base(fam, scale, device=device, force=force, log=lambda m: err.print(m, markup=False))
        model, tokenizer = base.load(device)
        rows = eval_rows(fam.ID, scale, eval_n)
        pre = accuracy(model, tokenizer, fam, rows, **mini_train.eval_caps(base))
    out = {"family": fam.ID, "scale": scale, "key": base.key, "path": str(base.path), "cached": cached is not None,
           "pre": round(pre, 4), "eval_n": len(rows), "source": "measured (mini scale)", "device": device,
           "seconds": round(time.time() - started, 1), "dev_accuracy": base.info.get("dev_accuracy"),
           "steps": base.info.get("steps")}
    if as_json:
        print(json.dumps(out))
        return
    console.print(f"{fam.ID} {scale} base {base.key} ({'cached' if cached else 'built'}, {out['seconds']:.0f} s): "
                  f"pre {pre:.3f} on {len(rows)} hidden-eval items at the scale's difficulty [measured (mini scale)]; "
                  f"at {base.path}",
                  markup=False, highlight=False, soft_wrap=True)


@app.command("gpu-bench")
def gpu_bench_command(
    device: str = typer.Option("cuda", help="torch device: cuda (the GPU present), or cpu with --models tiny"),
    models: str = typer.Option("0.6B,1.7B,4B", help="comma-separated: 0.6B, 1.7B, 4B (Qwen3 shapes), tiny"),
    seq_lens: str = typer.Option("256,512,1024,2048,4096,8192,16384,32768", help="comma-separated seq_len rungs"),
    out: Optional[Path] = typer.Option(None, help="the rows file to merge into (default: the library's "
                                                  "data/gpu_measured.json, which job/gpu.py reads)"),
    budget_s: Optional[float] = typer.Option(None, help="record what is left as skipped after this many seconds"),
    show: bool = typer.Option(False, "--show", help="print the estimates in effect and their sources; measure nothing"),
) -> None:
    """Measure peak memory and trained tokens/s of one training step of the Qwen3 shapes (random
    weights, micro-batch 1; checkpointing on/off, optimizer offload) at each seq_len rung on this
    GPU, and write the `measured` rows job/gpu.py reads before its `reported` table."""
    import shlex

    from trainergym.job import gpu as gpus
    from trainergym.job import gpu_bench, gpu_measured

    if show:
        table = Table("model", "seq_len", "peak GiB", "tok/s on an H200", "sources (below)")
        h200, bases = gpus.GPU("NVIDIA H200", 139.8, 1.0, 0.0), []
        for model in gpu_bench.SHAPES:
            if model == "tiny" or not gpus.covered(model):
                continue
            for n in gpu_bench.SEQ_LEN_RUNGS:
                peak, speed = gpus.peak_estimate(model, n), gpus.speed_estimate(model, n, h200)
                marks = []
                for basis in (peak.basis, speed.basis):
                    bases += [basis] if basis not in bases else []
                    marks.append(f"[{bases.index(basis) + 1}]")
                table.add_row(model, str(n), f"{peak.value:.2f}", f"{speed.value:.0f}", " ".join(marks))
        console.print(table)
        for i, basis in enumerate(bases, 1):
            console.print(f"[{i}] {basis}", highlight=False, markup=False)
        return
    try:
        rungs = tuple(int(n) for n in seq_lens.split(","))
        chosen = gpu_bench.resolve(models)
    except (ValueError, KeyError) as e:
        raise _usage_error(f"gpu-bench: {e.args[0] if e.args else e}") from None
    target = out or gpu_measured.MEASURED_PATH
    given = [("--device", device), ("--models", models), ("--seq-lens", seq_lens), ("--out", out), ("--budget-s", budget_s)]
    command = shlex.join(["trainergym", "gpu-bench", *(str(v) for pair in given if pair[1] is not None for v in pair)])
    try:
        table = gpu_bench.run(target, chosen, rungs, device, budget_s, command)
    except gpu_bench.NoDevice as e:
        raise _usage_error(str(e)) from None
    done = sum(r.status == "ok" for r in table.rows)
    console.print(f"{done} of {len(table.rows)} rows measured on {table.gpu}; written to {target}", highlight=False)


if __name__ == "__main__":
    app()
