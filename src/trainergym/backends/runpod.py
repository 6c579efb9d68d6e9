"""The pod backend: validated jobs queued durably, run on a warm pool of rented GPU pods.

One dispatcher loop (`tick`, single-threaded, so its pods and jobs run on a virtual clock as
well; the queue's leases always run on real time, so dispatchers sharing a queue never run a job
twice) leases jobs from the queue, takes a pod from the pool (warm, or provisioned by walking the ladder),
submits the bundle to the pod's service and polls it (the provider's proxy cuts long
requests), heartbeating the job's lease. When the pod reports
`awaiting-eval` (training is over and its processes are gone) the hidden eval is uploaded;
then the result is recorded and the pod goes back to the pool. A pod that dies mid-job is
discarded and its job requeued (the attempt counts). On start the pool reconciles with the
provider, and the dispatcher re-attaches to pods that were busy when a previous one died: the
pod's service names its latest job and the queue job it was submitted for, so the run goes on
where it is, without a new attempt. Nothing here ever sends the provider's API key to a pod.
"""

from __future__ import annotations

import os
import threading
import tomllib
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import httpx

from trainergym.backends import BackendOptions, BackendUnavailable, JobHandle
from trainergym.backends.queued import QueueBackend
from trainergym.host.pod_service import PodClient
from trainergym.infra.pool import (DEFAULT_LADDER, AuthError, Pod, PodPool, PoolConfig, PoolExhausted, ProviderError, Rung,
                                   TransientError)
from trainergym.infra.queue import Job, JobQueue
from trainergym.job.result import FailureReason, RunResult
from trainergym.paths import data_dir
from trainergym.task import hidden


def ladder(path: Path | None) -> tuple[Rung, ...]:
    """The GPU ladder from a TOML file of `[[rung]]` tables (gpu_type, gpu_count, cloud), else
    the default one. Raises ValueError with the file's problem."""
    if path is None:
        return DEFAULT_LADDER
    try:
        rungs = tomllib.loads(Path(path).read_text())["rung"]
        return tuple(Rung(**r) for r in rungs)
    except (OSError, tomllib.TOMLDecodeError, KeyError, TypeError) as e:
        raise ValueError(f"{path}: not a ladder of [[rung]] tables with gpu_type, gpu_count and cloud ({e})") from None


def _attempt_key(job: Job) -> str:
    """What a pod's job is tagged with: the queue's job and its attempt."""
    return f"{job.id}#{job.attempts}"


