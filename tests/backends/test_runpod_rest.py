"""The REST v2 provider alone against the fake REST API (no pod services): auth, Retry-After,
each error class, the catalog, the GPUs actually held, and what `ASSUMPTIONS` takes for granted."""

import base64
import json
import logging

import httpx
import pytest

from tests.fakes.runpod_api import World
from tests.fakes.runpod_rest_api import FakeRunpodRest
from trainergym.infra.pool import AuthError, CapacityError, PodPool, PoolConfig, ProviderError, Rung, TransientError
from trainergym.infra.runpod_graphql import DOCKER_ARGS
from trainergym.infra.runpod_rest import ASSUMPTIONS, InvalidRequest, RunpodRestProvider

A5000, A40 = Rung("NVIDIA RTX A5000"), Rung("NVIDIA A40")


@pytest.fixture
def world():
    return World(boot_seconds=20)


@pytest.fixture
def fake(world):
    fake = FakeRunpodRest(world)
    yield fake
    fake.close()


@pytest.fixture
def sleeps():
    return []


@pytest.fixture
def provider(fake, sleeps):
    provider = RunpodRestProvider(api_key="test-key", base_url=fake.url, bootstrap="echo booted", sleep=sleeps.append)
    yield provider
    provider.close()


def creates(world):
    return [c[1] for c in world.calls if c[0] == "create"]


# --- auth and configuration -------------------------------------------------------------------------
def test_no_key_is_refused_before_any_request(monkeypatch):
    monkeypatch.delenv("RUNPOD_API_KEY", raising=False)
    with pytest.raises(AuthError, match="RUNPOD_API_KEY"):
        RunpodRestProvider(bootstrap="true")


def test_key_and_url_from_the_environment_as_a_bearer_token(monkeypatch, fake, world):
    monkeypatch.setenv("RUNPOD_API_KEY", "test-key")
    monkeypatch.setenv("RUNPOD_REST_URL", fake.url)
    provider = RunpodRestProvider(bootstrap="true")
    assert provider.list() == [] and provider.http.headers["Authorization"] == "Bearer test-key"
    monkeypatch.setenv("RUNPOD_API_KEY", "wrong")
    with pytest.raises(AuthError, match="401 invalid bearer token"):
        RunpodRestProvider(bootstrap="true").list()


def test_no_balance_stops_everything(provider, world):
    world.http_fail_next = [(402, json.dumps({"title": "Payment Required", "status": 402,
                                              "detail": "insufficient balance"}).encode())]
    with pytest.raises(AuthError, match="no balance, nothing can be provisioned: 402 insufficient balance"):
        provider.create("tg-a", A5000, {})


# --- the create body and the pod's life ------------------------------------------------------------
def test_the_create_body_is_what_v2_takes(provider, world):
    pod_id = provider.create("tg-a", A5000, {"TRAINERGYM_POD_TOKEN": "tok"})
    (body,) = creates(world)
    assert body["gpu"] == {"id": "NVIDIA RTX A5000", "count": 2} and body["cloud"] == "SECURE"  # ALL -> SECURE
    assert body["ports"] == ["8000/http", "22/tcp"] and body["args"] == DOCKER_ARGS and body["disk"] == 60
    assert json.loads(base64.b64decode(body["env"]["TRAINERGYM_ENV_B64"])) == {"TRAINERGYM_POD_TOKEN": "tok"}
    assert base64.b64decode(body["env"]["TRAINERGYM_BOOTSTRAP_B64"]).decode() == "echo booted"
    assert "test-key" not in json.dumps(body)  # the pod never sees the API key
    assert provider.get(pod_id).name == "tg-a"
    provider.create("tg-b", Rung("NVIDIA A40", 1, "COMMUNITY"), {})
    assert creates(world)[1]["cloud"] == "COMMUNITY" and creates(world)[1]["gpu"]["count"] == 1


def test_a_pod_goes_provisioning_starting_running_and_is_ready_with_its_proxy_url(provider, world):
    pod_id = provider.create("tg-a", A5000, {})
    seen = []
    for _ in range(3):
        info = provider.get(pod_id)
        seen.append((info.status, info.ready, info.url))
        world.now += 10
    assert seen == [("PROVISIONING", False, None), ("STARTING", False, None),
                    ("RUNNING", True, f"https://{pod_id}-8000.proxy.runpod.net")]
    info = provider.get(pod_id)
    assert (info.cost_per_hr, info.gpu_type, info.gpu_count) == (0.54, "NVIDIA RTX A5000", 2)


def test_a_test_proxy_template_waits_for_the_ports_direct_mapping(fake, world):
    world.on_boot = lambda pod: ("127.0.0.1", 4321)
    provider = RunpodRestProvider(api_key="test-key", base_url=fake.url, bootstrap="true",
                                  proxy_url="http://{ip}:{public_port}")
    pod_id = provider.create("tg-a", A5000, {})
    world.now = 20
    assert provider.get(pod_id).url == "http://127.0.0.1:4321"
    world.on_boot = None
    other = provider.create("tg-b", A5000, {})
    world.now = 40
    info = provider.get(other)  # RUNNING, but http ports carry no ip/public (per ASSUMPTIONS): not ready for {ip}
    assert info.status == "RUNNING" and info.url is None and not info.ready


