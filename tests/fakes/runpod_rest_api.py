"""A fake Runpod REST API v2 on 127.0.0.1 (Starlette, served by uvicorn in a thread) over the
same `World` as the GraphQL fake, so every fault knob shows through both APIs.

It follows shared/reference/runpod-rest-v2.md: `POST /v2/pods` answers 201 with the Pod (422 for
unknown or malformed fields, 400 for a stock out with the observed detail, 400 for an unknown
GPU type); `GET /v2/pods[/{id}]`, `DELETE /v2/pods/{id}` (204); `GET /v2/catalog/gpus[/{id}]`
with `include=AVAILABILITY` (which needs `product`); errors are application/problem+json
`{title, status, detail, errors?}`. Pods go PROVISIONING -> STARTING -> RUNNING on the world's
virtual clock and report `cost` (0.0 once terminated) and the GPUs they hold (`gpu{id,count}`).
Where the reference is unconfirmed it does what `trainergym.infra.runpod_rest.ASSUMPTIONS`
says (`terminated` may be flipped to 404 to try the other answer). A pod that dies vanishes (404),
as a pod whose host died does; an opaque fault is a 500 (after making the pod, for
`create_then_error`); a queued HTTP failure or a 429 (`throttle_next`, with `Retry-After`) answers
before the API."""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from collections.abc import Callable

import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.fakes.runpod_api import GPUS, Refused, World, display_name
from trainergym.infra.runpod_rest import ASSUMPTIONS

CREATE_FIELDS = {"name", "image", "gpu", "cpu", "cloud", "dataCenterIds", "disk", "env", "args", "entrypoint", "cmd", "ports",
                 "registry", "mounts", "globalNetworking", "startSsh", "startJupyter", "templateId"}
GPU_FIELDS = {"id", "count", "allowedCudaVersions", "minCudaVersion", "minRamPerGpu", "minVcpuCountPerGpu"}
TITLES = {400: "Bad Request", 401: "Unauthorized", 402: "Payment Required", 403: "Forbidden", 404: "Not Found",
          409: "Conflict", 422: "Unprocessable Entity", 429: "Too Many Requests", 500: "Internal Server Error"}


class Problem(Exception):
    """An RFC 9457 problem answer."""

    def __init__(self, status: int, detail: str, errors: list[str] | None = None):
        super().__init__(detail)
        self.status, self.detail, self.errors = status, detail, errors


