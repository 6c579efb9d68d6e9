"""`PodProvider` over Runpod's REST API v2 (`/v2/pods`, `/v2/catalog`), with its failures classified.

REST v2 (GA 2026-08-18) is the API Runpod supports once GraphQL, which the `runpod` SDK still
uses for pods, retires in early 2027; no SDK release speaks it, so this is a small httpx client
(shared/reference/runpod-rest-v2.md). Pods get the same image, start command, bootstrap and
base64-encoded environment as the GraphQL provider's; the pod never receives the API key.

Errors are problem+json (`title, status, detail, errors[]`) and map onto the pool's kinds:
401 and 402 (no balance) stop everything (`AuthError`); a 400 saying the GPUs are gone is a stock
out (`CapacityError`); 422, 403 and any other 400 are the request's own fault (`InvalidRequest`:
the pool skips the rung, never retries it); 429 waits `Retry-After` a few times, then, like 5xx,
timeouts and dropped connections, is a `TransientError`. A create that may have reached the API
before failing is looked up by its (unique) name. What the reference marks unconfirmed is assumed
in one place, `ASSUMPTIONS`, which the offline fake (tests/fakes/runpod_rest_api.py) follows too.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import quote

import httpx

from trainergym.infra.pool import AuthError, CapacityError, PodInfo, ProviderError, Rung, TransientError
from trainergym.infra.runpod_graphql import DOCKER_ARGS, IMAGE, POD_BOOTSTRAP, PROXY_URL, SERVICE_PORT

logger = logging.getLogger(__name__)

DEFAULT_URL = "https://api.runpod.io"


@dataclass(frozen=True)
class Assumption:
    """What we take for granted where the reference has no primary source: `value` is what the
    provider expects (and the fake API does), `why` says so and how the provider copes if wrong."""

    value: object
    why: str


ASSUMPTIONS: dict[str, Assumption] = {
    "terminated_pod": Assumption(
        "TERMINATED", "GET /v2/pods/{id} after DELETE answers 200 with status TERMINATED and cost 0.0 (it may answer 404: "
                      "either is gone to us); GET /v2/pods may list such pods too, and we skip them"),
    "default_disk": Assumption(
        None, "the default `disk` is unknown, so every create sends one (disk_gb, 60 GB as the GraphQL provider's "
              "container disk)"),
    "pod_list_pages": Assumption(
        None, "GET /v2/pods answers every pod in one body {pods: [...]}, no cursor (none is in any spec seen); a body "
              "with other keys is logged as a warning, since a page we never read would hide orphans"),
    "neither_gpu_nor_cpu": Assumption(
        400, "a create with neither (or both) of gpu and cpu answers 400, a handler check; we always send gpu, and a "
             "400 that is not a stock out is InvalidRequest whatever the rule"),
    "http_port_runtime": Assumption(
        {"private": SERVICE_PORT, "public": None, "type": "http", "ip": None},
        "runtime.ports lists an http port once the container runs, with ip and public null (the proxy serves it): "
        "listed means mapped; a proxy template naming {ip} and {public_port} (the tests') waits for both to be set"),
    "pulling_status": Assumption(
        "STARTING", "while its image pulls a pod shows STARTING with runtime null; only RUNNING with the service port "
                    "listed is ready, so a pod stuck before RUNNING ends at the pool's boot timeout"),
    "request_id": Assumption(
        "x-request-id", "responses carry an x-request-id header; error messages quote it for Runpod's support"),
    "no_balance": Assumption(
        402, "402 (named in prose only) means the account has no balance: an AuthError, nothing can be provisioned"),
    "delete_conflict": Assumption(
        409, "409 on DELETE means the pod is between states: transient, the pool retries and re-reads"),
    "capacity_detail": Assumption(
        "no longer any instances available", "no machine-readable code marks a stock out (observed 2026-08-18): a 400 "
                                             "whose detail holds this text is a CapacityError"),
    "create_cut_off": Assumption(
        None, "a create answered 5xx, or cut off once sent, may have made the pod (POST is not idempotent): we look "
              "its unique name up and return that pod, else raise an unknown ProviderError so the pool settles it"),
    "cloud_all": Assumption(
        "SECURE", "Rung.cloud ALL has no v2 equivalent (cloud is SECURE or COMMUNITY, with no fallback): ALL is sent "
                  "as SECURE, v2's default"),
}


class InvalidRequest(ProviderError):
    """The provider refused the request itself (422 contract violation, 403 no access to the pool,
    a 400 rule that is not a stock out): the pool skips the rung and never retries it."""

    kind = "invalid"


class _Unsettled(TransientError):
    """A failure after the request may have reached the API (5xx, a cut-off answer): a read may be
    retried; a create may have made its pod."""


def _cloud(rung: Rung) -> str:
    return "COMMUNITY" if rung.cloud == "COMMUNITY" else ASSUMPTIONS["cloud_all"].value  # ALL and SECURE


def _problem(response: httpx.Response) -> str:
    """One line from a problem+json body (or whatever came back), with the request id."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        body = {}
    detail = body.get("detail") or body.get("title") or response.text.strip()[:200] or response.reason_phrase
    errors = "; ".join(str(e) for e in body.get("errors") or [])
    request_id = response.headers.get(ASSUMPTIONS["request_id"].value)
    return (f"{response.status_code} {detail}" + (f" ({errors})" if errors else "")
            + (f" [request {request_id}]" if request_id else ""))


