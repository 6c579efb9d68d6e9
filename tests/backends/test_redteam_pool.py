"""Red-team attacks on the pod pool, the dispatcher and the durable queue.

Each test plays a hostile cloud (or a hostile moment) against the real `PodPool`, `PodBackend` and
`JobQueue` over the simulated provider (`trainergym.backends.fleet.SimProvider`, virtual clock),
subclassed or monkeypatched here for the faults the simulator lacks. The queue's lease clock is
the same virtual clock: in production both run on real time, so a lease lapses when a tick takes
too long, as it would there. A test marked `xfail(strict=True)` exposes a real break of one of the
guarantees in docs/backends.md (its reason says which); the others are attacks that were handled.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from trainergym.backends.fleet import Clock, SimConfig, SimPod, SimProvider
from trainergym.backends.runpod import PodBackend
from trainergym.infra.costs import Ledger
from trainergym.infra.pool import AuthError, PodPool, PoolConfig, ProviderError, Rung
from trainergym.infra.queue import JobQueue

pytestmark = pytest.mark.slow  # the second tier (docs/testing.md)

MODEL = "Qwen/Qwen3-1.7B"
LADDER = (Rung("NVIDIA RTX A5000"), Rung("NVIDIA A40"), Rung("NVIDIA GeForce RTX 4090"), Rung("NVIDIA RTX A6000"))
LEASE = 600.0


class Killed(BaseException):
    """SIGKILL at this exact point: nothing after it runs, nothing is cleaned up."""


def plan(train: float = 1800.0, evaluate: float = 120.0):
    def _plan(bundle_dir: str) -> dict:
        return {"train_seconds": train, "eval_seconds": evaluate,
                "result": {"status": "succeeded", "pre": 0.5, "post": 0.6, "source": "surrogate", "train_seconds": train}}
    return _plan


class StrictPod(SimPod):
    """A simulated pod service that, like the real one, refuses a second job while one runs (409)."""

    def submit(self, bundle_dir, family, base_model, key=""):
        self._check()
        if not Path(bundle_dir).is_dir():  # what `pack(bundle_dir)` raises first
            raise FileNotFoundError(2, "No such file or directory", str(bundle_dir))
        latest = next(reversed(self.jobs), None)
        if latest is not None and not self.status(latest)["done"]:
            request = httpx.Request("POST", f"sim://{self.pod_id}/jobs")
            raise httpx.HTTPStatusError("409 busy", request=request, response=httpx.Response(409, request=request))
        return super().submit(bundle_dir, family, base_model, key)


class World:
    """One simulated cloud account and one machine's files (queue, pods database, ledger)."""

    def __init__(self, tmp_path, provider_cls=SimProvider, pod_cls=StrictPod, job_plan=None, lease: float = LEASE, **sim):
        self.tmp, self.lease = tmp_path, lease
        self.clock = Clock()
        self.provider = provider_cls(self.clock, SimConfig(**{"boot_jitter": 0.0, **sim}))
        self.pod_cls, self.plan = pod_cls, job_plan or plan()
        self.backends: list[PodBackend] = []

    def dispatcher(self, pods_db: str = "pods.db", max_pods: int = 4, ladder=LADDER, wall=None, idle: float = 600,
                   provider=None) -> PodBackend:
        """A fresh dispatcher process's view: everything rebuilt from the files."""
        provider = provider or self.provider
        pool = PodPool(provider, self.tmp / pods_db, PoolConfig(max_pods=max_pods, ladder=ladder, idle_seconds=idle,
                                                                 poll_seconds=5),
                       clock=self.clock, sleep=self.clock.sleep, ledger=Ledger(self.tmp / f"{pods_db}.ledger"), wall=wall)
        queue = JobQueue(self.tmp / "jobs.db", lease_seconds=self.lease, clock=self.clock)
        factory = (lambda url, token: self.pod_cls(provider, url.removeprefix("sim://"), self.plan))
        backend = PodBackend(self.tmp, pool, queue=queue, poll_seconds=30, sleep=self.clock.sleep, client_factory=factory)
        self.backends.append(backend)
        return backend

    def enqueue(self, n: int, start: int = 0) -> list[str]:
        queue = JobQueue(self.tmp / "jobs.db", lease_seconds=self.lease, clock=self.clock)
        return [queue.enqueue(f"h{i}", "calc_chain", self.tmp, family="calc_chain", base_model=MODEL).id
                for i in range(start, start + n)]

    def submissions(self, provider=None) -> dict[str, int]:
        """How many times each queue job was submitted to some pod's service (any attempt)."""
        counts: dict[str, int] = {}
        for jobs in (provider or self.provider).services.values():
            for job in jobs.values():
                queued = job["key"].split("#")[0]  # the key is `<job id>#<attempt>`
                counts[queued] = counts.get(queued, 0) + 1
        return counts

    def billed(self, *backends) -> float:
        return sum(b.pool.billed_usd() for b in backends)


