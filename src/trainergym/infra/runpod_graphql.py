"""`PodProvider` over the `runpod` SDK (GraphQL), with its failures classified.

The SDK reads the API key from `runpod.api_key` (we set it from `RUNPOD_API_KEY`) and the base
URL from `RUNPOD_API_BASE_URL` on every call, which is how tests point it at a fake on
127.0.0.1. It interpolates strings into queries without escaping, so everything we send is
validated to a safe alphabet and the pod's environment travels base64-encoded. The pod never
receives the API key. A pod reports the GPUs it holds by display name (`machine.gpuDisplayName`,
e.g. "RTX A5000"), mapped back to the type id through the GPU type list.
"""

from __future__ import annotations

import base64
import json
import os
import re

from trainergym.infra.pool import AuthError, CapacityError, PodInfo, ProviderError, Rung, TransientError

# Runpod's HTTP proxy; tests inject a template that reaches a local fake pod.
PROXY_URL = "https://{pod_id}-{port}.proxy.runpod.net"
SERVICE_PORT = 8000
IMAGE = "runpod/pytorch:2.4.0-py3.11-cuda12.4.1-devel-ubuntu22.04"
# The pod's start command decodes and runs the bootstrap, which travels base64-encoded in an
# env var: the SDK interpolates docker_args into its query unescaped (no '"' or '\\' here).
DOCKER_ARGS = "bash -c 'echo $TRAINERGYM_BOOTSTRAP_B64 | base64 -d > /tmp/trainergym-boot.sh && exec bash /tmp/trainergym-boot.sh'"
POD_BOOTSTRAP = """set -euo pipefail
command -v uv >/dev/null || python3 -m pip install --quiet uv
uv venv --quiet --python 3.11 /opt/trainergym
uv pip install --quiet --python /opt/trainergym/bin/python {install}
exec /opt/trainergym/bin/trainergym pod-serve --port {port}
"""
_SAFE = re.compile(r"^[A-Za-z0-9 ._:/=+-]*$")
_CAPACITY = ("no longer any instances", "does not have the resources", "not enough free gpus")


def _sdk():
    try:
        import runpod
    except ImportError as e:  # the optional extra
        raise ProviderError("the runpod backend needs `pip install trainergym[runpod]`") from e
    return runpod


def classify(exc: Exception) -> ProviderError:
    """Map what the SDK raises onto the pool's error kinds: its `AuthenticationError` is an
    `AuthError`; a `QueryError` saying the GPUs are gone a `CapacityError`, any other an unknown
    `ProviderError` (the pod may exist); everything else (error pages that are not JSON, timeouts,
    refused connections) a `TransientError`."""
    runpod = _sdk()
    text = str(getattr(exc, "message", exc)).lower()
    if isinstance(exc, runpod.error.AuthenticationError):
        return AuthError(str(exc))
    if isinstance(exc, runpod.error.QueryError):
        if any(marker in text for marker in _CAPACITY):
            return CapacityError(str(exc))
        return ProviderError(str(exc))  # unknown (e.g. "Something went wrong"): the pod may exist
    # JSONDecodeError (429/502 pages), KeyError('data') (500), timeouts, refused connections
    return TransientError(f"{type(exc).__name__}: {exc}")


