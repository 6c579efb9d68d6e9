"""The pod service: a small authenticated HTTP service on each GPU pod, and its client.

Reached through Runpod's HTTPS proxy, which cuts requests at ~100 s, so every call returns at
once: a job is submitted, then polled. Every request carries the pod's random bearer token
(created when the pod is provisioned, never the Runpod API key). The hidden eval is uploaded
only when the job reports `awaiting-eval`, after its training processes are gone.

    GET  /health                     -> {"ok", "busy", "gpu", "gpu_count", "job", "key"} (latest job, its key)
    POST /jobs                       body: the bundle as .tar.gz; headers X-Family, X-Base-Model, X-Job-Key,
                                     X-Mode (the runner's mode: train, the default, or pre / pre-fresh for
                                     a baseline measurement, whose bundle is ignored: send an empty one)
    GET  /jobs/{id}                  -> status (phase, heartbeat, progress)
    GET  /jobs/{id}/log              -> log tail (text)
    POST /jobs/{id}/eval             body: JSON list of hidden-eval items (only while awaiting-eval)
    GET  /jobs/{id}/result           -> result.json (404 until done)
    POST /jobs/{id}/cancel
"""

from __future__ import annotations

import base64
import io
import json
import os
import secrets
import tarfile
import threading
import uuid
from pathlib import Path

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from trainergym.host.deployment import detect_gpus, visible_gpus
from trainergym.host.runner import MODES, Commands, Runner, Timeouts
from trainergym.job.result import FailureReason, RunResult

MAX_BUNDLE_BYTES = 64 << 20


class _Job:
    def __init__(self, runner: Runner, key: str):
        self.runner, self.key, self.eval_ready, self.eval_items = runner, key, threading.Event(), None
        self.result: RunResult | None = None


