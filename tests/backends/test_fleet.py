"""The simulated GPU provider and pods (trainergym.backends.fleet) on their own: the virtual
clock, stock-outs, boot times, deaths and bills of `SimProvider`; the job phases of `SimPod`;
`surrogate_plan` on a real bundle. The real dispatcher on top of them is in
tests/backends/test_reattach.py and test_registry.py; at scale in bench/fleet.py."""

import random
import statistics

import httpx
import pytest

from tests.fakes.jobs import bundles
from trainergym.backends.fleet import NO_STOCK, Clock, SimConfig, SimPod, SimProvider, lognormal_minutes, surrogate_plan
from trainergym.backends.mock import EVAL_SECONDS, simulate
from trainergym.infra.pool import CapacityError, PodInfo, Rung
from trainergym.job.bundle import JobBundle
from trainergym.job.gpu import gpu
from trainergym.job.result import RunResult

A40 = Rung("NVIDIA A40")  # 2 x $0.44/h
A5000 = Rung("NVIDIA RTX A5000", gpu_count=1)  # $0.27/h


def sim(**config) -> tuple[Clock, SimProvider]:
    clock = Clock()
    return clock, SimProvider(clock, SimConfig(**{"boot_jitter": 0.0, **config}))


def test_the_clock_is_virtual():
    clock = Clock()
    assert clock() == 0.0
    clock.sleep(90)
    clock.sleep(0.5)
    assert clock() == clock.now == 90.5
    assert Clock(1000.0)() == 1000.0


# --- SimProvider -------------------------------------------------------------------------------
def test_a_pod_boots_after_its_boot_time_and_then_has_a_url():
    clock, provider = sim(boot_seconds=120)
    clock.sleep(50)
    pod_id = provider.create("tg-a", A40, {"K": "v"})
    assert pod_id == "sim0000001" and provider.creates == 1
    clock.sleep(119.9)
    assert provider.get(pod_id) == PodInfo(pod_id, "tg-a", "RUNNING", False, pytest.approx(0.88), None, "NVIDIA A40", 2,
                                           created=50.0)
    clock.sleep(0.1)  # 120 s after the create
    assert provider.get(pod_id) == PodInfo(pod_id, "tg-a", "RUNNING", True, pytest.approx(0.88), "sim://sim0000001",
                                           "NVIDIA A40", 2, created=50.0)
    assert provider.list() == [provider.get(pod_id)] and provider.running() == 1


def test_boot_times_scatter_but_never_under_ten_seconds():
    _, provider = sim(boot_seconds=0.0)
    pod_id = provider.create("p", A40, {})
    assert provider.pods[pod_id].boot_at == 10.0  # the floor
    jittery = SimProvider(Clock(), SimConfig(boot_seconds=120, boot_jitter=30, seed=3))
    boots = [jittery.pods[jittery.create(f"p{i}", A40, {})].boot_at for i in range(200)]
    assert min(boots) >= 10.0 and len(set(boots)) == 200
    assert 110 < statistics.fmean(boots) < 130 and 20 < statistics.stdev(boots) < 40


def test_a_pod_that_never_boots_stays_unready_and_billing():
    clock, provider = sim(never_boot_rate=1.0)
    pod_id = provider.create("p", A40, {})
    clock.sleep(10 * 3600)
    info = provider.get(pod_id)
    assert info is not None and not info.ready and info.url is None
    assert provider.billed_usd() == pytest.approx(10 * 0.88)


def test_a_stock_out_raises_capacity_error_and_creates_nothing():
    _, provider = sim(out_of_stock={"NVIDIA A40": 1.0})
    with pytest.raises(CapacityError, match="no longer any instances available") as err:
        provider.create("p", A40, {})
    assert str(err.value) == NO_STOCK and err.value.kind == "capacity"
    assert provider.pods == {} and provider.creates == 1 and provider.billed_usd() == 0.0
    assert provider.create("q", A5000, {}) == "sim0000002"  # other GPU types are in stock; ids keep counting


def test_partial_stock_outs_follow_the_seed():
    def outcomes(seed):
        _, provider = sim(out_of_stock={"NVIDIA A40": 0.5}, seed=seed)
        out = []
        for i in range(40):
            try:
                out.append(provider.create(f"p{i}", A40, {}))
            except CapacityError:
                out.append(None)
        return out

    first = outcomes(1)
    assert first == outcomes(1) and first != outcomes(2)
    assert 8 < first.count(None) < 32