class RestV2:
    """The world as REST v2 shows it: the request handlers, each under the world's lock."""

    def __init__(self, world: World, terminated: object = ASSUMPTIONS["terminated_pod"].value):
        self.world, self.terminated = world, terminated  # "TERMINATED": still answered, with that status; else 404

    def _status(self, pod: dict) -> str:
        age = self.world.now - pod["created"]
        if self.world.booted(pod):
            return "RUNNING"
        if age < self.world.boot_time(pod) / 2:
            return "PROVISIONING"
        return ASSUMPTIONS["pulling_status"].value  # the image pulls (forever, for never_boot)

    def _pod(self, pod: dict, status: str | None = None) -> dict:
        status = status or self._status(pod)
        running = status == "RUNNING"
        runtime = None
        if running:
            http = dict(ASSUMPTIONS["http_port_runtime"].value)
            if pod.get("service") is not None:  # a real service answers on a direct mapping (the tests' stand-in)
                http["ip"], http["public"] = pod["service"]
            runtime = {"uptime": int(self.world.now - pod["created"]), "gpus": [{"util": 0, "memoryUtil": 0}],
                       "cpu": {"util": 0}, "memory": {"util": 0},
                       "ports": [http, {"private": 22, "public": 40022, "type": "tcp", "ip": "203.0.113.7"}]}
        rate = 0.0 if status == "TERMINATED" else self.world.reported_rate(pod) or 0.0
        spec = pod["spec"]
        actions = {"RUNNING": ["stop", "restart", "terminate"], "TERMINATED": []}.get(status, ["stop", "terminate"])
        return {
            "id": pod["id"], "name": pod["name"], "status": status, "actions": actions, "image": spec.get("image"),
            "args": spec.get("args"), "disk": spec.get("disk"), "ports": spec.get("ports") or [],
            "env": dict(e.split("=", 1) for e in pod["env"]), "registry": None, "mounts": None, "cloud": pod["cloud"],
            "dataCenterId": "EU-RO-1", "cudaVersion": "12.8", "template": None,
            "ssh": {"proxy": None, "direct": None}, "cost": rate, "locked": False, "globalNetworking": {"enabled": False},
            "runtime": runtime, "createdAt": pod["created"], "startedAt": pod["created"] if running else None,
            "gpu": {"id": pod["gpuType"], "count": pod["gpuCount"]},
        }

    def _shown(self, pod_id: str) -> dict | None:
        """The Pod a GET shows: alive and listed, or (per the assumption) terminated."""
        if (pod := self.world.visible(pod_id)) is not None:
            return self._pod(pod)
        pod = self.world.pods.get(pod_id)
        if pod is not None and pod["terminated"] and self.terminated == "TERMINATED":
            return self._pod(pod, "TERMINATED")
        return None

    def create(self, body: dict) -> tuple[int, dict]:
        self.world.calls.append(("create", body))
        errors = [f"$: additional properties '{k}' not allowed" for k in body if k not in CREATE_FIELDS]
        gpu = body.get("gpu")
        if isinstance(gpu, dict):
            errors += [f"$.gpu: additional properties '{k}' not allowed" for k in gpu if k not in GPU_FIELDS]
            if not isinstance(gpu.get("id"), str) or not isinstance(gpu.get("count", 1), int) or gpu.get("count", 1) < 1:
                errors.append("$.gpu: id must be a string, count an integer >= 1")
        if not isinstance(body.get("name"), str) or not body.get("name"):
            errors.append("$: missing property 'name'")
        if "image" not in body and "templateId" not in body:
            errors.append("$: missing property 'image'")
        if body.get("cloud", "SECURE") not in ("SECURE", "COMMUNITY"):
            errors.append("$.cloud: value must be one of 'SECURE', 'COMMUNITY'")
        env = body.get("env", {})
        if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
            errors.append("$.env: must be an object of strings")
        if not isinstance(body.get("ports", []), list):
            errors.append("$.ports: must be an array of strings")
        if errors:
            raise Problem(422, "Request validation failed.", errors)
        if (gpu is None) == (body.get("cpu") is None):
            raise Problem(ASSUMPTIONS["neither_gpu_nor_cpu"].value, "exactly one of gpu or cpu is required")
        if gpu["id"] not in GPUS:
            raise Problem(400, f"unknown GPU type {gpu['id']!r}")
        try:
            pod = self.world.create_pod(body["name"], gpu["id"], gpu.get("count", 1), body.get("cloud", "SECURE"),
                                        [f"{k}={v}" for k, v in env.items()],
                                        **{k: body.get(k) for k in ("image", "args", "disk", "ports")})
        except Refused as e:
            raise Problem(400 if e.kind == "capacity" else 500, str(e)) from None
        return 201, self._pod(pod)

    def get(self, pod_id: str) -> tuple[int, dict]:
        self.world.calls.append(("pod", {"podId": pod_id}))
        if (shown := self._shown(pod_id)) is None:
            raise Problem(404, f"pod {pod_id} not found")
        return 200, shown

    def list(self) -> tuple[int, dict]:
        self.world.calls.append(("pods", {}))
        return 200, {"pods": [shown for pid in list(self.world.pods) if (shown := self._shown(pid)) is not None]}

    def delete(self, pod_id: str) -> tuple[int, None]:
        self.world.calls.append(("terminate", {"podId": pod_id}))
        pod = self.world.pods.get(pod_id)
        if pod is None or (pod["terminated"] and self.terminated != "TERMINATED") or (
                not pod["terminated"] and self.world.observe(pod) is None):
            raise Problem(404, f"pod {pod_id} not found")  # unknown, gone, or its host died (a pod not listed yet is found)
        self.world.terminate_pod(pod_id)
        return 204, None

    def catalog(self, gpu_id: str | None, query: dict[str, str]) -> tuple[int, dict]:
        self.world.calls.append(("catalog", {"id": gpu_id, **query}))
        include, product = query.get("include"), query.get("product")
        if include and include != "AVAILABILITY" or include and product not in ("POD", "CLUSTER", "SERVERLESS"):
            raise Problem(400, "include=AVAILABILITY requires product=POD|CLUSTER|SERVERLESS")
        filters = {"count", "cloud", "countryCodes", "cudaVersions", "minCudaVersion"} & set(query)
        if filters and not include:
            raise Problem(400, f"{', '.join(sorted(filters))} need include=AVAILABILITY")
        try:
            count = int(query.get("count", "1"))
        except ValueError:
            raise Problem(422, "Request validation failed.", ["$.count: must be an integer"]) from None
        if query.get("cloud", "SECURE") not in ("SECURE", "COMMUNITY"):
            raise Problem(422, "Request validation failed.", ["$.cloud: value must be one of 'SECURE', 'COMMUNITY'"])

        def gpu_type(g: str) -> dict:
            vram, secure, community = GPUS[g]
            out = {"id": g, "name": display_name(g), "pool": "ADA_24" if vram == 24 else "AMPERE_48", "manufacturer": "Nvidia",
                   "memory": vram, "secure": True, "community": True, "price": {"secure": secure, "community": community},
                   "maxCount": {"secure": 8, "community": 8}}
            if include:
                level = self.world.availability(g, count)
                out["availability"] = level
                if level != "NONE":
                    out["dataCenters"] = [{"id": "EU-RO-1", "name": "Romania", "availability": level}]
                out["cudaVersions"] = [{"version": "12.8", "available": level != "NONE"}]
            return out

        if gpu_id is None:
            return 200, {"gpus": [gpu_type(g) for g in GPUS]}
        if gpu_id not in GPUS:
            raise Problem(404, f"GPU type {gpu_id!r} not found")
        return 200, gpu_type(gpu_id)