class RunpodProvider:
    """`PodProvider` over the `runpod` SDK: pods of `image` that run `bootstrap`, their service
    reached through `proxy_url`. Raises AuthError without an API key (`api_key` or
    `RUNPOD_API_KEY`), ProviderError without the SDK."""

    def __init__(self, api_key: str | None = None, image: str = IMAGE, proxy_url: str = PROXY_URL,
                 port: int = SERVICE_PORT, bootstrap: str | None = None, volume_gb: int = 0, container_disk_gb: int = 60):
        """`bootstrap`: the script a pod runs at boot (default: install trainergym and the
        families per `trainergym.job.stack.pod_install()`, then serve jobs)."""
        self.runpod = _sdk()
        key = api_key or os.environ.get("RUNPOD_API_KEY")
        if not key:
            raise AuthError("set RUNPOD_API_KEY to use the runpod backend")
        self.runpod.api_key = key
        if bootstrap is None:
            from trainergym.job.stack import pod_install

            bootstrap = POD_BOOTSTRAP.format(install=pod_install(), port=port)
        self.image, self.proxy_url, self.port, self.bootstrap = image, proxy_url, port, bootstrap
        self.volume_gb, self.container_disk_gb = volume_gb, container_disk_gb
        self._gpu_ids: dict[str, str] = {}  # display name -> GPU type id, read once from the GPU type list

    def _call(self, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - every failure is classified for the pool
            raise classify(e) from e

    def create(self, name: str, rung: Rung, env: dict[str, str]) -> str:
        """Create a pod on `rung` (its `env` travels base64-encoded); returns its id. Refuses names
        and GPU types outside a safe alphabet."""
        if not _SAFE.match(name) or not _SAFE.match(rung.gpu_type):
            raise ProviderError(f"unsafe characters in {name!r} / {rung.gpu_type!r}")
        payload = base64.b64encode(json.dumps(env).encode()).decode()
        pod = self._call(self.runpod.create_pod, name=name, image_name=self.image, gpu_type_id=rung.gpu_type,
                         cloud_type=rung.cloud, gpu_count=rung.gpu_count, volume_in_gb=self.volume_gb,
                         container_disk_in_gb=self.container_disk_gb, ports=f"{self.port}/http,22/tcp", docker_args=DOCKER_ARGS,
                         env={"TRAINERGYM_ENV_B64": payload, "TRAINERGYM_BOOTSTRAP_B64":
                              base64.b64encode(self.bootstrap.encode()).decode()})
        if not pod or "id" not in pod:
            raise ProviderError(f"create returned no pod id: {pod!r}")
        return pod["id"]

    def _info(self, pod: dict) -> PodInfo:
        """`url` from the proxy template; a template naming {ip} and {public_port} uses the
        pod's direct port mapping instead (what the tests' fake pods answer on)."""
        runtime = pod.get("runtime") or None
        url = None
        if runtime:
            mapped = next((p for p in runtime.get("ports") or [] if p.get("privatePort") == self.port), {})
            if "{public_port}" not in self.proxy_url or mapped:
                url = self.proxy_url.format(pod_id=pod["id"], port=self.port, ip=mapped.get("ip", ""),
                                            public_port=mapped.get("publicPort", ""))
        held = (pod.get("machine") or {}).get("gpuDisplayName")
        return PodInfo(id=pod["id"], name=pod.get("name", ""), status=pod.get("desiredStatus", ""),
                       ready=bool(url) and pod.get("desiredStatus") == "RUNNING",
                       cost_per_hr=float(pod.get("costPerHr") or 0.0), url=url,
                       gpu_type=self._gpu_id(held) if held else None, gpu_count=pod.get("gpuCount") or None)

    def _gpu_id(self, display: str) -> str | None:
        """The GPU type id of a display name; None (not said) when the type list cannot be read now."""
        if display not in self._gpu_ids:
            try:
                self._gpu_ids = {g["displayName"]: g["id"] for g in self._call(self.runpod.get_gpus) or []}
            except TransientError:
                return None
        return self._gpu_ids.get(display, display)

    def available(self, rung: Rung) -> bool | None:
        """Whether the catalog's lowest price for `rung` shows stock (`stockStatus` High, Medium or
        Low): False when it shows none and no price; None when it cannot tell or the query fails
        (the create then decides)."""
        if not _SAFE.match(rung.gpu_type):
            return None
        cloud = "" if rung.cloud == "ALL" else f", secureCloud: {str(rung.cloud == 'SECURE').lower()}"
        query = (f'query {{ gpuTypes(input: {{id: "{rung.gpu_type}"}}) {{ id lowestPrice(input: {{gpuCount: '
                 f'{int(rung.gpu_count)}{cloud}}}) {{ stockStatus uninterruptablePrice }} }} }}')
        from runpod.api.graphql import run_graphql_query

        try:
            types = self._call(run_graphql_query, query)["data"]["gpuTypes"] or []
        except (KeyError, TypeError):
            return None
        except ProviderError as e:
            if e.kind in ("auth", "transient"):
                raise
            return None  # an error answer (e.g. an unknown type): the create says why
        lowest = (types[0].get("lowestPrice") or {}) if types else {}
        status = lowest.get("stockStatus")
        if status in ("High", "Medium", "Low"):
            return True
        if status in (None, "None") and lowest.get("uninterruptablePrice") is None and types:
            return False
        return None

    def get(self, pod_id: str) -> PodInfo | None:
        """The pod (ready once it runs and has a service URL), or None when the provider no longer
        has it."""
        pod = self._call(self.runpod.get_pod, pod_id)
        return None if not pod else self._info(pod)

    def list(self) -> list[PodInfo]:
        """Every pod of the account."""
        return [self._info(p) for p in self._call(self.runpod.get_pods) or []]

    def terminate(self, pod_id: str) -> None:
        """Terminate the pod."""
        self._call(self.runpod.terminate_pod, pod_id)