def test_a_dying_pod_disappears_at_its_death_and_bills_until_then():
    clock, provider = sim(boot_seconds=100, die_rate=1.0, die_within=1000)
    pod_id = provider.create("p", A40, {})
    dies_at = provider.pods[pod_id].dies_at
    assert 100 <= dies_at <= 1100  # after its boot, within die_within of it
    clock.sleep(dies_at - 1e-6)
    assert provider.get(pod_id) is not None and provider.running() == 1
    clock.sleep(1e-6)
    assert provider.get(pod_id) is None and provider.list() == [] and provider.running() == 0
    clock.sleep(3600)
    assert provider.billed_usd() == pytest.approx(dies_at / 3600 * 0.88)  # not a second past its death
    provider.terminate(pod_id)  # terminating the dead changes nothing
    assert provider.pods[pod_id].terminated == dies_at
    assert provider.billed_usd() == pytest.approx(dies_at / 3600 * 0.88)


def test_die_rate_is_the_share_of_pods_that_die():
    _, healthy = sim()
    assert all(healthy.pods[healthy.create(f"p{i}", A40, {})].dies_at is None for i in range(50))
    _, some = sim(die_rate=0.3, seed=5)
    dying = sum(some.pods[some.create(f"p{i}", A40, {})].dies_at is not None for i in range(400))
    assert 80 < dying < 160


def test_billed_from_create_to_terminate_at_the_rungs_rate():
    clock, provider = sim()
    clock.sleep(600)
    a = provider.create("a", A40, {})  # 2 GPUs: $0.88/h
    b = provider.create("b", A5000, {})  # 1 GPU: $0.27/h
    assert provider.get(a).cost_per_hr == pytest.approx(0.88) and provider.get(b).cost_per_hr == pytest.approx(0.27)
    clock.sleep(1800)
    provider.terminate(a)
    assert provider.get(a) is None and provider.running() == 1
    clock.sleep(1800)
    provider.terminate(a)  # twice: the first time stands
    assert provider.pods[a].terminated == 2400
    # a: half an hour; b, still running: an hour so far
    assert provider.billed_usd() == pytest.approx(0.5 * 0.88 + 1.0 * 0.27)
    provider.terminate(b)
    clock.sleep(7200)
    assert provider.billed_usd() == pytest.approx(0.5 * 0.88 + 1.0 * 0.27)


def test_unknown_pods_and_gpu_types():
    _, provider = sim()
    assert provider.get("sim9999999") is None
    provider.terminate("sim9999999")  # no error
    pod_id = provider.create("p", Rung("NVIDIA B200"), {})  # no list price: billed at 0
    assert provider.get(pod_id).cost_per_hr == 0.0


# --- SimPod ------------------------------------------------------------------------------------
RESULT = {"status": "succeeded", "pre": 0.5, "post": 0.6, "source": "surrogate", "train_seconds": 100.0}


@pytest.fixture
def pod():
    clock, provider = sim(boot_seconds=10)
    pod_id = provider.create("p", A40, {})
    clock.sleep(10)
    planned = []

    def plan(bundle_dir):
        planned.append(bundle_dir)
        return {"train_seconds": 100.0, "eval_seconds": 50.0, "result": RESULT}

    client = SimPod.factory(provider, plan)(provider.get(pod_id).url, "any token")
    return clock, provider, client, planned


def test_the_factory_connects_to_the_pod_behind_the_url(pod):
    clock, provider, client, _ = pod
    assert client.pod_id == "sim0000001" and client.provider is provider
    assert client.health() == {"ok": True, "busy": False, "job": None, "key": None}


