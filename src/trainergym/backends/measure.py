"""`trainergym baselines measure`: the untrained models scored on a family's hidden eval, on this
host's GPUs or a Runpod pod, written as this installation's `measured` baselines.

A measurement is a baseline-only job: the runner in mode `pre` (`pre-fresh` with `--fresh`),
which installs what a job's pre-score needs (prime-rl's vLLM, the scorer's own install with the
family, the base model), hands the hidden eval to the family's scorer only, and scores the base
model through the same scorer and pre-score cache as a training job's `pre`. No bundle, no agent
code. On the local backend the runner runs in this process, in the local worker's work directory
(the same host directory, so the same scorer install and pre-score cache as its jobs). On Runpod
the pod service runs it (`X-Mode: pre`) on a pod of a pool of its own (its own database under
`<data dir>/baselines/`, pods named `tgbaseline-*`, so neither a worker's pool nor this one ever
reconciles the other's pods away), which is terminated, and billed to the cost ledger, at the end.

Each model's result becomes a `measured` row (the Wilson interval of its score over n items, the
date, the stack the host ran, the backend, n) in `<data dir>/baselines.toml`
(`trainergym.task.baselines.write_measured`), which `baselines.for_family`/`best_pre` then prefer
over the packaged row of the same family and model.
"""

from __future__ import annotations

import datetime
import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Optional

import typer

from trainergym.backends import BackendOptions, BackendUnavailable
from trainergym.job.result import FailureReason, RunResult
from trainergym.job.stack import short_stack
from trainergym.paths import data_dir
from trainergym.task import baselines, hidden

MEASURE_BACKENDS = ("local", "runpod")
POD_PREFIX = "tgbaseline"  # not `trainergym-`: a worker's reconcile would end these pods as orphans of its own


class MeasureRefused(ValueError):
    """The measurement cannot start (an unknown family, model or backend; no GPU; no key): one line."""


def check_request(family: str, models: list[str] | None, backend: str) -> list[str]:
    """The models to measure (default: those the family's task allows), or MeasureRefused."""
    from trainergym.task.spec import families, load_task

    installed = families()
    if family not in installed:
        raise MeasureRefused(f"unknown family {family!r}; installed: {', '.join(sorted(installed))}")
    if backend not in MEASURE_BACKENDS:
        why = "its figures are surrogates, not measurements" if backend in ("mock", "fleet") else "unknown backend"
        raise MeasureRefused(f"--backend {backend}: {why}; measure with --backend {' or '.join(MEASURE_BACKENDS)}")
    allowed = list(load_task(family).bounds.base_models)
    chosen = list(dict.fromkeys(models)) if models else allowed
    unknown = [m for m in chosen if m not in allowed]
    if unknown:
        raise MeasureRefused(f"unknown model {unknown[0]!r} for {family}; its base models: {', '.join(allowed)}")
    return chosen


def to_baseline(result: RunResult, family: str, backend: str, mode: str) -> baselines.Baseline:
    """The measured row of one measurement's result. ValueError for a result that is no
    measurement of the base model (failed, or from a host that ran something else)."""
    if result.status != "succeeded" or result.pre is None:
        raise ValueError(result.failure_reason or result.status)
    if result.details.get("mode") != mode or result.source != "measured" or result.eval_n < 1:
        raise ValueError(f"the host did not run a {mode} measurement (details {result.details}); is it an older release?")
    cached = " (the host's cached pre-score)" if result.details.get("pre_cached") else ""
    return baselines.Baseline(
        family=family, model=result.base_model, score=round(result.pre, 4), n=result.eval_n, source="measured",
        date=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), stack=short_stack(result.stack),
        eval=hidden.eval_fingerprint(family), backend=backend, ci95=baselines.wilson_interval(result.pre, result.eval_n),
        note=f"untrained, scored by the family's scorer on {result.gpu_count}x {result.gpu}{cached}")


def _items(family: str) -> Callable[[], list[dict]]:
    return lambda: [ex.model_dump() for ex in hidden.hidden_eval(family)]


