"""The warm pod pool against a fake Runpod GraphQL API on 127.0.0.1 (virtual clock)."""

import pytest

from tests.fakes.runpod_api import FakeRunpod, World
from trainergym.infra.pool import AuthError, PodPool, PoolConfig, PoolExhausted, Rung
from trainergym.infra.runpod_graphql import RunpodProvider

LADDER = (Rung("NVIDIA RTX A5000"), Rung("NVIDIA A40"), Rung("NVIDIA GeForce RTX 4090"))


@pytest.fixture
def world(monkeypatch, tmp_path):
    w = World()
    fake = FakeRunpod(w)
    monkeypatch.setenv("RUNPOD_API_BASE_URL", fake.url)
    monkeypatch.setenv("HOME", str(tmp_path))
    yield w
    fake.close()


def make_pool(world, tmp_path, key="test-key", **config):
    provider = RunpodProvider(api_key=key, proxy_url="http://{ip}:{public_port}")

    def sleep(seconds):
        world.now += seconds

    cfg = PoolConfig(ladder=LADDER, boot_timeout=600, poll_seconds=10, idle_seconds=300, env={"TRAINERGYM_ROLE": "pod"},
                     **config)
    return PodPool(provider, tmp_path / "pool.db", cfg, clock=lambda: world.now, sleep=sleep)


def creates(world):
    return [c[1]["gpuTypeId"] for c in world.calls if c[0] == "create"]


def test_out_of_stock_walks_the_ladder(world, tmp_path):
    world.stock["NVIDIA RTX A5000"] = 0
    pool = make_pool(world, tmp_path)
    pod = pool.acquire("job-1")
    assert pod.rung.gpu_type == "NVIDIA A40" and pod.url and pod.state == "busy"
    assert creates(world) == ["NVIDIA A40"]  # the catalog showed the first rung out of stock: no failed create
    assert world.now >= world.boot_seconds  # it waited for the runtime


def test_a_stock_out_the_catalog_did_not_show_fails_the_create_and_walks_on(world, tmp_path):
    world.stock["NVIDIA RTX A5000"], world.catalog_blind = 0, True
    pod = make_pool(world, tmp_path).acquire("job-1")
    assert pod.rung.gpu_type == "NVIDIA A40" and creates(world) == ["NVIDIA RTX A5000", "NVIDIA A40"]


def test_boot_timeout_terminates_and_takes_the_next_rung(world, tmp_path):
    world.never_boot = {"NVIDIA RTX A5000"}
    pool = make_pool(world, tmp_path)
    pod = pool.acquire("job-1")
    assert pod.rung.gpu_type == "NVIDIA A40"
    stuck = next(p for p in world.pods.values() if p["gpuType"] == "NVIDIA RTX A5000")
    assert stuck["terminated"] and pool.billed_usd() > 0


def test_cap_reuse_and_reap(world, tmp_path):
    pool = make_pool(world, tmp_path, max_pods=2)
    a, b = pool.acquire("j1"), pool.acquire("j2")
    with pytest.raises(PoolExhausted):
        pool.acquire("j3")
    pool.release(a)
    assert pool.acquire("j3").id == a.id and len(creates(world)) == 2  # warm reuse, no new pod
    pool.release(a)
    pool.release(b)
    world.now += 301
    assert pool.reap() == 2 and world.running() == []
    assert pool.billed_usd() == pytest.approx(world.billed(), rel=1e-6)


def test_everything_fails_with_reasons(world, tmp_path):
    for gpu in world.stock:
        world.stock[gpu] = 0
    with pytest.raises(PoolExhausted, match="A40 \\(ALL\\): out of stock in the catalog"):
        make_pool(world, tmp_path).acquire("j")
    assert creates(world) == []
    world.catalog_blind = True  # only the creates find out
    with pytest.raises(PoolExhausted, match="no longer any instances"):
        make_pool(world, tmp_path).acquire("j")


def test_transient_errors_retry_the_same_rung(world, tmp_path):
    world.http_fail_next = [(502, b"<html>bad gateway</html>"), (500, b'{"message": "oops"}')]
    pod = make_pool(world, tmp_path).acquire("j")
    assert pod.rung.gpu_type == "NVIDIA RTX A5000"


def test_wrong_key_is_fatal(world, tmp_path):
    with pytest.raises(AuthError):
        make_pool(world, tmp_path, key="wrong").acquire("j")


def test_pods_never_receive_the_api_key(world, tmp_path):
    make_pool(world, tmp_path).acquire("j")
    env = " ".join(e for p in world.pods.values() for e in p["env"])
    assert "test-key" not in env and "TRAINERGYM_ENV_B64" in env


def test_reconcile_terminates_orphans_and_forgets_vanished_pods(world, tmp_path):
    world.create_then_error = 1  # the first create bills but answers an error
    pool = make_pool(world, tmp_path)
    pod = pool.acquire("j")  # the opaque error triggered a reconcile; the orphan is gone
    orphans = [p for p in world.pods.values() if p["id"] != pod.id]
    assert orphans and all(p["terminated"] for p in orphans)
    world.die_after[pod.id] = 0  # the host dies
    world.now += 10
    restarted = make_pool(world, tmp_path)  # a new process on the same database
    done = restarted.reconcile()  # a busy pod is the re-attaching dispatcher's to judge (it asks the pod)
    assert done["forgotten"] == [] and [p.id for p in restarted.live] == [pod.id]
    done = restarted.reconcile(restart=False)
    assert pod.id in done["forgotten"] and restarted.live == []


def test_a_crash_between_create_and_record_is_reconciled(world, tmp_path):
    pool = make_pool(world, tmp_path)
    pool.acquire("j")
    # a pod of ours the database never heard of (created by a process that died before recording it)
    world.execute({"query": 'mutation { podFindAndDeployOnDemand(input: {name: "trainergym-0123456789", gpuTypeId: "NVIDIA A40", '
                            'gpuCount: 2, cloudType: ALL}) { id } }'})
    done = make_pool(world, tmp_path).reconcile()
    assert len(done["terminated"]) == 1 and len(world.running()) == 1


def test_terminate_is_verified(world, tmp_path):
    pool = make_pool(world, tmp_path)
    pod = pool.acquire("j")
    pool.release(pod)
    world.terminate_noop = 5
    pool.shutdown(wait=False)  # a DELETE that did not take: the pod stays tracked, never forgotten
    assert len(pool.terminating) == 1 and len(world.running()) == 1
    world.terminate_noop = 0
    pool.shutdown()  # re-checked (by id and name) and the DELETE re-sent until it is confirmed gone
    assert world.running() == [] and pool.terminating == []


def test_bills_reach_the_cost_ledger(world, tmp_path):
    from trainergym.infra.costs import Ledger

    pool = make_pool(world, tmp_path)
    pool.ledger = Ledger(tmp_path / "ledger.db")
    pod = pool.acquire("j1")
    world.now += 3600
    pool.discard(pod, "done")
    assert pool.billed_usd() > 0
    assert pool.ledger.totals(kind="gpu")["usd"] == pytest.approx(pool.billed_usd())
    assert pool.ledger.rows()[0]["source"] == "billed rate"