def test_a_job_goes_train_awaiting_eval_post_done(pod, tmp_path):
    clock, provider, client, planned = pod
    job_id = client.submit(tmp_path / "bundle", "calc_chain", "Qwen/Qwen3-1.7B", key="k1")
    assert job_id == "sim0000001-0" and planned == [str(tmp_path / "bundle")]
    assert client.health() == {"ok": True, "busy": True, "job": job_id, "key": "k1"}
    assert client.status(job_id) == {"phase": "train", "done": False}
    clock.sleep(99)
    assert client.status(job_id) == {"phase": "train", "done": False}
    clock.sleep(1)
    assert client.status(job_id) == {"phase": "awaiting-eval", "done": False}
    clock.sleep(500)  # it waits for the eval items however long they take
    assert client.status(job_id)["phase"] == "awaiting-eval"
    client.send_eval(job_id, [{"id": "h1", "prompt": "p", "answer": "1"}])
    assert client.status(job_id) == {"phase": "post", "done": False}
    clock.sleep(49)
    assert client.status(job_id)["phase"] == "post"
    clock.sleep(1)
    assert client.status(job_id) == {"phase": "done", "done": True}
    assert client.health()["busy"] is False
    assert client.result(job_id) == RunResult.model_validate(RESULT)
    assert client.submit(tmp_path / "b2", "calc_chain", "Qwen/Qwen3-1.7B") == "sim0000001-1"
    assert client.health()["job"] == "sim0000001-1" and client.health()["key"] == ""
    client.cancel(job_id)
    client.close()  # both no-ops


def test_jobs_outlive_the_client_and_a_gone_pod_refuses_every_call(pod, tmp_path):
    clock, provider, client, _ = pod
    job_id = client.submit(tmp_path / "bundle", "calc_chain", "Qwen/Qwen3-1.7B", key="k1")
    again = SimPod(provider, client.pod_id)  # a restarted dispatcher's client
    assert again.health()["job"] == job_id and again.status(job_id)["phase"] == "train"
    with pytest.raises(KeyError):
        again.status("sim0000001-7")
    provider.terminate(client.pod_id)
    for call in (lambda: client.health(), lambda: client.status(job_id), lambda: client.result(job_id),
                 lambda: client.send_eval(job_id, []), lambda: client.submit(tmp_path, "f", "m")):
        with pytest.raises(httpx.ConnectError, match="sim0000001 is gone"):
            call()


# --- surrogate_plan on a real bundle ---------------------------------------------------------------
def test_surrogate_plan_is_the_mock_backends_outcome(tmp_path, task, reference_files):
    (bundle,) = bundles(tmp_path, task, reference_files, 1)
    plan = surrogate_plan(str(bundle.root))
    assert set(plan) == {"train_seconds", "eval_seconds", "result"} and plan["eval_seconds"] == EVAL_SECONDS
    result = RunResult.model_validate(plan["result"])
    expected = simulate(JobBundle.open(bundle.root), task, 0, gpu(task.bounds.gpu))
    assert result.model_dump(exclude={"job_id"}) == expected.model_dump(exclude={"job_id"})  # job ids are unique
    assert result.job_id.startswith(f"mock-{bundle.manifest.content_hash[:12]}-")
    assert result.source == "surrogate" and result.status == "succeeded" and result.gpu == "NVIDIA A40"
    assert plan["train_seconds"] == result.train_seconds > 0
    again = surrogate_plan(str(bundle.root))
    assert {**again["result"], "job_id": ""} == {**plan["result"], "job_id": ""}  # deterministic
    posts = {RunResult.model_validate(surrogate_plan(str(bundle.root), seed=s)["result"]).post for s in range(6)}
    assert len(posts) > 1  # the seed draws the noise


def test_a_plan_that_runs_out_of_memory_fails_after_setup(tmp_path, task, reference_files, monkeypatch):
    """On a GPU too small for the job, the plan is the surrogate's out-of-memory failure, which
    takes the setup time before it fails."""
    from trainergym.backends import fleet
    from trainergym.backends.mock import SETUP_SECONDS
    from trainergym.job.gpu import GPU

    (bundle,) = bundles(tmp_path, task, reference_files, 1)
    monkeypatch.setattr(fleet.gpus, "gpu", lambda name: GPU("tiny", 1, 0.1, 0.1))
    plan = surrogate_plan(str(bundle.root))
    result = RunResult.model_validate(plan["result"])
    assert result.status == "failed" and result.failure_reason == "out of memory" and result.post is None
    assert plan["train_seconds"] == result.train_seconds == SETUP_SECONDS


def test_lognormal_minutes_has_the_given_median():
    assert lognormal_minutes(random.Random(0), 18.0, sigma=0.0) == 18.0
    rng = random.Random(1)
    draws = [lognormal_minutes(rng, 18.0) for _ in range(4000)]
    assert 17 < statistics.median(draws) < 19 and max(draws) > 3 * 18  # a long tail
    assert min(draws) > 0