def drain(backend: PodBackend, limit: int = 20_000) -> None:
    """`drain(once=True)` with a bound on ticks, so a livelock fails instead of hanging."""
    backend.start()
    for _ in range(limit):
        backend.tick()
        if backend._started and not backend.active and not backend.queue.has_queued():
            backend.pool.shutdown()
            return
        backend.sleep(backend.poll_seconds)
    raise AssertionError("the dispatcher never drained")


def settled(world: World, *backends: PodBackend, attempts_one: bool = True) -> None:
    """The guarantees, once everything has drained."""
    queue = JobQueue(world.tmp / "jobs.db", lease_seconds=LEASE, clock=world.clock)
    for job in queue.jobs():
        assert job.state == "done" or (job.state == "failed" and job.result and job.result.failure_reason), job
        if attempts_one and job.state == "done":
            assert job.attempts == 1, job
    assert world.provider.running() == 0, f"{world.provider.running()} pods still billing"
    assert all(b.pool.live == [] for b in backends)
    assert world.billed(*backends) == pytest.approx(world.provider.billed_usd(), rel=0.01)
    assert world.provider.billed_usd() > 0


# --- baseline -------------------------------------------------------------------------------------------

def test_baseline_three_jobs_drain_cleanly(tmp_path):
    world = World(tmp_path)
    world.enqueue(3)
    backend = world.dispatcher()
    drain(backend)
    assert world.submissions() == {j.id: 1 for j in backend.queue.jobs()}
    settled(world, backend)


# --- eventual consistency around terminate --------------------------------------------------------

class DeleteThenBlindGet(SimProvider):
    """The first DELETE answers success but does not take; after any DELETE the pod is missing from
    get and list for two minutes (eventually consistent reads), then shows up again, still billing."""

    def __init__(self, clock, config):
        super().__init__(clock, config)
        self.noop, self.blind_until = 1, {}

    def terminate(self, pod_id):
        self.blind_until[pod_id] = self.clock() + 120
        if self.noop:
            self.noop -= 1
            return
        super().terminate(pod_id)

    def get(self, pod_id):
        if self.clock() < self.blind_until.get(pod_id, -1.0):
            return None
        return super().get(pod_id)


def test_a_terminate_that_does_not_take_hidden_by_a_stale_get(tmp_path):
    world = World(tmp_path, provider_cls=DeleteThenBlindGet)
    world.enqueue(1)
    backend = world.dispatcher()
    drain(backend)
    world.clock.sleep(3600)  # an hour later
    settled(world, backend)


class InvisibleWhileLagging(SimProvider):
    """A new pod is missing from get and list for `list_lag` (longer than the pool's grace), and a
    DELETE of a pod the API does not show yet answers 404 and does nothing: the pod boots anyway."""

    def terminate(self, pod_id):
        pod = self.pods.get(pod_id)
        if pod is not None and self.clock() < pod.created + self.config.list_lag:
            return  # 404: "no such pod" (yet)
        super().terminate(pod_id)


def test_a_pod_given_up_for_unlisted_is_not_actually_terminated(tmp_path):
    world = World(tmp_path, provider_cls=InvisibleWhileLagging, list_lag=150.0)
    world.enqueue(1)
    backend = world.dispatcher(ladder=LADDER[:2])
    drain(backend)
    world.clock.sleep(3600)
    settled(world, backend)


