"""`trainergym` command line."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Writing an RL training job, as an environment.")
console = Console()


@app.callback()
def main() -> None:
    """trainergym: run episodes of the WriteTrainingJob environment."""


@app.command()
def episode(
    task: Optional[Path] = typer.Option(None, help="task file (e.g. examples/tasks/calc_chain.toml)"),
    family: Optional[str] = typer.Option(None, help="family id, when no task file is given"),
    agent: str = typer.Option("reference", help="reference | naive"),
    backend: str = typer.Option("mock", help="mock"),
    seed: int = typer.Option(0, help="seed of the backend's noise and the episode"),
    runs_dir: Path = typer.Option(Path("runs"), help="where runs/<episode-id>/ is written"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
) -> None:
    """Run one episode and show its reward breakdown."""
    from trainergym.agents import make_agent, run_episode
    from trainergym.backends import make_backend
    from trainergym.env import AsyncTrainerEnv

    if task is not None and family is not None:
        raise typer.BadParameter("give --task or --family, not both")
    env = AsyncTrainerEnv(backend=make_backend(backend, seed=seed), runs_dir=runs_dir)
    options = {"task": task or family} if (task or family) else None
    try:
        info = asyncio.run(run_episode(env, make_agent(agent), seed=seed, options=options))
    finally:
        env.close()
    ep = env.episode
    out = {
        "episode_id": ep.id, "task": ep.task.id, "agent": agent, "backend": backend, "seed": seed,
        "turns": ep.turns, "attempts": ep.attempts, "reward": info["reward_breakdown"],
        "result": info.get("result"), "run_dir": str(env.run_path),
    }
    if as_json:
        print(json.dumps(out))
        return
    r = info["reward_breakdown"]
    res = info.get("result") or {}
    table = Table(title=f"episode {ep.id}  ({agent} agent, {backend} backend)")
    table.add_column("term")
    table.add_column("value", justify="right")
    table.add_column("source")
    fmt = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731
    src = res.get("source", "-")
    table.add_row("validation", fmt(r["validation"]), f"attempt {ep.valid_on_attempt or '-'} of {ep.attempts}")
    table.add_row("post (hidden eval)", fmt(r["post"]), src)
    table.add_row("best_pre", fmt(r["best_pre"]), "baselines file")
    table.add_row("uplift", fmt(r["uplift"]), src)
    table.add_row("job quality", fmt(r["job_quality"]), "0.25 post + 0.75 uplift term")
    table.add_row("speed", fmt(r["speed"]), src)
    table.add_row("total", fmt(r["total"]), "0.35 V + 0.60 Q + 0.05 S", style="bold")
    console.print(table)
    if r.get("note"):
        console.print(f"note: {r['note']}")
    if src == "surrogate":
        console.print("[yellow]post, uplift and speed come from the mock backend's surrogate, not from training.[/yellow]")
    console.print(f"run written to {env.run_path}")


@app.command("probe")
def probe_job(
    job_dir: Path = typer.Argument(..., help="a job directory holding job.toml and taskset/"),
    task: Optional[Path] = typer.Option(None, help="task file the job is for"),
    family: Optional[str] = typer.Option(None, help="family id the job is for (default calc_chain)"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
) -> None:
    """Validate a job directory outside any episode; exit status 0 only when it passes."""
    import tempfile

    from trainergym.probe import probe
    from trainergym.tasks import load_task

    if task is not None and family is not None:
        raise typer.BadParameter("give --task or --family, not both")
    if not job_dir.is_dir():
        raise typer.BadParameter(f"{job_dir} is not a directory")
    spec = load_task(task or family or "calc_chain")
    with tempfile.TemporaryDirectory(prefix="tg-probe-cli-") as tmp:
        report, bundle = probe(job_dir.resolve(), spec, Path(tmp) / "bundle")
    if as_json:
        print(json.dumps({"ok": report.ok, "task": spec.id, **report.model_dump(mode="json")}))
    else:
        console.print(report.render(), markup=False)
        console.print(f"confinement: {report.confinement}" if report.confinement else "", markup=False)
    raise typer.Exit(0 if report.ok else 1)


@app.command("jobs")
def jobs(
    job_id: Optional[str] = typer.Argument(None, help="show one job in full"),
    db: Path = typer.Option(None, help="queue database (default: <data dir>/jobs.db)"),
    state: Optional[str] = typer.Option(None, help="only jobs in this state: queued, leased, running, done, failed"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
) -> None:
    """List and inspect the jobs of the durable queue."""
    from trainergym.hidden import data_dir
    from trainergym.queue import JobQueue

    queue = JobQueue(db or data_dir() / "jobs.db")
    if job_id:
        job = queue.get(job_id)
        if job is None:
            console.print(f"no job {job_id!r}")
            raise typer.Exit(1)
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
        outcome = f"{j.result.get('post')}" if j.result else (j.failure_reason or "")
        table.add_row(j.id, j.task_id, j.state, f"{j.attempts}/{j.max_attempts}", j.owner or "", outcome)
    console.print(table)


@app.command("worker")
def worker(
    backend: str = typer.Option("mock", help="runpod | local | mock (simulated pods on a virtual clock)"),
    max_pods: int = typer.Option(16, help="cap on pods (runpod, mock) or concurrent jobs (local)"),
    once: bool = typer.Option(False, "--once", help="exit when the queue is empty and no pod is left"),
    ladder: Optional[Path] = typer.Option(None, help="TOML file of [[rung]] gpu_type, gpu_count, cloud"),
    db: Optional[Path] = typer.Option(None, help="queue database (default: <data dir>/jobs.db)"),
    workdir: Optional[Path] = typer.Option(None, help="where bundles, pod state and runs live (default: <data dir>/worker)"),
    seed: int = typer.Option(0, help="seed of the simulated fleet (mock)"),
) -> None:
    """Drain the job queue on GPUs, with a live view of pods and jobs."""
    import tomllib

    from rich.live import Live

    from trainergym.hidden import data_dir
    from trainergym.pool import DEFAULT_LADDER, PodPool, PoolConfig, Rung
    from trainergym.queue import JobQueue

    workdir = workdir or data_dir() / "worker"
    queue_path = db or data_dir() / "jobs.db"
    rungs = tuple(Rung(**r) for r in tomllib.loads(ladder.read_text())["rung"]) if ladder else DEFAULT_LADDER
    if backend == "local":
        from trainergym.backends.local import LocalBackend

        LocalBackend(workdir, queue=JobQueue(queue_path), concurrency=max_pods).drain(once=once)
        console.print(f"queue: {JobQueue(queue_path).counts()}")
        return
    from trainergym.backends.runpod import PodBackend

    config = PoolConfig(max_pods=max_pods, ladder=rungs)
    if backend == "mock":
        from trainergym.fleet_sim import Clock, SimConfig, SimPod, SimProvider

        clock = Clock()
        provider = SimProvider(clock, SimConfig(seed=seed))
        pool = PodPool(provider, workdir / "pods.db", config, clock=clock, sleep=clock.sleep)
        queue = JobQueue(queue_path, clock=clock, lease_seconds=600)
        runner = PodBackend(workdir, pool, queue=queue, poll_seconds=30, sleep=clock.sleep,
                            client_factory=SimPod.factory(provider))
    elif backend == "runpod":
        from trainergym.runpod_provider import RunpodProvider
        from trainergym.stack import pod_install

        config.env["TRAINERGYM_INSTALL"] = pod_install()  # what each job's setup installs beside it
        pool = PodPool(RunpodProvider(), workdir / "pods.db", config)
        runner = PodBackend(workdir, pool, queue=JobQueue(queue_path, lease_seconds=300))
    else:
        raise typer.BadParameter(f"unknown backend {backend!r}: runpod, local or mock")

    def view() -> Table:
        table = Table(title=f"{backend} worker: jobs {runner.queue.counts()}  billed ${pool.billed_usd():.2f}"
                            + (" (simulated)" if backend == "mock" else ""))
        for col in ("pod", "gpu", "state", "job"):
            table.add_column(col)
        for pod in pool.live:
            table.add_row(pod.id or pod.name, f"{pod.rung.gpu_count}x {pod.rung.gpu_type}", pod.state, pod.job_id or "")
        return table

    with Live(view(), console=console, refresh_per_second=2, transient=False) as live:
        original = runner.tick

        def tick() -> None:
            original()
            live.update(view())

        runner.tick = tick
        try:
            runner.drain(once=once)
        except KeyboardInterrupt:
            pass
    console.print(f"queue: {runner.queue.counts()}; pods left: {len(pool.live)}; billed ${pool.billed_usd():.2f}"
                  + (" (simulated)" if backend == "mock" else ""))


@app.command("pod-serve")
def pod_serve(
    port: int = typer.Option(8000, help="port the provider's proxy forwards to"),
    host: str = typer.Option("0.0.0.0", help="address to listen on"),
    workdir: Path = typer.Option(Path("/workspace/trainergym"), help="bundles, runs, the prime-rl checkout, the pre-score cache"),
) -> None:
    """Serve jobs on a GPU pod (run by the pod's bootstrap; settings come from TRAINERGYM_ENV_B64)."""
    from trainergym.pod_service import serve

    serve(workdir, host, port)


@app.command("families")
def list_families(as_json: bool = typer.Option(False, "--json", help="print one JSON object")) -> None:
    """List the installed task families with held-out flags and untrained baselines."""
    from trainergym import baselines
    from trainergym.tasks import families

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


if __name__ == "__main__":
    app()