class PodBackend(QueueBackend):
    """Jobs dispatched to a warm pool of GPU pods (`pool`) through the queue. `drain` runs the
    dispatcher; `submit` only queues."""

    name = "runpod"

    def __init__(self, workdir: Path, pool: PodPool, queue: JobQueue | None = None, poll_seconds: float = 10.0,
                 dead_after: int = 6, job_timeout: float = 6 * 3600.0, sleep=time.sleep,
                 client_factory=lambda url, token: PodClient(url, token, timeout=30.0)):
        self.workdir, self.pool = Path(workdir), pool
        self.queue = queue or JobQueue(self.workdir / "jobs.db", lease_seconds=max(120.0, 6 * poll_seconds))
        self.poll_seconds, self.dead_after, self.job_timeout, self.sleep = poll_seconds, dead_after, job_timeout, sleep
        self.client_factory, self.clock = client_factory, pool.clock
        self.owner = f"dispatch-{uuid.uuid4().hex[:8]}"
        self._stop = threading.Event()
        self._started = False  # reconciled with the provider and re-attached: nothing is dispatched before
        self.active: dict[str, _Dispatch] = {}
        self.errors: list[str] = []

    @classmethod
    def from_options(cls, options: BackendOptions) -> PodBackend:
        """The registry's constructor (`make_backend("runpod", ...)`): Runpod pods billed to the
        installation's cost ledger, through Runpod's REST v2 API, or its GraphQL API (the `runpod`
        SDK) with `TRAINERGYM_RUNPOD_API=graphql` until Runpod retires it. Refuses without
        `RUNPOD_API_KEY`, or without the `runpod` extra for GraphQL."""
        if not os.environ.get("RUNPOD_API_KEY"):
            raise BackendUnavailable("the runpod backend needs RUNPOD_API_KEY (a Runpod API key) in the environment")
        api = os.environ.get("TRAINERGYM_RUNPOD_API", "rest")
        if api == "rest":
            from trainergym.infra.runpod_rest import RunpodRestProvider as Provider
        elif api == "graphql":
            try:
                from trainergym.infra.runpod_graphql import RunpodProvider as Provider
            except ImportError:
                raise BackendUnavailable("TRAINERGYM_RUNPOD_API=graphql needs the runpod extra: "
                                         "pip install 'trainergym[runpod]'") from None
        else:
            raise BackendUnavailable(f"TRAINERGYM_RUNPOD_API={api!r}: use rest (the default) or graphql")
        from trainergym.infra.costs import Ledger
        from trainergym.job.stack import pod_install

        workdir = options.workdir or data_dir() / "worker"
        config = PoolConfig(max_pods=options.max_jobs or 16, ladder=ladder(options.ladder))
        config.env["TRAINERGYM_INSTALL"] = pod_install()  # what each job's setup installs beside it
        try:
            provider = Provider()
        except ProviderError as e:
            raise BackendUnavailable(f"the runpod backend cannot start: {e}") from None
        pool = PodPool(provider, workdir / "pods.db", config, ledger=Ledger())
        return cls(workdir, pool, queue=JobQueue(options.queue or data_dir() / "jobs.db", lease_seconds=options.lease_seconds or 300))

    async def cancel(self, handle: JobHandle) -> None:
        """Cancel the job in the queue; the dispatcher sees the lost lease and cancels it on its
        pod."""
        self.queue.cancel(handle.job_id)  # the dispatcher sees the lost lease and cancels on the pod

    # --- the dispatcher: one loop, every job a small state machine advanced by tick() -------------
    def start(self) -> bool:
        """Reconcile with the provider, then re-attach to the pods busy under a dead dispatcher.
        False while the provider keeps failing transiently (rate limits): `tick` tries again, and
        dispatches nothing until it has succeeded."""
        try:
            self.pool.reconcile()
        except ProviderError as e:  # transient, or opaque: try again next tick
            if not isinstance(e, TransientError):
                self.errors.append(f"reconcile: {e}")
            return False
        for pod in list(self.pool.live):
            if pod.state == "busy" and pod.job_id is not None:
                self._reattach(pod)
        self._started = True
        return True

    def _reattach(self, pod: Pod) -> None:
        now, beat = self.clock(), self.queue.clock()
        client = self.client_factory(pod.url, pod.token) if pod.url else None
        try:
            health = client.health() if client is not None else None
        except (httpx.HTTPError, OSError, ValueError):
            health = None
        if health is None:  # unreachable (or never booted): the job comes back when its lease lapses
            try:
                gone = self.pool.find(pod) is None
            except ProviderError:
                gone = False
            if gone:  # died while no dispatcher ran: billed to when it was last seen
                self.pool.terminate_vanished(pod)
            else:
                self.pool.discard(pod, "unreachable after a dispatcher restart")
            return
        job = self.queue.adopt(pod.job_id, self.owner)
        # The pod ran this attempt only if its key names it: a retried job's earlier attempt on
        # the same pod (failed for the host) must not be taken for the one now due.
        submitted = job is not None and health.get("key") == _attempt_key(job)
        if job is None or (health.get("busy") and not submitted):  # the job ended, or the pod runs a stranger
            if health.get("busy"):
                try:
                    client.cancel(health["job"])
                except (httpx.HTTPError, OSError):
                    pass
                self.pool.discard(pod, "stale job after a dispatcher restart")
            else:
                self.pool.release(pod)
            client.close()
            return
        self.active[job.id] = _Dispatch(job, started=now, beat=beat, pod=pod, client=client,
                                        remote_id=health["job"] if submitted else None)

    def drain(self, once: bool = False, idle_poll: float | None = None) -> None:
        """Dispatch until stopped; with `once`, until the queue is empty and no pod is left."""
        self.start()
        while not self._stop.is_set():
            self.tick()
            if once and self._started and not self.active and not self.queue.has_active():
                self.pool.shutdown()
                return
            self.sleep(idle_poll if idle_poll is not None and not self.active else self.poll_seconds)
        # Stopped (by `stop`, or the provider refusing our credentials): pods serving no job are
        # terminated now; busy ones are kept for a restarted dispatcher to re-attach.
        for d in list(self.active.values()):
            if d.pod is None or d.remote_id is None:
                self._end(d)
        try:
            self.pool.shutdown(keep_busy=True, wait=False)
        except Exception as e:  # noqa: BLE001 - the next start reconciles
            self.errors.append(f"shutdown: {e!r}")

    def stop(self) -> None:
        """Make `drain` return after its current tick; safe from another thread."""
        self._stop.set()

    def tick(self) -> None:
        """One dispatcher step: return expired leases to the queue, advance the pool (boots,
        reaping), advance every active job, then lease queued jobs while fewer than `max_pods` are
        active."""
        if not self._started and not self.start():
            return
        self._beat_all()  # before recover: a slow previous tick must not lapse our own leases
        self.queue.recover()
        try:
            self.pool.tick()
        except Exception as e:  # noqa: BLE001 - one provider call never kills the dispatcher
            self.errors.append(f"pool: {e!r}")
        if self.pool.refused is not None:
            self.errors.append(self.pool.refused)
            self.pool.refused = None
            self._stop.set()
        self._beat_all()
        for d in list(self.active.values()):
            self._step(d)
        while len(self.active) < self.pool.config.max_pods and not self._stop.is_set():
            job = self.queue.lease(self.owner)
            if job is None:
                break
            self.active[job.id] = _Dispatch(job, started=self.clock(), beat=self.queue.clock())
            self._step(self.active[job.id])
        for pod in self.pool.live:  # pods held for jobs this dispatcher no longer runs: back to the pool
            if pod.job_id is not None and pod.job_id not in self.active:
                self.pool.abandon(pod.job_id)

    def _end(self, d: _Dispatch, release: bool = True) -> None:
        self.active.pop(d.job.id, None)
        if d.client is not None:
            d.client.close()
        if d.pod is not None and release:
            self.pool.release(d.pod)
        elif d.pod is None:
            self.pool.abandon(d.job.id)  # a pod may be booting for it: it becomes a spare

    def _beat_all(self) -> None:
        """Heartbeat each active job's lease that is due (a sixth of the lease since its last beat,
        so a slow tick still beats well before a lease lapses); end the ones lost."""
        now = self.queue.clock()
        for d in list(self.active.values()):
            if now - d.beat < self.queue.lease_seconds / 6:
                continue
            d.beat = now
            if not self.queue.heartbeat(d.job.id, self.owner):
                self._lost(d)

    def _lost(self, d: _Dispatch) -> None:
        if d.remote_id is not None:
            try:
                d.client.cancel(d.remote_id)
            except (httpx.HTTPError, OSError):
                pass
        self._end(d)

    def _step(self, d: _Dispatch) -> None:
        """Advance one job; whatever it raises is that job's trouble, never the loop's."""
        try:
            self._advance(d)
        except Exception as e:  # noqa: BLE001
            self.errors.append(f"{d.job.id}: {e!r}")
            d.misses += 1
            if d.misses >= self.dead_after:
                if d.pod is not None:
                    self.pool.discard(d.pod, f"failing: {e!r}")
                self.queue.fail(d.job.id, self.owner, RunResult.failed(FailureReason.RUNNER_ERROR, f"dispatcher: {e!r}"))
                self._end(d, release=False)

    def _advance(self, d: _Dispatch) -> None:
        job = d.job  # its lease is beaten by `_beat_all`, every tick, before this
        if d.pod is None:
            if job.id in self.pool.failed_jobs:  # before asking again: a new request would provision anew
                kind = FailureReason.PROVIDER_REFUSED if job.id in self.pool.refused_jobs else FailureReason.NO_POD
                self.pool.refused_jobs.discard(job.id)
                self.queue.fail(job.id, self.owner, RunResult.failed(kind, self.pool.failed_jobs.pop(job.id)))
                self._end(d)
                return
            try:
                d.pod = self.pool.request(job.id)
            except AuthError as e:
                self.errors.append(str(e))
                self.queue.fail(job.id, self.owner, RunResult.failed(FailureReason.PROVIDER_REFUSED, str(e)))
                self._stop.set()
                self._end(d)
                return
            except PoolExhausted as e:
                self.queue.fail(job.id, self.owner, RunResult.failed(FailureReason.NO_POD, str(e)))
                self._end(d)
                return
            if d.pod is None:
                return  # booting, or every pod busy
            if not self.queue.start(job.id, self.owner):  # cancelled (or lost) while its pod booted
                self._end(d)
                return
            d.client = self.client_factory(d.pod.url, d.pod.token)
        try:
            if d.remote_id is None:
                if not Path(job.bundle).is_dir():
                    self.queue.fail(job.id, self.owner, RunResult.failed(
                        FailureReason.RUNNER_ERROR, f"the job's bundle {job.bundle} is missing on the dispatcher's host"))
                    self._end(d)
                    return
                d.remote_id = d.client.submit(Path(job.bundle), job.family, job.base_model, key=_attempt_key(job))
            status = d.client.status(d.remote_id)
            self.pool.saw(d.pod)
            if status["phase"] == "awaiting-eval" and not d.eval_sent:
                d.client.send_eval(d.remote_id, [ex.model_dump() for ex in hidden.hidden_eval(job.family)])
                d.eval_sent = True
            result = None
            if status.get("done"):
                result = d.client.result(d.remote_id) or RunResult.failed(FailureReason.RUNNER_ERROR, "the pod kept no result")
            d.misses = 0
        except (httpx.HTTPError, OSError, ValueError):
            d.misses += 1
            try:
                vanished = self.pool.find(d.pod) is None  # by id and by name (an id may change)
            except ProviderError:
                vanished = False  # the provider is flaky, not necessarily the pod
            if d.misses >= self.dead_after or vanished:
                self.pool.discard(d.pod, "died mid-job", died=vanished)
                self.queue.fail(job.id, self.owner, RunResult.failed(FailureReason.POD_DIED, d.pod.id or d.pod.name))
                self._end(d, release=False)
            return
        if result is not None:
            gpu = {"gpu": d.pod.gpu_type, "gpu_count": d.pod.gpu_count}
            if not d.pod.gpu_said and result.gpu:  # the provider never named the GPUs: the runner measured them
                gpu = {}
            result = result.model_copy(update={**gpu, "details": {**result.details, "pod": d.pod.id}})
            if result.status == "succeeded":
                self.queue.complete(job.id, self.owner, result)
            else:  # the queue retries what `result.transient` says may be the host's fault
                self.queue.fail(job.id, self.owner, result)
            self._end(d)
        elif self.clock() - d.started > self.job_timeout:
            try:
                d.client.cancel(d.remote_id)
            except (httpx.HTTPError, OSError):
                pass
            self.queue.fail(job.id, self.owner, RunResult.failed(FailureReason.JOB_TIMEOUT, f"past {self.job_timeout:.0f} s"))
            self._end(d)


@dataclass
class _Dispatch:
    job: Job
    started: float
    beat: float
    pod: Pod | None = None
    client: object = None
    remote_id: str | None = None
    misses: int = 0
    eval_sent: bool = False