class MadeDespiteError(SimProvider):
    """The first create makes its pod but answers an opaque error, and the new pod is listed only
    `list_lag` seconds later (longer than the pool's grace)."""

    def __init__(self, clock, config):
        super().__init__(clock, config)
        self.errors = 1

    def create(self, name, rung, env):
        pod_id = super().create(name, rung, env)
        if self.errors:
            self.errors -= 1
            raise ProviderError("Something went wrong. Please try again later or contact support.")
        return pod_id


def test_an_opaque_create_whose_pod_is_listed_after_the_grace(tmp_path):
    world = World(tmp_path, provider_cls=MadeDespiteError, list_lag=150.0)
    world.enqueue(1)
    backend = world.dispatcher()
    drain(backend)
    world.clock.sleep(3600)
    settled(world, backend)


def test_an_orphan_found_by_reconcile_is_billed_for_the_time_it_ran(tmp_path):
    # A pod of ours the database does not know (a crash's orphan, or one forgotten as above) has
    # run for two hours when a dispatcher starts.
    world = World(tmp_path)
    world.provider.create("trainergym-0123456789", LADDER[0], {})
    world.clock.sleep(7200)
    backend = world.dispatcher()
    backend.start()
    assert world.provider.running() == 0
    assert backend.pool.billed_usd() == pytest.approx(world.provider.billed_usd(), rel=0.01)
    assert backend.pool.billed_usd() > 0


class Reid(SimProvider):
    """Five minutes after it boots, the provider answers for a pod under a new id (a migration):
    the old id is 404 for get and DELETE."""

    def __init__(self, clock, config):
        super().__init__(clock, config)
        self.moved: set[str] = set()

    def _migrate(self):
        for pod_id, pod in list(self.pods.items()):
            if pod_id in self.moved or pod.boot_at is None or self.clock() < pod.boot_at + 300:
                continue
            new = pod_id + "m"
            pod.info.id = new
            self.pods[new] = self.pods.pop(pod_id)
            self.services[new] = self.services.pop(pod_id, {})
            self.moved.add(new)

    def get(self, pod_id):
        self._migrate()
        return super().get(pod_id)

    def list(self):
        self._migrate()
        return super().list()

    def terminate(self, pod_id):
        self._migrate()
        super().terminate(pod_id)


def test_a_pod_whose_id_changes_mid_job(tmp_path):
    world = World(tmp_path, provider_cls=Reid)
    world.enqueue(1)
    backend = world.dispatcher(ladder=LADDER[:1])
    drain(backend)
    world.clock.sleep(3600)
    settled(world, backend, attempts_one=False)


class SlowToTerminate(SimProvider):
    """DELETE is asynchronous: the pod stays listed (and billing) 30 s after it, then is gone."""

    def __init__(self, clock, config):
        super().__init__(clock, config)
        self.ends: dict[str, float] = {}

    def terminate(self, pod_id):
        self.ends.setdefault(pod_id, self.clock() + 30)

    def get(self, pod_id):
        end = self.ends.get(pod_id)
        if end is not None and self.clock() >= end:
            super().terminate(pod_id)
            self.pods[pod_id].terminated = end
        return super().get(pod_id)

    def running(self):
        for pod_id in list(self.ends):
            self.get(pod_id)
        return super().running()

    def billed_usd(self):
        self.running()
        return super().billed_usd()


def test_a_terminate_that_takes_thirty_seconds(tmp_path):
    world = World(tmp_path, provider_cls=SlowToTerminate)
    world.enqueue(1)
    backend = world.dispatcher()
    drain(backend)
    world.clock.sleep(60)
    settled(world, backend)


# --- pods and providers failing between calls -------------------------------------------------------

class DiesAtEval(StrictPod):
    """The pod dies between the status that said `awaiting-eval` and the upload of the hidden eval."""

    def send_eval(self, job_id, items):
        pod = self.provider.pods[self.pod_id]
        if pod.dies_at is None and not getattr(self.provider, "killed_once", False):
            self.provider.killed_once = True
            pod.dies_at = self.provider.clock()
        super().send_eval(job_id, items)


def test_a_pod_dying_between_status_and_eval_upload(tmp_path):
    world = World(tmp_path, pod_cls=DiesAtEval)
    world.enqueue(2)
    backend = world.dispatcher()
    drain(backend)  # the other job must not be stranded by one pod's death
    assert [j.state for j in backend.queue.jobs()] == ["done", "done"]
    settled(world, backend, attempts_one=False)