def _answer(status: int, body: object, headers: dict[str, str] | None = None, problem: bool = False) -> Response:
    headers = {ASSUMPTIONS["request_id"].value: uuid.uuid4().hex, **(headers or {})}
    if body is None:
        return Response(status_code=status, headers=headers)
    payload = body if isinstance(body, bytes) else json.dumps(body).encode()
    kind = "application/problem+json" if problem else "application/json"
    return Response(payload, status_code=status, headers=headers, media_type=kind)


class FakeRunpodRest:
    """Serves a `World`'s REST v2 API at `url` (http://127.0.0.1:<port>); API key "test-key"."""

    def __init__(self, world: World, key: str = "test-key", terminated: object = ASSUMPTIONS["terminated_pod"].value):
        self.world, self.key, self.api = world, key, RestV2(world, terminated)

        def route(handler: Callable[..., tuple[int, object]]):
            async def endpoint(request: Request) -> Response:
                raw = await request.body()
                return await run_in_threadpool(self._serve, request, raw, handler)
            return endpoint

        api = self.api
        app = Starlette(routes=[
            Route("/v2/pods", route(lambda r, body: api.create(body)), methods=["POST"]),
            Route("/v2/pods", route(lambda r, body: api.list()), methods=["GET"]),
            Route("/v2/pods/{pod_id}", route(lambda r, body: api.get(r.path_params["pod_id"])), methods=["GET"]),
            Route("/v2/pods/{pod_id}", route(lambda r, body: api.delete(r.path_params["pod_id"])), methods=["DELETE"]),
            Route("/v2/catalog/gpus", route(lambda r, body: api.catalog(None, dict(r.query_params))), methods=["GET"]),
            Route("/v2/catalog/gpus/{gpu_id:path}", route(lambda r, body: api.catalog(r.path_params["gpu_id"],
                                                                                      dict(r.query_params))),
                  methods=["GET"]),
        ])
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)
        self.thread.start()
        while not self.server.started:
            time.sleep(0.01)

    def _serve(self, request: Request, raw: bytes, handler) -> Response:
        try:
            if request.headers.get("authorization") != f"Bearer {self.key}":
                detail = "missing bearer token" if "authorization" not in request.headers else "invalid bearer token"
                raise Problem(401, detail)
            if (failure := self.world.gate()) is not None:
                status, payload, headers = failure
                return _answer(status, payload, headers, problem=True)
            try:
                body = json.loads(raw) if raw else {}
            except ValueError:
                raise Problem(422, "Request validation failed.", ["$: body is not JSON"]) from None
            with self.world.lock:
                status, out = handler(request, body)
            return _answer(status, out)
        except Problem as p:
            body = {"title": TITLES.get(p.status, "Error"), "status": p.status, "detail": p.detail}
            if p.errors:
                body["errors"] = p.errors
            return _answer(p.status, body, problem=True)

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=5)