def test_the_gpus_actually_held_are_reported(provider, world):
    world.substitute = {"NVIDIA RTX A5000": "NVIDIA RTX A6000"}
    info = provider.get(provider.create("tg-a", A5000, {}))
    assert (info.gpu_type, info.gpu_count, info.cost_per_hr) == ("NVIDIA RTX A6000", 2, pytest.approx(1.58))


def test_an_unknown_rate_reads_as_zero_until_running(provider, world):
    world.rate_unknown = True
    pod_id = provider.create("tg-a", A5000, {})
    assert provider.get(pod_id).cost_per_hr == 0.0
    world.now = 20
    assert provider.get(pod_id).cost_per_hr == pytest.approx(0.54)


def test_a_pod_not_listed_yet_is_missing_from_get_and_list(provider, world):
    world.list_lag = 15
    pod_id = provider.create("tg-a", A5000, {})
    assert provider.get(pod_id) is None and provider.list() == []
    world.now = 15
    assert provider.get(pod_id).id == pod_id and [p.id for p in provider.list()] == [pod_id]


# --- termination: 404 or TERMINATED afterwards, both are gone -----------------------------------------
@pytest.mark.parametrize("answer", ["TERMINATED", 404])
def test_a_terminated_pod_is_gone_whichever_way_get_answers(world, sleeps, answer):
    assert ASSUMPTIONS["terminated_pod"].value == "TERMINATED"  # what the fake does unless told otherwise
    fake = FakeRunpodRest(world, terminated=answer)
    provider = RunpodRestProvider(api_key="test-key", base_url=fake.url, bootstrap="true", sleep=sleeps.append)
    try:
        pod_id = provider.create("tg-a", A5000, {})
        keep = provider.create("tg-b", A5000, {})
        provider.terminate(pod_id)
        assert provider.get(pod_id) is None and [p.id for p in provider.list()] == [keep]
        provider.terminate(pod_id)  # again: fine
        provider.terminate("no-such-pod")  # never was: fine
        assert world.pods[pod_id]["terminated"] and not world.pods[keep]["terminated"]
        if answer == "TERMINATED":
            raw = provider.http.get(f"/v2/pods/{pod_id}").json()
            assert raw["status"] == "TERMINATED" and raw["cost"] == 0.0
    finally:
        provider.close()
        fake.close()


def test_a_delete_conflict_is_transient(provider, world):
    pod_id = provider.create("tg-a", A5000, {})
    world.http_fail_next = [(409, b'{"title": "Conflict", "status": 409, "detail": "pod is changing state"}')]
    with pytest.raises(TransientError, match="409 pod is changing state"):
        provider.terminate(pod_id)


# --- rate limits ----------------------------------------------------------------------------------------
def test_429_waits_retry_after_then_succeeds(provider, world, sleeps):
    world.throttle_next, world.retry_after = 2, 7
    assert provider.list() == []
    assert sleeps == [7.0, 7.0]


def test_429_beyond_the_retries_is_transient(provider, world, sleeps):
    world.throttle_next, world.retry_after = 10, 1
    with pytest.raises(TransientError, match="rate limited: 429 rate limit exceeded for the minute window"):
        provider.list()
    assert sleeps == [1.0, 1.0, 1.0] and world.throttle_next == 6  # 4 tries, 3 waits


def test_429_asking_for_longer_than_a_call_waits_is_transient_at_once(provider, world, sleeps):
    world.throttle_next, world.retry_after = 1, 3600  # the hour's window
    with pytest.raises(TransientError, match="rate limited"):
        provider.list()
    assert sleeps == []


def test_429_without_retry_after_backs_off(provider, world, sleeps):
    world.http_fail_next = [(429, b"<html>Too Many Requests</html>")]
    assert provider.list() == [] and sleeps == [1.0]


# --- error classes ------------------------------------------------------------------------------------
def test_a_stock_out_is_capacity_and_quotes_the_request_id(provider, world):
    world.stock["NVIDIA RTX A5000"] = 0
    with pytest.raises(CapacityError, match=r"400 There are no longer any instances available.*\[request [0-9a-f]{32}\]"):
        provider.create("tg-a", A5000, {})


def test_a_contract_violation_is_invalid(provider):
    with pytest.raises(InvalidRequest, match="additional properties 'dataCenterId' not allowed") as e:
        provider._request("POST", "/v2/pods", json={"name": "x", "image": "i", "gpu": {"id": "NVIDIA A40"},
                                                    "dataCenterId": "EU-RO-1"})
    assert e.value.kind == "invalid"
    with pytest.raises(InvalidRequest, match="400 exactly one of gpu or cpu"):  # ASSUMPTIONS: neither_gpu_nor_cpu
        provider._request("POST", "/v2/pods", json={"name": "x", "image": "i"})