class TruncatedResult(StrictPod):
    """The pod's proxy cuts the result body once: not JSON (what `PodClient.result` then raises)."""

    def result(self, job_id):
        if not getattr(self.provider, "truncated_once", False):
            self.provider.truncated_once = True
            raise ValueError("Expecting ',' delimiter: line 1 column 4097 (char 4096)")
        return super().result(job_id)


def test_a_truncated_result_body(tmp_path):
    world = World(tmp_path, pod_cls=TruncatedResult)
    world.enqueue(2)
    backend = world.dispatcher()
    drain(backend)
    assert [j.state for j in backend.queue.jobs()] == ["done", "done"]
    settled(world, backend, attempts_one=False)


class OpaqueGet(SimProvider):
    """One read answers GraphQL's opaque "Something went wrong" (a QueryError: kind unknown)."""

    def __init__(self, clock, config):
        super().__init__(clock, config)
        self.opaque = 1

    def get(self, pod_id):
        if self.opaque and self.clock() > 0:
            self.opaque -= 1
            raise ProviderError("Something went wrong. Please try again later or contact support.")
        return super().get(pod_id)


def test_an_opaque_error_on_a_read(tmp_path):
    world = World(tmp_path, provider_cls=OpaqueGet)
    world.enqueue(1)
    backend = world.dispatcher()
    drain(backend)
    settled(world, backend)


class NoBalanceForNewPods(SimProvider):
    """Runpod refuses new pods under a minimum balance (402) while the running ones keep billing."""

    def __init__(self, clock, config):
        super().__init__(clock, config)
        self.broke_after = 1

    def create(self, name, rung, env):
        if self.creates >= self.broke_after:
            self.creates += 1
            raise AuthError("402 the Runpod account has no balance, nothing can be provisioned")
        return super().create(name, rung, env)


def test_no_balance_on_a_boot_timeout_replacement(tmp_path):
    # Job a's pod never boots; at its boot timeout the pool creates on the next rung: 402.
    world = World(tmp_path, provider_cls=NoBalanceForNewPods, never_boot_rate=1.0)
    world.enqueue(1)
    backend = world.dispatcher()
    drain(backend)
    (job,) = backend.queue.jobs()
    assert job.state == "failed" and "balance" in job.result.failure_detail
    assert world.provider.running() == 0


def test_no_balance_leaves_no_pod_serving_nothing(tmp_path):
    # Job 1 gets a pod; job 2's create answers 402: the dispatcher stops. Nothing may bill for nobody.
    world = World(tmp_path, provider_cls=NoBalanceForNewPods)
    world.enqueue(2)
    backend = world.dispatcher()
    backend.drain(once=True)  # returns once stopped
    world.clock.sleep(3600)
    live = [p for p in world.provider.pods.values() if world.provider._alive(p)]
    assert live == [], "a pod bills an hour after the dispatcher stopped, serving no job"


# --- cancellation, stock, ladders --------------------------------------------------------------------

def _cancel_while_booting(tmp_path):
    world = World(tmp_path, boot_seconds=120)
    (job_id,) = world.enqueue(1)
    backend = world.dispatcher()
    backend.start()
    backend.tick()
    world.clock.sleep(30)
    assert [p.state for p in backend.pool.live] == ["booting"]
    backend.queue.cancel(job_id)
    drain(backend)
    return world, backend, job_id


def test_a_job_cancelled_while_its_pod_boots_ends_cancelled_and_nothing_bills(tmp_path):
    world, backend, job_id = _cancel_while_booting(tmp_path)
    job = backend.queue.get(job_id)
    assert job.state == "failed" and job.result.failure_reason == "cancelled"
    settled(world, backend)


def test_a_job_cancelled_while_its_pod_boots_is_never_submitted(tmp_path):
    world, backend, job_id = _cancel_while_booting(tmp_path)
    assert world.submissions() == {}, "the cancelled job was uploaded to the pod and trained"