# --- the local backend: the runner in this process, in the local worker's work directory -----------
def local_backend(workdir: Path | None = None):
    """The local backend as `make_backend("local")` builds it (its GPUs, its phase commands, its
    work directory: the host directory its jobs share). BackendUnavailable as it refuses (no GPU,
    a malformed TRAINERGYM_HOST_COMMANDS, a work directory it cannot create)."""
    from trainergym.backends.local import LocalBackend
    from trainergym.host.deployment import detect_gpus

    gpu, count = detect_gpus()
    if not count or gpu == "none":  # the backend's own refusal would suggest the mock, which measures nothing
        raise BackendUnavailable("the local backend scores on this host's GPUs and nvidia-smi finds none here; "
                                 "measure on a GPU host, or with --backend runpod")
    return LocalBackend.from_options(BackendOptions(workdir=workdir))


def measure_local(local, family: str, models: list[str], mode: str = "pre",
                  report: Callable[[str], None] = lambda _: None,
                  done: Callable[[str, RunResult], None] = lambda *_: None) -> dict[str, RunResult]:
    """Each model's measurement on the GPUs of `local` (a `LocalBackend`), one after another, by
    the runner in this process (`done` called with each result as it ends)."""
    from trainergym.host.confinement import Confinement
    from trainergym.host.runner import Runner
    from trainergym.job import gpu as gpus
    from trainergym.job import stack

    results = {}
    for model in models:
        report(f"{family} {model}: scoring on {local.gpu_count}x {local.gpu} (local)")
        root = local.workdir / "runs" / f"baseline-{uuid.uuid4().hex[:10]}"
        runner = Runner(root / "no-bundle", root, _items(family), family, model, gpu=local.gpu, gpu_count=local.gpu_count,
                        usd_per_hour=gpus.list_price(local.gpu), commands=local.commands, host=local.workdir,
                        install=stack.install_specs(family), confinement=Confinement.unconfined(),  # nothing trains
                        mode=mode)
        results[model] = runner.run()
        done(model, results[model])
    return results


# --- Runpod: a pool of its own, the pod service in mode pre ------------------------------------------
def pod_backend(ladder: Path | None = None):
    """The runpod backend built as `make_backend("runpod")` would, but on a pool of its own
    (`<data dir>/baselines/pods.db`, pods named `tgbaseline-*`, one pod; `ladder` as the worker's
    --ladder). BackendUnavailable without RUNPOD_API_KEY, ValueError for a bad ladder file."""
    from trainergym.backends.runpod import PodBackend

    backend = PodBackend.from_options(BackendOptions(workdir=data_dir() / "baselines", max_jobs=1, ladder=ladder))
    backend.pool.config.prefix = POD_PREFIX
    return backend


def measure_on_pods(backend, family: str, models: list[str], mode: str = "pre", timeout: float = 3 * 3600.0,
                    report: Callable[[str], None] = lambda _: None,
                    done: Callable[[str, RunResult], None] = lambda *_: None) -> dict[str, RunResult]:
    """Each model's measurement on a pod of `backend`'s pool (a `PodBackend`; its clock, sleep and
    client), one after another on the same warm pod: submit in `mode` with no bundle, send the
    hidden eval when the pod awaits it, keep the result. Every pod of the pool is terminated at
    the end, whatever happened."""
    import httpx

    from trainergym.infra.pool import TransientError

    pool, results = backend.pool, {}
    try:
        for _ in range(10):  # a rate-limited provider: as the dispatcher's start, retried
            try:
                pool.reconcile()
                break
            except TransientError:
                backend.sleep(backend.poll_seconds)
        for model in models:
            report(f"{family} {model}: scoring on a Runpod pod")
            results[model] = _on_pod(backend, family, model, mode, timeout, httpx)
            done(model, results[model])
    finally:
        pool.shutdown()
    return results