@pytest.mark.parametrize("status, detail", [(403, "no access to this pool"), (400, "allowedCudaVersions and minCudaVersion")])
def test_forbidden_and_rule_violations_are_invalid(provider, world, status, detail):
    world.http_fail_next = [(status, json.dumps({"title": "x", "status": status, "detail": detail}).encode())]
    with pytest.raises(InvalidRequest, match=f"{status} {detail}"):
        provider.create("tg-a", A5000, {})


@pytest.mark.parametrize("status, body", [(500, b'{"title": "Internal", "status": 500, "detail": "boom"}'), (502, b""),
                                          (503, b"<html>unavailable</html>")])
def test_server_errors_on_reads_are_transient(provider, world, status, body):
    world.http_fail_next = [(status, body)]
    with pytest.raises(TransientError, match=str(status)):
        provider.list()


def test_timeouts_and_refused_connections_are_transient(fake):
    def hang(request):
        raise httpx.ReadTimeout("timed out", request=request)

    timing_out = RunpodRestProvider(api_key="k", base_url=fake.url, bootstrap="true", transport=httpx.MockTransport(hang))
    with pytest.raises(TransientError, match="ReadTimeout"):
        timing_out.get("abc")
    refused = RunpodRestProvider(api_key="k", base_url="http://127.0.0.1:9", bootstrap="true")
    with pytest.raises(TransientError, match="ConnectError"):
        refused.list()


def test_a_create_cut_off_returns_the_pod_it_made(provider, world):
    world.create_then_error = 1  # made, then answered 500
    pod_id = provider.create("tg-a", A5000, {})
    assert pod_id in world.pods and world.pods[pod_id]["name"] == "tg-a"


def test_a_create_cut_off_with_no_pod_to_show_is_unknown(provider, world):
    world.opaque_next = 1  # 500, nothing made
    with pytest.raises(ProviderError, match="may exist") as e:
        provider.create("tg-a", A5000, {})
    assert e.value.kind == "unknown"
    world.create_then_error, world.list_lag = 1, 30  # made, but not listed yet: the pool settles it by name later
    with pytest.raises(ProviderError, match="may exist") as e:
        provider.create("tg-b", A5000, {})
    assert e.value.kind == "unknown" and len(world.pods) == 1


# --- the catalog --------------------------------------------------------------------------------------
def test_the_catalog_says_whether_a_rung_is_in_stock(provider, world):
    world.stock["NVIDIA RTX A5000"] = 3
    assert provider.available(Rung("NVIDIA RTX A5000", 2)) is True
    assert provider.available(Rung("NVIDIA RTX A5000", 4)) is False  # not 4 of them
    world.stock["NVIDIA RTX A5000"] = 0
    assert provider.available(A5000) is False
    assert provider.available(Rung("NVIDIA B999")) is None  # unknown to the catalog: the create says why
    query = next(c[1] for c in world.calls if c[0] == "catalog")
    assert query == {"id": "NVIDIA RTX A5000", "include": "AVAILABILITY", "product": "POD", "count": "2", "cloud": "SECURE"}


def test_the_pool_skips_an_out_of_stock_rung_without_a_create(provider, world, tmp_path):
    world.stock["NVIDIA RTX A5000"] = 0
    pool = PodPool(provider, tmp_path / "pool.db", PoolConfig(ladder=(A5000, A40)), clock=lambda: world.now)
    pod = pool._create("j", 0, [])
    assert pod.rung == A40 and [c["gpu"]["id"] for c in creates(world)] == ["NVIDIA A40"]


def test_the_pool_skips_a_rung_the_provider_refuses_and_never_retries_it(provider, world, tmp_path):
    pool = PodPool(provider, tmp_path / "pool.db", PoolConfig(ladder=(Rung("NVIDIA B999"), A40)), clock=lambda: world.now)
    pod = pool._create("j", 0, [])
    assert pod.rung == A40 and [c["gpu"]["id"] for c in creates(world)] == ["NVIDIA B999", "NVIDIA A40"]
    assert [p.name for p in pool.live] == [pod.name]  # the refused create left nothing to settle


# --- the unconfirmed assumptions ------------------------------------------------------------------------
def test_every_assumption_says_why_and_the_fake_follows_them(provider, world):
    assert all(a.why for a in ASSUMPTIONS.values())
    pod_id = provider.create("tg-a", A5000, {})
    world.now = 10
    raw = provider.http.get(f"/v2/pods/{pod_id}")
    assert raw.json()["status"] == "STARTING" and raw.json()["runtime"] is None  # pulling_status
    assert raw.headers[ASSUMPTIONS["request_id"].value]
    world.now = 20
    ports = provider.http.get(f"/v2/pods/{pod_id}").json()["runtime"]["ports"]
    assert ASSUMPTIONS["http_port_runtime"].value in ports


def test_a_paginated_pod_list_is_warned_about(caplog):
    def answer(request):
        return httpx.Response(200, json={"pods": [], "nextCursor": "abc"})

    provider = RunpodRestProvider(api_key="k", bootstrap="true", transport=httpx.MockTransport(answer))
    with caplog.at_level(logging.WARNING, logger="trainergym.infra.runpod_rest"):
        assert provider.list() == [] and provider.list() == []
    assert len([r for r in caplog.records if "nextCursor" in r.getMessage()]) == 1  # once
