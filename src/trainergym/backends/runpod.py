"""The pod backend: validated jobs queued durably, run on a warm pool of rented GPU pods.

A dispatcher leases jobs from the queue, takes a pod from the pool (warm, or provisioned by
walking the ladder), submits the bundle to the pod's service and polls it (the provider's
proxy cuts long requests), heartbeating the job's lease. When the pod reports
`awaiting-eval` (training is over and its processes are gone) the hidden eval is uploaded;
then the result is recorded and the pod goes back to the pool. A pod that dies mid-job is
discarded and its job requeued (the attempt counts). On start the pool reconciles with the
provider, and pods that were busy when a previous dispatcher died are discarded, their jobs
coming back when their leases lapse. Nothing here ever sends the provider's API key to a pod.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import threading
import time
import uuid
from pathlib import Path

import httpx

from trainergym import hidden
from trainergym.backends import JobHandle, JobResult, result_from_job
from trainergym.job import JobBundle
from trainergym.pod_service import PodClient
from trainergym.pool import AuthError, Pod, PodPool, PoolExhausted
from trainergym.queue import Job, JobQueue
from trainergym.tasks import TaskSpec, load_task


class PodBackend:
    name = "runpod"

    def __init__(self, workdir: Path, pool: PodPool, queue: JobQueue | None = None, poll_seconds: float = 10.0,
                 dead_after: int = 6, job_timeout: float = 6 * 3600.0, sleep=time.sleep):
        self.workdir, self.pool = Path(workdir), pool
        self.queue = queue or JobQueue(self.workdir / "jobs.db", lease_seconds=max(120.0, 6 * poll_seconds))
        self.poll_seconds, self.dead_after, self.job_timeout, self.sleep = poll_seconds, dead_after, job_timeout, sleep
        self.owner = f"dispatch-{uuid.uuid4().hex[:8]}"
        self._stop = threading.Event()
        self._threads: set[threading.Thread] = set()
        self._lock = threading.Lock()
        self.errors: list[str] = []

    # --- Backend protocol -------------------------------------------------------------------------
    async def submit(self, bundle: JobBundle, task: TaskSpec) -> JobHandle:
        keep = self.workdir / "bundles" / bundle.manifest.content_hash
        if not keep.exists():
            shutil.copytree(bundle.root, keep)
        job = self.queue.enqueue(bundle.manifest.content_hash, task.id, keep)
        return JobHandle(job_id=job.id, content_hash=job.content_hash, backend=self.name)

    async def result(self, handle: JobHandle, timeout: float | None = None) -> JobResult:
        async with asyncio.timeout(timeout):
            while True:
                job = self.queue.get(handle.job_id)
                if job is not None and job.state in ("done", "failed"):
                    return result_from_job(job)
                await asyncio.sleep(self.poll_seconds)

    async def cancel(self, handle: JobHandle) -> None:
        self.queue.cancel(handle.job_id)  # the dispatcher sees the lost lease and cancels on the pod

    # --- the dispatcher ---------------------------------------------------------------------------
    def start(self) -> None:
        """Reconcile with the provider; pods busy under a dead dispatcher are discarded."""
        self.pool.reconcile()
        for pod in list(self.pool.live):
            if pod.state == "busy":
                self.pool.discard(pod, "dispatcher restarted")

    def drain(self, once: bool = False, idle_poll: float | None = None) -> None:
        """Dispatch jobs until stopped; with `once`, until the queue is empty and no pod is left."""
        self.start()
        while not self._stop.is_set():
            self.queue.recover()
            self.pool.reap()
            with self._lock:
                self._threads = {t for t in self._threads if t.is_alive()}
                running = len(self._threads)
            job = self.queue.lease(self.owner) if running < self.pool.config.max_pods else None
            if job is not None:
                thread = threading.Thread(target=self._dispatch, args=(job,), daemon=True)
                with self._lock:
                    self._threads.add(thread)
                thread.start()
                continue
            if once and running == 0 and not self.queue.jobs("queued"):
                self.pool.shutdown()
                return
            self.sleep(idle_poll if idle_poll is not None else self.poll_seconds)

    def stop(self) -> None:
        self._stop.set()

    def _dispatch(self, job: Job) -> None:
        try:
            pod = self._acquire(job)
        except AuthError as e:
            self.errors.append(str(e))
            self.queue.fail(job.id, self.owner, f"provider refused: {e}", retry=False)
            self._stop.set()
            return
        except PoolExhausted as e:
            self.queue.fail(job.id, self.owner, f"no GPU pod available: {e}")
            return
        client = PodClient(pod.url, pod.token, timeout=min(60.0, self.poll_seconds * 3))
        try:
            outcome = self._run_on(pod, client, job)
        finally:
            client.close()
        if outcome == "pod-dead":
            self.pool.discard(pod, "died mid-job")
            self.queue.fail(job.id, self.owner, "the pod died mid-job")
        else:
            self.pool.release(pod)

    def _acquire(self, job: Job) -> Pod:
        while True:
            try:
                return self.pool.acquire(job.id)
            except PoolExhausted:
                if len(self.pool.live) < self.pool.config.max_pods:
                    raise  # the ladder is exhausted, not the cap
                if not self.queue.heartbeat(job.id, self.owner):
                    raise
                self.sleep(self.poll_seconds)

    def _run_on(self, pod: Pod, client: PodClient, job: Job) -> str:
        bundle = Path(job.bundle)
        meta = json.loads((bundle / "manifest.json").read_text())
        task = load_task(job.task_id)
        self.queue.start(job.id, self.owner)
        misses, deadline, remote_id = 0, time.monotonic() + self.job_timeout, None
        while time.monotonic() < deadline:
            try:
                if remote_id is None:
                    remote_id = client.submit(bundle, task.family, meta["base_model"])
                status = client.status(remote_id)
                misses = 0
            except (httpx.HTTPError, OSError, ValueError):
                misses += 1
                if misses >= self.dead_after or self.pool.provider.get(pod.id) is None:
                    return "pod-dead"
                self.sleep(self.poll_seconds)
                continue
            if not self.queue.heartbeat(job.id, self.owner):  # cancelled, or our lease lapsed
                client.cancel(remote_id)
                return "cancelled"
            if status["phase"] == "awaiting-eval":
                client.send_eval(remote_id, [ex.model_dump() for ex in hidden.hidden_eval(task.family)])
            if status.get("done"):
                result = client.result(remote_id) or {}
                result.update(gpu=pod.rung.gpu_type, gpu_count=pod.rung.gpu_count, pod=pod.id)
                if result.get("status") == "succeeded":
                    self.queue.complete(job.id, self.owner, result)
                else:
                    self.queue.fail(job.id, self.owner, result.get("failure_reason", "failed"),
                                    retry=result.get("failure_reason", "").startswith("install failed"), result=result)
                return "done"
            self.sleep(self.poll_seconds)
        client.cancel(remote_id)
        self.queue.fail(job.id, self.owner, f"the job ran past {self.job_timeout:.0f} s", retry=False)
        return "done"