def _on_pod(backend, family: str, model: str, mode: str, timeout: float, httpx) -> RunResult:
    from trainergym.infra.pool import AuthError, PoolExhausted

    pool, key, started = backend.pool, f"baseline-{uuid.uuid4().hex[:10]}", backend.clock()
    pod = None
    try:
        while pod is None:
            if key in pool.failed_jobs:
                return RunResult.failed(FailureReason.NO_POD, pool.failed_jobs.pop(key), base_model=model)
            pod = pool.request(key)
            if pod is None:
                if backend.clock() - started > timeout:
                    pool.abandon(key)
                    return RunResult.failed(FailureReason.NO_POD, f"no pod within {timeout:.0f} s", base_model=model)
                backend.sleep(backend.poll_seconds)
                pool.tick()
    except AuthError as e:
        return RunResult.failed(FailureReason.PROVIDER_REFUSED, str(e), base_model=model)
    except PoolExhausted as e:
        return RunResult.failed(FailureReason.NO_POD, str(e), base_model=model)
    client, misses, eval_sent = backend.client_factory(pod.url, pod.token), 0, False
    try:
        remote = client.submit(None, family, model, key=key, mode=mode)
        while True:
            try:
                status = client.status(remote)
                misses = 0
            except (httpx.HTTPError, OSError, ValueError):
                misses += 1
                if misses >= backend.dead_after:
                    pool.discard(pod, "died mid-measurement")
                    pod = None
                    return RunResult.failed(FailureReason.POD_DIED, "stopped answering", base_model=model)
            else:
                if status["phase"] == "awaiting-eval" and not eval_sent:
                    client.send_eval(remote, _items(family)())
                    eval_sent = True
                if status.get("done"):
                    result = client.result(remote) or RunResult.failed(FailureReason.RUNNER_ERROR, "the pod kept no result")
                    return result.model_copy(update={"gpu": pod.gpu_type, "gpu_count": pod.gpu_count})
                if backend.clock() - started > timeout:
                    client.cancel(remote)
                    return RunResult.failed(FailureReason.JOB_TIMEOUT, f"past {timeout:.0f} s", base_model=model)
            backend.sleep(backend.poll_seconds)
            pool.tick()
    except (httpx.HTTPError, OSError) as e:  # the submit or the eval's upload failed
        return RunResult.failed(FailureReason.POD_DIED, f"{type(e).__name__}: {e}", base_model=model)
    finally:
        client.close()
        if pod is not None:
            pool.release(pod)


def measure(family: str, models: list[str] | None, backend: str, fresh: bool = False, workdir: Path | None = None,
            ladder: Path | None = None, report: Callable[[str], None] = lambda _: None,
            pods=None) -> tuple[list[baselines.Baseline], dict[str, str]]:
    """Measure and record: the measured rows written (each as soon as its model is scored) and
    why each other model failed. MeasureRefused before anything runs when the request or the
    backend cannot be served here. `pods`: a `PodBackend` to use instead of `pod_backend()`.
    A measured file that is refused (edited, copied) is replaced by this measurement's rows."""
    chosen = check_request(family, models, backend)
    try:
        baselines.load_measured()
    except baselines.BaselineFileError as e:
        path = baselines.measured_path()
        if path.is_symlink() or not path.is_file():  # never written through: said before any GPU time is spent
            raise MeasureRefused(str(e)) from None
        report(f"warning: {path} is refused ({e.why}): this measurement's rows replace it")
    mode = "pre-fresh" if fresh else "pre"
    written, failed = [], {}

    def record(model: str, result: RunResult) -> None:
        try:
            row = to_baseline(result, family, backend, mode)
        except ValueError as e:
            failed[model] = str(e)
            report(f"{family} {model}: failed: {e}")
            return
        baselines.write_measured([row])
        written.append(row)
        report(f"{family} {model}: {row.score:.3f} on n={row.n} (95% CI {row.ci95[0]:.3f}-{row.ci95[1]:.3f})")

    try:
        host = local_backend(workdir) if backend == "local" else pods or pod_backend(ladder)
    except (BackendUnavailable, ValueError) as e:  # no GPU, no key, a bad ladder file
        raise MeasureRefused(str(e)) from None
    run = measure_local if backend == "local" else measure_on_pods
    run(host, family, chosen, mode, report=report, done=record)
    return written, failed