def test_a_stock_out_at_create_mid_ladder_names_the_gpu_held(tmp_path):
    world = World(tmp_path, out_of_stock={"NVIDIA RTX A5000": 1.0, "NVIDIA A40": 1.0})
    world.enqueue(1)
    backend = world.dispatcher()
    drain(backend)
    (job,) = backend.queue.jobs()
    assert (job.result.gpu, job.result.gpu_count) == ("NVIDIA GeForce RTX 4090", 2)
    settled(world, backend)


def test_everything_out_of_stock_fails_each_job_with_the_rungs_named(tmp_path):
    world = World(tmp_path, out_of_stock={r.gpu_type: 1.0 for r in LADDER})
    world.enqueue(3)
    backend = world.dispatcher()
    drain(backend)
    for job in backend.queue.jobs():
        assert job.state == "failed" and all(r.gpu_type in job.result.failure_detail for r in LADDER)
    assert world.provider.running() == 0 and world.provider.pods == {}


def test_a_huge_queue_drains_once_each(tmp_path):
    world = World(tmp_path, job_plan=plan(train=600, evaluate=60))
    world.enqueue(200)
    backend = world.dispatcher(max_pods=8)
    drain(backend, limit=100_000)
    assert world.submissions() == {j.id: 1 for j in backend.queue.jobs()}
    assert world.provider.creates <= 8
    settled(world, backend)


class GpuSaidLate(SimProvider):
    """The answer that first shows the pod ready lacks its GPU (a partial response: GraphQL's
    `machine` still null); every later answer names the GPUs it holds (substituted here)."""

    def get(self, pod_id):
        info = super().get(pod_id)
        if info is not None and info.ready:
            seen = self.__dict__.setdefault("seen_ready", set())
            if pod_id not in seen:
                seen.add(pod_id)
                info.gpu_type, info.gpu_count = None, None
        return info


def test_the_gpu_named_when_the_ready_answer_omits_it(tmp_path):
    world = World(tmp_path, provider_cls=GpuSaidLate, substitute={"NVIDIA RTX A5000": "NVIDIA RTX A6000"})
    world.enqueue(1)
    backend = world.dispatcher()
    drain(backend)
    (job,) = backend.queue.jobs()
    assert (job.result.gpu, job.result.gpu_count) == ("NVIDIA RTX A6000", 2)
    settled(world, backend)


class GpuNeverSaid(SimProvider):
    """Every answer lacks the pod's GPUs (a partial response); the pod holds 2x A6000 for the A5000
    asked, and its own runner (which counts and names the GPUs it holds) says so in its result."""

    def get(self, pod_id):
        info = super().get(pod_id)
        if info is not None:
            info.gpu_type, info.gpu_count = None, None
        return info


def test_the_gpu_named_when_the_provider_never_says_it(tmp_path):
    held = plan()

    def measured(bundle_dir):
        run = held(bundle_dir)
        run["result"].update(gpu="NVIDIA RTX A6000", gpu_count=2)  # what the pod's runner read off nvidia-smi
        return run

    world = World(tmp_path, provider_cls=GpuNeverSaid, job_plan=measured, substitute={"NVIDIA RTX A5000": "NVIDIA RTX A6000"})
    world.enqueue(1)
    backend = world.dispatcher()
    drain(backend)
    (job,) = backend.queue.jobs()
    assert (job.result.gpu, job.result.gpu_count) == ("NVIDIA RTX A6000", 2)
    settled(world, backend)


# --- several dispatchers on one machine -----------------------------------------------------------------

def _interleave(world: World, backends, limit: int = 5000) -> None:
    for b in backends:
        b.start()
    for _ in range(limit):
        for b in backends:
            b.tick()
        if all(b._started and not b.active for b in backends) and not backends[0].queue.has_queued():
            for b in backends:
                b.pool.shutdown()
            return
        world.clock.sleep(30)
    raise AssertionError("never drained")


def test_two_dispatchers_with_their_own_accounts_share_a_queue(tmp_path):
    # The supported shape of `worker --backend mock` twice: one queue, each its own fleet and pods file.
    world = World(tmp_path)
    other = SimProvider(world.clock, SimConfig(boot_jitter=0.0, seed=1))
    world.enqueue(6)
    a, b = world.dispatcher("a.db", max_pods=2), world.dispatcher("b.db", max_pods=2, provider=other)
    _interleave(world, [a, b])
    counts = world.submissions()
    for key, n in world.submissions(other).items():
        counts[key] = counts.get(key, 0) + n
    assert counts == {j.id: 1 for j in a.queue.jobs()}
    assert world.provider.running() == 0 and other.running() == 0