def classify(response: httpx.Response) -> ProviderError:
    """Map a failed response onto the pool's error kinds (the spec's createPod guidance)."""
    status, text = response.status_code, _problem(response)
    if status == 401:
        return AuthError(f"Runpod refused the API key: {text}")
    if status == ASSUMPTIONS["no_balance"].value:
        return AuthError(f"the Runpod account has no balance, nothing can be provisioned: {text}")
    if status == 400 and ASSUMPTIONS["capacity_detail"].value in text.lower():
        return CapacityError(text)
    if status == 429:
        return TransientError(f"rate limited: {text}")
    if status >= 500:
        return _Unsettled(text)
    if status in (400, 403, 404, 409, 413, 422):
        return InvalidRequest(text)
    return ProviderError(text)  # unknown


def _retry_after(response: httpx.Response, attempt: int) -> float:
    """Seconds a 429 asks us to wait (integer seconds per the spec); a backoff when it does not say."""
    try:
        return max(0.0, float(response.headers["Retry-After"]))
    except (KeyError, ValueError):
        return float(2 ** attempt)


class RunpodRestProvider:
    """`PodProvider` over Runpod's REST v2 API at `base_url` (else `RUNPOD_REST_URL`, else
    api.runpod.io): pods of `image` that run `bootstrap`, their service reached through
    `proxy_url`. Raises AuthError without an API key (`api_key` or `RUNPOD_API_KEY`)."""

    def __init__(self, api_key: str | None = None, base_url: str | None = None, image: str = IMAGE,
                 proxy_url: str = PROXY_URL, port: int = SERVICE_PORT, bootstrap: str | None = None, disk_gb: int = 60,
                 timeout: float = 30.0, rate_limit_retries: int = 3, max_retry_after: float = 60.0,
                 sleep: Callable[[float], None] = time.sleep, transport: httpx.BaseTransport | None = None):
        """`bootstrap`: the script a pod runs at boot (default: install trainergym and the families
        per `trainergym.job.stack.pod_install()`, then serve jobs). A 429 is waited out
        `rate_limit_retries` times with `sleep`, unless it asks for more than `max_retry_after`
        seconds (an hour's window is not waited out inside one call)."""
        key = api_key or os.environ.get("RUNPOD_API_KEY")
        if not key:
            raise AuthError("set RUNPOD_API_KEY to use the runpod backend")
        if bootstrap is None:
            from trainergym.job.stack import pod_install

            bootstrap = POD_BOOTSTRAP.format(install=pod_install(), port=port)
        base = (base_url or os.environ.get("RUNPOD_REST_URL") or DEFAULT_URL).rstrip("/")
        self.http = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=timeout,
                                 transport=transport)
        self.image, self.proxy_url, self.port, self.bootstrap, self.disk_gb = image, proxy_url, port, bootstrap, disk_gb
        self.rate_limit_retries, self.max_retry_after, self.sleep = rate_limit_retries, max_retry_after, sleep
        self._warned_pages = False

    def _request(self, method: str, path: str, *, missing_ok: bool = False, transient: tuple[int, ...] = (),
                 **kwargs) -> httpx.Response | None:
        """The response of a successful call; None for a 404 when `missing_ok`; else the classified
        error (`transient`: statuses this call may retry)."""
        for attempt in range(self.rate_limit_retries + 1):
            try:
                response = self.http.request(method, path, **kwargs)
            except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as e:  # nothing was sent
                raise TransientError(f"{method} {path}: {type(e).__name__}: {e}") from e
            except httpx.TransportError as e:  # sent, then cut off: the API may have acted
                raise _Unsettled(f"{method} {path}: {type(e).__name__}: {e}") from e
            if response.status_code != 429 or attempt == self.rate_limit_retries:
                break
            wait = _retry_after(response, attempt)
            if wait > self.max_retry_after:
                break
            self.sleep(wait)
        if response.is_success:
            return response
        if response.status_code == 404 and missing_ok:
            return None
        if response.status_code in transient:
            raise TransientError(f"{method} {path}: {_problem(response)}")
        raise classify(response)

    # --- the PodProvider contract ---------------------------------------------------------------
    def available(self, rung: Rung) -> bool | None:
        """Whether the catalog shows `rung.gpu_count` GPUs of the rung's type in stock in its cloud:
        False for availability NONE or no data center; None when the catalog cannot tell (an unknown
        type or a query it refuses: the create then says why)."""
        params = {"include": "AVAILABILITY", "product": "POD", "count": rung.gpu_count, "cloud": _cloud(rung)}
        try:
            response = self._request("GET", f"/v2/catalog/gpus/{quote(rung.gpu_type, safe='')}", params=params,
                                     missing_ok=True)
        except InvalidRequest:
            return None
        if response is None:
            return None
        gpu = response.json()
        if gpu.get("availability") is None:
            return None
        return gpu["availability"] != "NONE" and bool(gpu.get("dataCenters"))

    def create(self, name: str, rung: Rung, env: dict[str, str]) -> str:
        """Create a pod called `name` on `rung` (its `env` travels base64-encoded); returns its id."""
        body = {
            "name": name, "image": self.image, "gpu": {"id": rung.gpu_type, "count": rung.gpu_count},
            "cloud": _cloud(rung), "disk": self.disk_gb, "args": DOCKER_ARGS, "ports": [f"{self.port}/http", "22/tcp"],
            "env": {"TRAINERGYM_ENV_B64": base64.b64encode(json.dumps(env).encode()).decode(),
                    "TRAINERGYM_BOOTSTRAP_B64": base64.b64encode(self.bootstrap.encode()).decode()},
        }
        try:
            response = self._request("POST", "/v2/pods", json=body)
        except _Unsettled as e:
            made = self._find(name)
            if made is not None:
                return made.id
            raise ProviderError(f"create of {name} failed after it was sent ({e}): the pod may exist") from e
        pod_id = response.json().get("id") if response.content else None
        if not pod_id:
            raise ProviderError(f"create of {name} answered {response.status_code} without a pod id")
        return pod_id

    def get(self, pod_id: str) -> PodInfo | None:
        """The pod (ready once RUNNING with its service port mapped), or None when the provider no
        longer has it (404, or TERMINATED)."""
        response = self._request("GET", f"/v2/pods/{quote(pod_id, safe='')}", missing_ok=True)
        if response is None:
            return None
        pod = response.json()
        return None if pod.get("status") == "TERMINATED" else self._info(pod)

    def list(self) -> list[PodInfo]:
        """Every pod of the account not terminated."""
        body = self._request("GET", "/v2/pods").json()
        if set(body) - {"pods"} and not self._warned_pages:
            self._warned_pages = True
            logger.warning("GET /v2/pods answered more than pods (%s): if the list is paginated now, pods beyond the "
                           "first page are unseen (see runpod_rest.ASSUMPTIONS)", ", ".join(sorted(set(body) - {"pods"})))
        return [self._info(p) for p in body.get("pods") or [] if p.get("status") != "TERMINATED"]

    def terminate(self, pod_id: str) -> None:
        """Terminate the pod; one already gone is fine."""
        self._request("DELETE", f"/v2/pods/{quote(pod_id, safe='')}", missing_ok=True,
                      transient=(ASSUMPTIONS["delete_conflict"].value,))

    def close(self) -> None:
        """Release the HTTP connections."""
        self.http.close()

    # --- helpers ------------------------------------------------------------------------------------
    def _find(self, name: str) -> PodInfo | None:
        """The pod called `name`, if the provider lists it (None too when it cannot be asked now)."""
        try:
            return next((p for p in self.list() if p.name == name), None)
        except TransientError:
            return None

    def _info(self, pod: dict) -> PodInfo:
        """`url` from the proxy template; a template naming {ip} and {public_port} uses the port's
        mapping in `runtime.ports` instead (what the tests' fake pods answer on). `gpu_type` and
        `gpu_count` are the GPUs the pod holds, which may differ from those asked for."""
        runtime = pod.get("runtime") or {}
        mapped = next((p for p in runtime.get("ports") or [] if p.get("private") == self.port), None)
        url = None
        if mapped is not None and ("{public_port}" not in self.proxy_url or (mapped.get("ip") and mapped.get("public"))):
            url = self.proxy_url.format(pod_id=pod["id"], port=self.port, ip=mapped.get("ip") or "",
                                        public_port=mapped.get("public") or "")
        gpu, status = pod.get("gpu") or {}, pod.get("status", "")
        return PodInfo(id=pod["id"], name=pod.get("name", ""), status=status, ready=status == "RUNNING" and url is not None,
                       cost_per_hr=float(pod.get("cost") or 0.0), url=url, gpu_type=gpu.get("id"),
                       gpu_count=gpu.get("count"))