# --- the command line: `trainergym baselines ...` (mounted by trainergym.cli) -----------------------
baselines_app = typer.Typer(no_args_is_help=True, help="Untrained models' baselines: show them, or measure them here.")


def _refused(message: str) -> typer.Exit:
    typer.echo(f"error: {' '.join(message.split())}", err=True)
    return typer.Exit(2)


@baselines_app.command("measure")
def measure_command(
    family: str = typer.Option(..., "--family", help="the task family whose hidden eval scores the models"),
    model: Optional[list[str]] = typer.Option(None, "--model", help="a base model (repeat for more; default: all the "
                                                                    "family allows)"),
    backend: str = typer.Option(..., "--backend", help="local (this host's GPUs) or runpod (a pod, RUNPOD_API_KEY)"),
    fresh: bool = typer.Option(False, "--fresh", help="score again even when the host has a cached pre-score"),
    workdir: Optional[Path] = typer.Option(None, help="local: the work directory (default: the local worker's)"),
    ladder: Optional[Path] = typer.Option(None, help="runpod: TOML file of \\[\\[rung]] gpu_type, gpu_count, cloud (one GPU "
                                                     "suffices to score; default: the worker's ladder)"),
    as_json: bool = typer.Option(False, "--json", help="print the rows written as JSON"),
) -> None:
    """Score untrained models on the family's hidden eval with the jobs' own scorer, and record
    them as this installation's `measured` baselines, which best_pre then prefers."""
    say = (lambda _: None) if as_json else (lambda line: typer.echo(line, err=True))
    try:
        written, failed = measure(family, model, backend, fresh=fresh, workdir=workdir, ladder=ladder, report=say)
    except (MeasureRefused, baselines.BaselineFileError) as e:
        raise _refused(str(e)) from None
    if as_json:
        print(json.dumps({"file": str(baselines.measured_path()), "written": [b.model_dump() for b in written],
                          "failed": failed}))
    else:
        if written:
            typer.echo(f"wrote {len(written)} measured baseline(s) to {baselines.measured_path()}")
        best = baselines.best_pre(family) if baselines.for_family(family) else None
        if best is not None:
            typer.echo(f"best_pre of {family}: {best.score:.3f} ({best.model}, {best.source})")
    raise typer.Exit(1 if failed else 0)


@baselines_app.command("show")
def show_command(
    family: Optional[str] = typer.Option(None, "--family", help="one family (default: every installed one)"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Every baseline in effect, with its source: measured rows (this installation's file) in place
    of the packaged reported or surrogate ones. Exit 2 when the measured file is refused."""
    from trainergym.task.spec import families

    ids = [family] if family else sorted(families())
    try:
        rows = {fid: baselines.for_family(fid) for fid in ids}
        stale = {fid: [(b, baselines.stale(b)) for b in baselines.load_measured() if b.family == fid and baselines.stale(b)]
                 for fid in ids}
    except baselines.BaselineFileError as e:
        raise _refused(str(e)) from None
    if family and not rows[family]:
        raise _refused(f"no baselines for family {family!r}")
    if as_json:
        print(json.dumps({"file": str(baselines.measured_path()),
                          "baselines": {fid: [b.model_dump(exclude_none=True) for b in bs] for fid, bs in rows.items()},
                          "stale": {fid: [{**b.model_dump(exclude_none=True), "why": why} for b, why in rs]
                                    for fid, rs in stale.items() if rs}}))
        return
    for fid, bs in rows.items():
        best = max(bs, key=lambda b: b.score) if bs else None
        for b in bs:
            ci = f"{b.ci95[0]:.3f}-{b.ci95[1]:.3f}" if b.ci95 else "-"
            where = f", {b.backend} {b.date}" if b.source == "measured" else ""
            mark = "  <- best_pre" if b is best else ""
            typer.echo(f"{fid:16} {b.model:18} {b.score:.3f}  n={b.n:<4} ci95 {ci:11} {b.source}{where}{mark}")
        for b, why in stale[fid]:
            typer.echo(f"{fid:16} {b.model:18} {b.score:.3f}  stale, not used: {why}; "
                       f"`trainergym baselines measure --family {fid}` measures it again")