@pytest.mark.xfail(strict=True, reason='not fixed in one process: pools on one pods.db are owners with a heartbeat and a pid, and only another running process counts as a live owner (a second pool in the same process is taken for a restart, as existing tests require), so here the second takes over the first pod rows; two worker processes are kept apart (pool._live_owners)')
def test_a_second_runpod_worker_on_the_same_machine(tmp_path):
    # `trainergym worker --backend runpod` twice on one machine: one queue, one account and, by
    # default, one workdir (so one pods.db). The second starts while the first runs two jobs.
    world = World(tmp_path)
    world.enqueue(4)
    first = world.dispatcher(max_pods=2)
    first.start()
    while sum(1 for d in first.active.values() if d.remote_id) < 2:
        first.tick()
        world.clock.sleep(30)
    second = world.dispatcher(max_pods=2)
    _interleave(world, [first, second])
    assert world.submissions() == {j.id: 1 for j in first.queue.jobs()}, "a job ran twice"
    settled(world, first)


def test_a_second_runpod_worker_with_its_own_workdir(tmp_path):
    # The same, with `--workdir` apart: two pods files, one Runpod account.
    world = World(tmp_path)
    world.enqueue(4)
    first = world.dispatcher("a.db", max_pods=2)
    first.start()
    while sum(1 for d in first.active.values() if d.remote_id) < 2:
        first.tick()
        world.clock.sleep(30)
    second = world.dispatcher("b.db", max_pods=2)
    _interleave(world, [first, second])
    assert world.submissions() == {j.id: 1 for j in first.queue.jobs()}, "a job ran twice"
    settled(world, first, second)


# --- a dispatcher killed at awkward moments, then restarted --------------------------------------------

def _kill_at(monkeypatch, owner, name: str, when: str = "before", nth: int = 1):
    """Make `owner.name` raise Killed on its `nth` call, before or after doing its work."""
    original = getattr(owner, name)
    calls = [0]

    def wrapped(*args, **kwargs):
        calls[0] += 1
        if calls[0] == nth and when == "before":
            raise Killed(name)
        out = original(*args, **kwargs)
        if calls[0] == nth and when == "after":
            raise Killed(name)
        return out

    monkeypatch.setattr(owner, name, wrapped)


KILL_POINTS = [
    ("provider", "create", "after"),    # the pod exists; its id never reached the database
    ("provider", "create", "before"),   # recorded, never created
    ("pod", "submit", "before"),        # the pod is busy for the job in the database; nothing sent
    ("pod", "submit", "after"),         # the pod runs the job; its remote id is nowhere but the pod
    ("pod", "send_eval", "after"),      # the eval is on its way
    ("queue", "complete", "after"),     # done in the queue; the pod still busy in the database
    ("pool", "_terminate", "before"),   # the final shutdown, mid-way
]


@pytest.mark.parametrize("where,name,when", KILL_POINTS, ids=[f"{n}-{w}" for _, n, w in KILL_POINTS])
def test_a_dispatcher_killed_and_restarted_loses_nothing(tmp_path, monkeypatch, where, name, when):
    world = World(tmp_path)
    world.enqueue(2)
    first = world.dispatcher()
    owner = {"provider": world.provider, "pod": StrictPod, "queue": first.queue, "pool": first.pool}[where]
    _kill_at(monkeypatch, owner, name, when)
    with pytest.raises(Killed):
        drain(first)
    monkeypatch.undo()
    world.clock.sleep(LEASE + 1)  # the dead dispatcher's leases lapse before anyone restarts
    second = world.dispatcher()
    drain(second)
    assert all(n == 1 for n in world.submissions().values()), world.submissions()
    settled(world, second, attempts_one=False)
    assert [j.state for j in second.queue.jobs()] == ["done", "done"]


