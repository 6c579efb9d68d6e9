"""`baselines measure --backend runpod` offline: the measurement goes to a pod of the fake Runpod
(REST v2 and GraphQL) whose real pod service runs the runner in mode pre (`X-Mode`) with the fake
scorer; the hidden eval is sent when the pod awaits it; the pool is its own (pods `tgbaseline-*`)
and ends with nothing running, billed."""

import json
import tomllib

import httpx
import pytest

from tests.backends.conftest import APIS
from trainergym.backends.measure import POD_PREFIX, measure
from trainergym.host.pod_service import pack
from trainergym.paths import data_dir
from trainergym.task import baselines
from trainergym.task.baselines import wilson_interval

MODELS = ["Qwen/Qwen3-0.6B", "Qwen/Qwen3-1.7B"]  # the family's base models, in its task's order


@pytest.mark.parametrize("fleet_api", APIS, indirect=True)
def test_measure_on_a_pod(fleet, tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINERGYM_DATA_DIR", str(tmp_path / "data"))  # not the session's: best_pre moves
    world, backend = fleet
    backend.pool.config.prefix = POD_PREFIX  # as `pod_backend()` builds it
    lines = []
    written, failed = measure("calc_chain", None, "runpod", pods=backend, report=lines.append)
    assert failed == {} and [b.model for b in written] == MODELS, lines
    rows = tomllib.loads((data_dir() / "baselines.toml").read_text())["baseline"]
    for row in rows:
        assert (row["source"], row["backend"], row["score"], row["n"]) == ("measured", "runpod", 0.5, 200)
        assert tuple(row["ci95"]) == wilson_interval(0.5, 200) and row["stack"] and row["date"]
        assert "NVIDIA" in row["note"]  # the GPUs the pod held
    assert baselines.best_pre("calc_chain").backend == "runpod"
    # One warm pod served both models, named apart from a worker's pods; none is left billing.
    created = [c for c in world.calls if c[0] == "create"]
    assert len(created) == 1 and all(p["name"].startswith(POD_PREFIX + "-") for p in world.pods.values())
    assert world.running() == [] and backend.pool.live == []
    assert backend.pool.billed_usd() == pytest.approx(world.billed(), rel=0.01)
    # The pod ran baseline-only jobs: nothing trained, the base model scored once each.
    assert (tmp_path / "s.log").read_text().splitlines() == MODELS
    assert not list((tmp_path / "pods").rglob("outputs"))
    results = [json.loads(p.read_text()) for p in (tmp_path / "pods").rglob("run/result.json")]
    assert sorted(r["details"]["mode"] for r in results) == ["pre", "pre"]


def test_the_pod_service_refuses_an_unknown_mode(fleet, tmp_path):
    world, backend = fleet
    backend.pool.config.prefix = POD_PREFIX
    pool = backend.pool
    pod = None
    while pod is None:
        pod = pool.request("probe-mode")
        if pod is None:
            backend.sleep(1)
            pool.tick()
    try:
        answer = httpx.post(f"{pod.url}/jobs", content=pack(None), headers={
            "Authorization": f"Bearer {pod.token}", "X-Family": "calc_chain", "X-Base-Model": MODELS[0], "X-Mode": "post"})
        assert answer.status_code == 400 and "X-Mode" in answer.json()["error"]
    finally:
        pool.shutdown()