def create_app(workdir: Path, token: str, gpu: str = "unknown", gpu_count: int | None = None, usd_per_hour: float = 0.0,
               commands: Commands | None = None, timeouts: Timeouts | None = None, eval_wait_seconds: float = 3600.0,
               install: str = "trainergym", confinement: str | None = None) -> Starlette:
    """`install`: pip specs for trainergym and the families, the scorer's own install, which the
    first job's setup builds (the host's checkout, scorer and caches are shared under `workdir`).
    `gpu_count`: the GPUs jobs split (default: those the pod shows). `confinement`: the train
    phase's mode (`trainergym.host.confinement`; default TRAINERGYM_TRAINER_CONFINEMENT, else auto)."""
    workdir = Path(workdir)
    gpu_count = gpu_count if gpu_count is not None else (visible_gpus() or 0)
    jobs: dict[str, _Job] = {}

    def authorised(request: Request) -> bool:
        given = request.headers.get("authorization", "")
        return secrets.compare_digest(given.encode(), f"Bearer {token}".encode())

    def guarded(handler):
        async def wrapper(request: Request) -> Response:
            if not authorised(request):
                return JSONResponse({"error": "unauthorized"}, status_code=401)
            return await handler(request)
        return wrapper

    def job_or_404(request: Request) -> _Job | None:
        return jobs.get(request.path_params["job_id"])

    async def health(request: Request) -> Response:
        busy = any(j.result is None for j in jobs.values())
        latest = next(reversed(jobs), None)  # what a restarted dispatcher re-attaches to
        return JSONResponse({"ok": True, "busy": busy, "gpu": gpu, "gpu_count": gpu_count, "job": latest,
                             "key": jobs[latest].key if latest else None})

    async def submit(request: Request) -> Response:
        if any(j.result is None for j in jobs.values()):
            return JSONResponse({"error": "busy: one job at a time"}, status_code=409)
        body = await request.body()
        if len(body) > MAX_BUNDLE_BYTES:
            return JSONResponse({"error": "bundle too large"}, status_code=413)
        job_id = f"pod-{uuid.uuid4().hex[:10]}"
        root = workdir / job_id
        bundle = root / "bundle"
        try:
            with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as tar:
                tar.extractall(bundle, filter="data")  # refuses absolute paths, .. and links out
        except (tarfile.TarError, OSError, ValueError) as e:
            return JSONResponse({"error": f"bad bundle: {e}"}, status_code=400)
        family, model = request.headers.get("x-family", ""), request.headers.get("x-base-model", "")
        if not family or not model:
            return JSONResponse({"error": "X-Family and X-Base-Model headers are required"}, status_code=400)
        mode = request.headers.get("x-mode", "train")
        if mode not in MODES:
            return JSONResponse({"error": f"X-Mode must be one of {', '.join(MODES)}"}, status_code=400)

        def fetch_eval() -> list[dict]:
            if not job.eval_ready.wait(eval_wait_seconds):
                raise TimeoutError("the hidden eval never arrived")
            return job.eval_items

        runner = Runner(bundle, root / "run", fetch_eval, family, model, gpu=gpu, gpu_count=gpu_count,
                        usd_per_hour=usd_per_hour, commands=commands, timeouts=timeouts, host=workdir, install=install,
                        confinement=confinement, mode=mode)
        job = _Job(runner, request.headers.get("x-job-key", ""))
        jobs[job_id] = job

        def run() -> None:
            try:
                job.result = runner.run()
            except Exception as e:  # noqa: BLE001 - the service reports, never dies
                job.result = RunResult.failed(FailureReason.RUNNER_ERROR, f"{type(e).__name__}: {e}", base_model=model,
                                              gpu=gpu, gpu_count=gpu_count)

        threading.Thread(target=run, daemon=True).start()
        return JSONResponse({"job_id": job_id}, status_code=202)

    async def status(request: Request) -> Response:
        job = job_or_404(request)
        if job is None:
            return JSONResponse({"error": "no such job"}, status_code=404)
        path = job.runner.root / "status.json"
        data = json.loads(path.read_text()) if path.exists() else {"phase": job.runner.phase}
        done = job.result is not None
        # The runner says "done" a moment before its result is stored: "done" means fetchable.
        phase = "done" if done else ("finishing" if job.runner.phase == "done" else job.runner.phase)
        return JSONResponse({**data, "phase": phase, "done": done})

    async def log(request: Request) -> Response:
        job = job_or_404(request)
        if job is None:
            return PlainTextResponse("no such job", status_code=404)
        return PlainTextResponse(job.runner.log_tail(int(request.query_params.get("chars", 4000))))

    async def send_eval(request: Request) -> Response:
        job = job_or_404(request)
        if job is None:
            return JSONResponse({"error": "no such job"}, status_code=404)
        if job.runner.phase != "awaiting-eval":
            return JSONResponse({"error": f"not awaiting the eval (phase {job.runner.phase})"}, status_code=409)
        job.eval_items = json.loads(await request.body())
        job.eval_ready.set()
        return JSONResponse({"ok": True})

    async def result(request: Request) -> Response:
        job = job_or_404(request)
        if job is None or job.result is None:
            return JSONResponse({"error": "no result yet"}, status_code=404)
        return Response(job.result.model_dump_json(), media_type="application/json")

    async def cancel(request: Request) -> Response:
        job = job_or_404(request)
        if job is None:
            return JSONResponse({"error": "no such job"}, status_code=404)
        job.runner.cancel()
        job.eval_ready.set()
        return JSONResponse({"ok": True})

    return Starlette(routes=[
        Route("/health", guarded(health)),
        Route("/jobs", guarded(submit), methods=["POST"]),
        Route("/jobs/{job_id}", guarded(status)),
        Route("/jobs/{job_id}/log", guarded(log)),
        Route("/jobs/{job_id}/eval", guarded(send_eval), methods=["POST"]),
        Route("/jobs/{job_id}/result", guarded(result)),
        Route("/jobs/{job_id}/cancel", guarded(cancel), methods=["POST"]),
    ])


