"""One registry builds every backend from one set of options, or says in one line why not."""

import asyncio

import pytest

from trainergym.backends import BACKENDS, BackendOptions, BackendUnavailable, make_backend, shared_backend
from trainergym.backends.fleet import SimProvider
from trainergym.backends.local import LocalBackend
from trainergym.backends.mock import MockBackend
from trainergym.backends.runpod import PodBackend


@pytest.fixture
def options(tmp_path):
    return BackendOptions(workdir=tmp_path / "work", queue=tmp_path / "jobs.db", max_jobs=3, seed=7)


def test_every_listed_backend_is_built_or_refused(options, monkeypatch):
    monkeypatch.setattr("trainergym.host.deployment.detect_gpus", lambda environ=None: ("NVIDIA A40", 2))
    monkeypatch.setenv("RUNPOD_API_KEY", "rpa_test")
    built = {}
    for name in BACKENDS:
        try:
            built[name] = make_backend(name, options)
        except BackendUnavailable as e:  # mini without its extra (a bare clone): refused, naming it
            assert name == "mini" and "uv sync --extra mini" in str(e) and "\n" not in str(e), (name, e)
    assert isinstance(built["mock"], MockBackend) and built["mock"].seed == 7
    local = built["local"]
    assert isinstance(local, LocalBackend) and (local.gpu, local.gpu_count, local.concurrency) == ("NVIDIA A40", 2, 3)
    assert local.queue.path == str(options.queue)
    assert isinstance(built["runpod"], PodBackend) and built["runpod"].pool.config.max_pods == 3
    fleet = built["fleet"]
    assert isinstance(fleet.pool.provider, SimProvider) and fleet.queue.path == str(options.queue)
    for backend in built.values():  # each one answers the contract's calls
        assert all(callable(getattr(backend, m)) for m in ("submit", "result", "cancel")) and backend.name


def test_refusals_say_why_in_one_line(options, monkeypatch):
    monkeypatch.setattr("trainergym.host.deployment.detect_gpus", lambda environ=None: ("none", 0))
    monkeypatch.delenv("RUNPOD_API_KEY", raising=False)
    with pytest.raises(BackendUnavailable, match="nvidia-smi finds none") as no_gpu:
        make_backend("local", options)
    with pytest.raises(BackendUnavailable, match="RUNPOD_API_KEY") as no_key:
        make_backend("runpod", options)
    with pytest.raises(ValueError, match="available: mock, local, runpod, fleet"):
        make_backend("nope")
    with pytest.raises(ValueError, match="ladder"):
        bad = options.model_copy(update={"ladder": options.workdir / "missing.toml"})
        monkeypatch.setenv("RUNPOD_API_KEY", "rpa_test")
        make_backend("runpod", bad)
    assert "\n" not in str(no_gpu.value) and "\n" not in str(no_key.value)


def test_options_from_keywords_and_shared_instances(options):
    assert make_backend("mock", latency=0.5).latency == 0.5
    with pytest.raises(ValueError):
        make_backend("mock", colour="blue")  # an unknown option is an error, not ignored
    fleet = shared_backend("fleet", options)
    assert shared_backend("fleet", options) is fleet and shared_backend("mock") is not shared_backend("mock")


def test_a_fleet_job_runs_through_the_real_dispatcher(options, task, reference_files, tmp_path):
    from tests.fakes.jobs import bundles

    backend = make_backend("fleet", options)
    (bundle,) = bundles(tmp_path, task, reference_files, 1)
    handle = asyncio.run(backend.submit(bundle, task))
    backend.drain(once=True)
    result = asyncio.run(backend.result(handle, timeout=5))
    assert result.status == "succeeded" and result.source == "surrogate" and result.job_id == handle.job_id
    assert backend.queue.get(handle.job_id).base_model == bundle.manifest.base_model
