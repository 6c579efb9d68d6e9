"""The real pool, queue and dispatcher against a simulated provider on a virtual clock.

    uv run python bench/fleet.py                        # both scenarios
    uv run python bench/fleet.py --small                # (a) only
    uv run python bench/fleet.py --small --provider rest  # (a) through RunpodRestProvider and the fake REST v2 API

(a) 16 pods, 1,750 jobs with durations like the original's (~18 GPU-minutes median, long tail),
    boot ~2 min, 5% of pods dying mid-job, the top rung out of stock half the time: utilization
    (job seconds / billed seconds), makespan, cost per job, jobs lost, jobs completed twice.
(b) 1,000 pods, 100,000 jobs: wall time of the simulation and scheduler overhead per job.
Targets (issue 5): utilization >= 95% with a saturated queue, 0 lost, 0 completed twice,
overhead <= 5 ms per job. Every figure is from the simulation (virtual time), not from GPUs.

`--provider rest` runs (a) through the real `RunpodRestProvider` over HTTP against the fake REST
v2 API on 127.0.0.1 (tests/fakes/runpod_rest_api.py, run from the repository root), its world on
the same virtual clock; the pods' job services are simulated as with the simulated provider
(`SimPod`, its liveness read from the fake's world). Its overhead includes every HTTP call.
"""

from __future__ import annotations

import argparse
import atexit
import collections
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from trainergym.backends.runpod import PodBackend
from trainergym.backends.fleet import Clock, SimConfig, SimPod, SimProvider, lognormal_minutes
from trainergym.infra.pool import DEFAULT_LADDER, PodPool, PoolConfig
from trainergym.infra.queue import JobQueue

MODEL = "Qwen/Qwen3-1.7B"


def run(pods: int, jobs: int, die_rate: float, oos: float, seed: int = 0, poll: float = 30.0) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="tg-fleet-"))
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)
    bundle = tmp / "bundle"
    bundle.mkdir()
    clock = Clock()
    rng = random.Random(seed)

    def plan(bundle_dir: str) -> dict:  # durations like the original's: ~18 GPU-minutes median on 2 GPUs
        seconds = lognormal_minutes(rng, 18.0) * 60 / 2
        return {"train_seconds": seconds, "eval_seconds": 120.0,
                "result": {"status": "succeeded", "pre": 0.7, "post": 0.8, "source": "surrogate", "train_seconds": seconds}}

    provider = SimProvider(clock, SimConfig(seed=seed, die_rate=die_rate, die_within=3 * 3600,
                                            out_of_stock={DEFAULT_LADDER[0].gpu_type: oos}))
    pool = PodPool(provider, tmp / "pods.db", PoolConfig(max_pods=pods, idle_seconds=600, poll_seconds=poll),
                   clock=clock, sleep=clock.sleep)
    queue = JobQueue(tmp / "jobs.db", clock=clock, lease_seconds=1800)
    backend = PodBackend(tmp, pool, queue=queue, poll_seconds=poll, sleep=clock.sleep, client_factory=SimPod.factory(provider, plan))
    for i in range(jobs):
        queue.enqueue(f"hash-{i}", "calc_chain", bundle, family="calc_chain", base_model=MODEL)
    started = time.perf_counter()
    backend.drain(once=True)
    wall = time.perf_counter() - started
    done = queue.jobs("done")
    job_seconds = sum(j.result.train_seconds + 120.0 for j in done)
    billed_seconds = sum(((p.terminated if p.terminated is not None else clock()) - p.created) for p in provider.pods.values())
    return {
        "pods": pods, "jobs": jobs, "done": len(done), "failed": len(queue.jobs("failed")),
        "lost": jobs - len(done) - len(queue.jobs("failed")),
        "completed_twice": len(done) - len({j.content_hash for j in done}),
        "requeued_attempts": sum(j.attempts - 1 for j in done),
        "utilization": job_seconds / billed_seconds if billed_seconds else 0.0,
        "makespan_h": clock() / 3600, "cost_per_job_usd": provider.billed_usd() / max(1, len(done)),
        "pods_created": provider.creates, "pods_left": provider.running(),
        "pods_died": sum(1 for p in provider.pods.values() if p.dies_at is not None and p.dies_at <= (p.terminated or clock())),
        "wall_s": wall, "overhead_ms_per_job": wall / jobs * 1e3,
    }


class _WorldPods:
    """What `SimPod` needs of a provider, read from the fake REST API's world: the virtual clock,
    whether a pod's service answers, and the jobs of each pod's (simulated) service."""

    def __init__(self, world):
        self.world, self.services = world, {}

    def clock(self) -> float:
        return self.world.now

    def serving(self, pod_id: str) -> bool:
        with self.world.lock:
            pod = self.world.pods.get(pod_id)
            return pod is not None and self.world.observe(pod) is not None and self.world.booted(pod)