def settings_from_env(environ=os.environ) -> dict:
    """The service's settings on a pod: the pool sends them as one base64 JSON object
    (`TRAINERGYM_ENV_B64`, so no quoting reaches the provider's API); plain variables work too.
    The GPUs are what the pod shows (nvidia-smi: the provider may hand out another type than the
    pool asked for), else what the pool rented (`TRAINERGYM_GPU`, `TRAINERGYM_GPU_COUNT`).
    `TRAINERGYM_HOST_COMMANDS` (or the older `TRAINERGYM_POD_COMMANDS`: `Commands.from_env`)
    replaces phase commands, for fake pods in tests; `TRAINERGYM_TRAINER_CONFINEMENT` picks the
    train phase's confinement."""
    env = dict(environ)
    if env.get("TRAINERGYM_ENV_B64"):
        env.update(json.loads(base64.b64decode(env["TRAINERGYM_ENV_B64"])))
    token = env.get("TRAINERGYM_POD_TOKEN")
    if not token:
        raise SystemExit("no TRAINERGYM_POD_TOKEN: the pool sets it when it creates the pod; refusing to serve unauthenticated")
    try:
        commands = Commands.from_env(env)
    except ValueError as e:
        raise SystemExit(str(e)) from None
    name, seen = detect_gpus(env)
    gpu_count = seen if seen is not None else int(env.get("TRAINERGYM_GPU_COUNT", 0))
    gpu = name if name != "none" else env.get("TRAINERGYM_GPU", "unknown")
    return {"token": token, "gpu": gpu, "gpu_count": gpu_count,
            "usd_per_hour": float(env.get("TRAINERGYM_USD_PER_HOUR", 0.0)), "install": env.get("TRAINERGYM_INSTALL", "trainergym"),
            "commands": commands, "confinement": env.get("TRAINERGYM_TRAINER_CONFINEMENT")}


def serve(workdir: Path, host: str = "0.0.0.0", port: int = 8000, environ=os.environ) -> None:
    """Run the pod service until killed (what a pod runs once its bootstrap has installed us)."""
    import uvicorn

    uvicorn.run(create_app(workdir, **settings_from_env(environ)), host=host, port=port, log_level="warning")


def pack(bundle_dir: Path | None) -> bytes:
    """A bundle directory as .tar.gz bytes (regular files and directories only); None packs an
    empty one (a measurement's)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for path in sorted(Path(bundle_dir).rglob("*")) if bundle_dir is not None else ():
            if path.is_file() and not path.is_symlink():
                tar.add(path, arcname=path.relative_to(bundle_dir).as_posix())
    return buf.getvalue()


class PodClient:
    """Talks to one pod's service; every call returns within `timeout` (keep it under the
    proxy's ~100 s). An error status raises httpx.HTTPStatusError, except `result`'s 404 (not
    done yet)."""

    def __init__(self, base_url: str, token: str, timeout: float = 30.0):
        self.http = httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {token}"}, timeout=timeout)

    def _json(self, response: httpx.Response) -> dict:
        response.raise_for_status()
        return response.json()

    def health(self) -> dict:
        """`GET /health`: `{ok, busy, gpu, gpu_count, job, key}` (the latest job and the key it was
        submitted with)."""
        return self._json(self.http.get("/health"))

    def submit(self, bundle_dir: Path | None, family: str, base_model: str, key: str = "", mode: str = "train") -> str:
        """`POST /jobs`: upload the bundle as .tar.gz, to run with `family` and `base_model` and
        tagged with `key` (the queue's job id); returns the pod's job id. A busy pod answers 409.
        `mode` "pre" or "pre-fresh" (and no bundle) measures the base model's baseline instead."""
        headers = {"X-Family": family, "X-Base-Model": base_model, "X-Job-Key": key}
        if mode != "train":  # a pod of an older release ignores the header: see the measurement's check
            headers["X-Mode"] = mode
        response = self.http.post("/jobs", content=pack(bundle_dir), headers=headers)
        return self._json(response)["job_id"]

    def status(self, job_id: str) -> dict:
        """`GET /jobs/{id}`: its `phase`, `done`, heartbeat and progress."""
        return self._json(self.http.get(f"/jobs/{job_id}"))

    def log(self, job_id: str, chars: int = 4000) -> str:
        """`GET /jobs/{id}/log`: the last `chars` characters of the runner's log."""
        response = self.http.get(f"/jobs/{job_id}/log", params={"chars": chars})
        response.raise_for_status()
        return response.text

    def send_eval(self, job_id: str, items: list[dict]) -> None:
        """`POST /jobs/{id}/eval`: upload the hidden-eval items; answered 409 unless the job is
        awaiting the eval."""
        self._json(self.http.post(f"/jobs/{job_id}/eval", content=json.dumps(items)))

    def result(self, job_id: str) -> RunResult | None:
        """The job's result, or None until it is done."""
        response = self.http.get(f"/jobs/{job_id}/result")
        return None if response.status_code == 404 else RunResult.model_validate(self._json(response))

    def cancel(self, job_id: str) -> None:
        """`POST /jobs/{id}/cancel`: stop the job; its result says cancelled."""
        self._json(self.http.post(f"/jobs/{job_id}/cancel"))

    def close(self) -> None:
        """Close the HTTP connections."""
        self.http.close()