def test_a_crash_between_a_bill_and_forgetting_the_pod(tmp_path, monkeypatch):
    world = World(tmp_path)
    world.enqueue(1)
    first = world.dispatcher()
    _kill_at(monkeypatch, first.pool, "_forget", "before", nth=1)
    with pytest.raises(Killed):
        drain(first)  # the final shutdown bills the pod, then dies before marking it gone
    monkeypatch.undo()
    second = world.dispatcher()
    drain(second)
    assert world.provider.running() == 0
    assert second.pool.billed_usd() == pytest.approx(world.provider.billed_usd(), rel=0.01)


def _pod_dies_while_no_dispatcher_runs(world: World):
    """A dispatcher is SIGKILLed mid-job; its pod dies 10 minutes later; nobody restarts the
    dispatcher for five hours, then a fresh one drains. Returns (the fresh one, the pod)."""
    world.enqueue(1)
    first = world.dispatcher()
    first.start()
    while not any(d.remote_id for d in first.active.values()):
        first.tick()
        world.clock.sleep(30)
    (pod,) = first.pool.live
    world.provider.pods[pod.id].dies_at = world.clock() + 600
    world.clock.sleep(5 * 3600)
    second = world.dispatcher()
    drain(second)
    return second, pod


@pytest.mark.xfail(strict=True, reason='not fixed: no dispatcher ran while the pod died and neither the provider nor the pod reports when; reconcile bills it up to when it was last seen alive (the kill), 600 s short of its death (pool.reconcile)')
def test_a_pod_that_died_while_no_dispatcher_ran_is_billed_until_it_died(tmp_path):
    world = World(tmp_path)
    second, _ = _pod_dies_while_no_dispatcher_runs(world)
    settled(world, second, attempts_one=False)


def test_a_pod_that_died_unseen_is_billed_as_a_lower_bound(tmp_path):
    # The accepted limit above, said where the figure is read: the ledger's entry for such a pod
    # names it a lower bound, and no less than its life up to the last sighting is billed.
    world = World(tmp_path)
    second, pod = _pod_dies_while_no_dispatcher_runs(world)
    notes = [e["note"] for e in second.pool.ledger.rows() if pod.id in (e["note"] or "")]
    assert any("lower bound" in n for n in notes), notes
    assert second.pool.billed_usd() <= world.provider.billed_usd()


@pytest.mark.parametrize("step", [-3600.0, 3600.0], ids=["back", "forward"])
def test_a_restart_after_the_wall_clock_was_stepped(tmp_path, step):
    # The pod's age carries over a restart through wall dates; NTP steps the wall clock an hour
    # between the crash and the restart (a pod that ran 50 minutes must bill 50 minutes).
    world = World(tmp_path)
    world.enqueue(1)
    first = world.dispatcher(wall=lambda: world.clock() + 1e9)
    first.start()
    while not any(d.remote_id for d in first.active.values()):
        first.tick()
        world.clock.sleep(30)
    world.clock.sleep(2400)  # killed mid-job
    second = world.dispatcher(wall=lambda: world.clock() + 1e9 + step)
    drain(second)
    settled(world, second)


# --- what the pool bills --------------------------------------------------------------------------------

class DiesSoon(SimProvider):
    """The first pod dies 10 s after it boots."""

    def create(self, name, rung, env):
        pod_id = super().create(name, rung, env)
        if self.creates == 1:
            self.pods[pod_id].dies_at = self.pods[pod_id].boot_at + 10
        return pod_id


def test_a_pod_dying_mid_job_is_billed_until_it_died(tmp_path):
    world = World(tmp_path, provider_cls=DiesSoon, job_plan=plan(train=300, evaluate=60))
    world.enqueue(1)
    backend = world.dispatcher()
    drain(backend)
    settled(world, backend, attempts_one=False)


class ThrottledCreate(SimProvider):
    """Each create is answered 429 three times with `Retry-After: 60` before it is taken (what
    `RunpodRestProvider` waits out inside `create`): the pod exists only three minutes later."""

    def create(self, name, rung, env):
        self.clock.sleep(180)
        return super().create(name, rung, env)


def test_a_create_throttled_before_it_is_taken_is_not_billed(tmp_path):
    world = World(tmp_path, provider_cls=ThrottledCreate)
    world.enqueue(1)
    backend = world.dispatcher()
    drain(backend)
    settled(world, backend)


# --- a 429 storm stalls the dispatcher's loop ----------------------------------------------------------