def run_rest(pods: int, jobs: int, die_rate: float, oos: float, seed: int = 0, poll: float = 30.0) -> dict:
    """Scenario (a) through `RunpodRestProvider` and the fake REST v2 API (same stock outs, boots,
    deaths and job durations as `run`, drawn from the same kinds of distributions)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.fakes, from the repository root
    from tests.fakes.runpod_api import NO_STOCK, Refused, World
    from tests.fakes.runpod_rest_api import FakeRunpodRest
    from trainergym.infra.runpod_rest import RunpodRestProvider

    tmp = Path(tempfile.mkdtemp(prefix="tg-fleet-rest-"))
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)
    bundle = tmp / "bundle"
    bundle.mkdir()
    rng, chance = random.Random(seed), random.Random(seed + 1)
    world = World(boot_seconds=120.0, boot_jitter=30.0, rng=random.Random(seed + 2),
                  stock={g: 10_000 for g in World().stock})
    create_pod = world.create_pod

    def create_with_faults(name, gpu, count, cloud, env, **spec):  # the sim's stock outs and deaths, on the world
        if gpu == DEFAULT_LADDER[0].gpu_type and chance.random() < oos:
            raise Refused("capacity", NO_STOCK)
        pod = create_pod(name, gpu, count, cloud, env, **spec)
        if chance.random() < die_rate:
            world.die_after[pod["id"]] = chance.uniform(0, 3 * 3600)
        return pod

    world.create_pod = create_with_faults

    def sleep(seconds: float) -> None:
        world.now += seconds

    def clock() -> float:
        return world.now

    def plan(bundle_dir: str) -> dict:
        seconds = lognormal_minutes(rng, 18.0) * 60 / 2
        return {"train_seconds": seconds, "eval_seconds": 120.0,
                "result": {"status": "succeeded", "pre": 0.7, "post": 0.8, "source": "surrogate", "train_seconds": seconds}}

    fake = FakeRunpodRest(world)
    provider = RunpodRestProvider(api_key="test-key", base_url=fake.url, proxy_url="sim://{pod_id}", bootstrap="true",
                                  sleep=sleep)
    in_http = [0.0]  # wall seconds spent in the provider's HTTP calls (client, loopback and the fake's server)
    request = provider.http.request

    def timed(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return request(*args, **kwargs)
        finally:
            in_http[0] += time.perf_counter() - t0

    provider.http.request = timed
    services = _WorldPods(world)
    pool = PodPool(provider, tmp / "pods.db", PoolConfig(max_pods=pods, idle_seconds=600, poll_seconds=poll),
                   clock=clock, sleep=sleep)
    queue = JobQueue(tmp / "jobs.db", lease_seconds=1800)
    backend = PodBackend(tmp, pool, queue=queue, poll_seconds=poll, sleep=sleep, client_factory=SimPod.factory(services, plan))
    for i in range(jobs):
        queue.enqueue(f"hash-{i}", "calc_chain", bundle, family="calc_chain", base_model=MODEL)
    started = time.perf_counter()
    try:
        backend.drain(once=True)
        wall = time.perf_counter() - started
    finally:
        provider.close()
        fake.close()
    done = queue.jobs("done")
    job_seconds = sum(j.result.train_seconds + 120.0 for j in done)
    ends = {pid: (p["ended"] if p["ended"] is not None else world.now) for pid, p in world.pods.items()}
    billed_seconds = sum(ends[pid] - p["created"] for pid, p in world.pods.items())
    calls = collections.Counter(op for op, _ in world.calls)
    return {
        "pods": pods, "jobs": jobs, "done": len(done), "failed": len(queue.jobs("failed")),
        "lost": jobs - len(done) - len(queue.jobs("failed")),
        "completed_twice": len(done) - len({j.content_hash for j in done}),
        "requeued_attempts": sum(j.attempts - 1 for j in done),
        "utilization": job_seconds / billed_seconds if billed_seconds else 0.0,
        "makespan_h": world.now / 3600, "cost_per_job_usd": world.billed() / max(1, len(done)),
        "pods_created": len(world.pods), "pods_left": len(world.running()),
        "pods_died": sum(1 for pid, after in world.die_after.items()
                         if world.pods[pid]["created"] + world.boot_time(world.pods[pid]) + after <= ends[pid]),
        "wall_s": wall, "overhead_ms_per_job": wall / jobs * 1e3,
        "http_calls": sum(calls.values()), "calls": dict(calls), "http_s": in_http[0],
        "pool_billed_usd": pool.billed_usd(), "provider_billed_usd": world.billed(),
    }


def show(name: str, r: dict) -> None:
    print(f"{name}: {r['pods']} pods, {r['jobs']} jobs (simulated, virtual time)")
    print(f"  done {r['done']}, failed {r['failed']}, lost {r['lost']}, completed twice {r['completed_twice']}, "
          f"re-run attempts {r['requeued_attempts']}, pods left running {r['pods_left']}")
    print(f"  utilization (job seconds / billed pod seconds) {r['utilization']:.1%}, makespan {r['makespan_h']:.1f} h, "
          f"cost per job ${r['cost_per_job_usd']:.3f}, pod creates {r['pods_created']}, pods died {r['pods_died']}")
    print(f"  wall {r['wall_s']:.1f} s, scheduler overhead {r['overhead_ms_per_job']:.2f} ms per job")
    if "http_calls" in r:
        calls = ", ".join(f"{op} {n}" for op, n in sorted(r["calls"].items()))
        print(f"  HTTP calls to the REST v2 fake {r['http_calls']} ({calls}): {r['http_s']:.2f} s of the wall "
              f"({r['http_s'] / max(1, r['http_calls']) * 1e3:.2f} ms per call); "
              f"pool billed ${r['pool_billed_usd']:.2f}, provider billed ${r['provider_billed_usd']:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--small", action="store_true", help="scenario (a) only")
    parser.add_argument("--provider", choices=("sim", "rest"), default="sim",
                        help="(a) through the simulated provider, or RunpodRestProvider against the fake REST v2 API")
    args = parser.parse_args()
    if args.provider == "rest":
        show("(a) REST v2", run_rest(16, 1750, die_rate=0.05, oos=0.5, seed=5))
    else:
        show("(a)", run(16, 1750, die_rate=0.05, oos=0.5, seed=5))
    if not args.small:
        show("(b)", run(1000, 100_000, die_rate=0.0, oos=0.0, poll=60.0))
    print("targets: utilization >= 95% with a saturated queue, 0 lost, 0 completed twice, overhead <= 5 ms per job")


if __name__ == "__main__":
    main()