class StormyReads(SimProvider):
    """During a storm each read is answered 429 three times with `Retry-After: 60` (waited out
    inside the call, as `RunpodRestProvider` does) and new pods are listed only after a while."""

    storm: tuple[float, float] = (0.0, 0.0)

    def _weather(self):
        if self.storm[0] <= self.clock() < self.storm[1]:
            self.clock.sleep(180)

    def get(self, pod_id):
        self._weather()
        return super().get(pod_id)

    def list(self):
        self._weather()
        return super().list()


def test_a_429_storm_does_not_rerun_a_running_job(tmp_path):
    # Production leases last 300 s (`PodBackend.from_options`); a read may take 180 s of Retry-After.
    world = World(tmp_path, provider_cls=StormyReads, lease=300.0)
    world.enqueue(1)
    backend = world.dispatcher(max_pods=3)
    backend.start()
    while not any(d.remote_id for d in backend.active.values()):
        backend.tick()
        world.clock.sleep(30)
    world.enqueue(2, start=1)  # two more jobs: their new pods are looked up while the storm lasts
    world.provider.storm = (world.clock() + 1, world.clock() + 900)
    drain(backend)
    assert world.submissions() == {j.id: 1 for j in backend.queue.jobs()}, "a running job was cancelled and re-run"
    settled(world, backend)


class BlindAtRestart(SimProvider):
    """For two minutes (`blind`) get and list do not show any pod (eventual consistency)."""

    blind: tuple[float, float] = (0.0, 0.0)

    def get(self, pod_id):
        if self.blind[0] <= self.clock() < self.blind[1]:
            return None
        return super().get(pod_id)


def test_a_restart_while_the_provider_briefly_shows_no_pods(tmp_path):
    world = World(tmp_path, provider_cls=BlindAtRestart)
    world.enqueue(1)
    first = world.dispatcher()
    first.start()
    while not any(d.remote_id for d in first.active.values()):
        first.tick()
        world.clock.sleep(30)
    world.clock.sleep(LEASE + 1)  # killed; its leases lapse
    world.provider.blind = (world.clock(), world.clock() + 120)
    second = world.dispatcher()
    drain(second)
    assert world.submissions() == {j.id: 1 for j in second.queue.jobs()}, "re-run instead of re-attached"
    settled(world, second, attempts_one=False)


def test_a_restart_between_taking_a_pod_and_submitting_a_retried_job(tmp_path, monkeypatch):
    # Attempt 1 fails on pod P for the host's fault (transient); attempt 2 takes P again and the
    # dispatcher dies before submitting. The restarted one must run attempt 2, not replay attempt 1.
    runs = []

    def flaky(bundle_dir):
        runs.append(bundle_dir)
        if len(runs) == 1:
            return {"train_seconds": 600.0, "eval_seconds": 60.0,
                    "result": {"status": "failed", "failure": "runner error", "failure_detail": "flaky host",
                               "source": "surrogate"}}
        return plan()(bundle_dir)

    world = World(tmp_path, job_plan=flaky)
    JobQueue(tmp_path / "jobs.db", max_attempts=2, clock=world.clock).enqueue(
        "h", "calc_chain", tmp_path, family="calc_chain", base_model=MODEL)
    first = world.dispatcher()
    _kill_at(monkeypatch, StrictPod, "submit", "before", nth=2)
    with pytest.raises(Killed):
        drain(first)
    monkeypatch.undo()
    world.clock.sleep(LEASE + 1)
    second = world.dispatcher()
    drain(second)
    (job,) = second.queue.jobs()
    assert job.state == "done", job.result.failure_reason
    settled(world, second, attempts_one=False)


def test_a_bundle_missing_on_this_host_is_not_blamed_on_the_pod(tmp_path):
    world = World(tmp_path)
    queue = JobQueue(tmp_path / "jobs.db", lease_seconds=LEASE, clock=world.clock)
    queue.enqueue("h", "calc_chain", tmp_path / "gone", family="calc_chain", base_model=MODEL)
    backend = world.dispatcher()
    drain(backend)
    (job,) = backend.queue.jobs()
    assert job.state == "failed" and job.result.failure.value != "the pod died mid-job", job.result.failure_reason
    assert world.provider.creates == 1, f"{world.provider.creates} healthy pods terminated for a local error"
