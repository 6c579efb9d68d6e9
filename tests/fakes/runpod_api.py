"""A fake Runpod GraphQL API on 127.0.0.1: a real GraphQL executor (graphql-core) over the
surface the runpod SDK speaks, with a virtual clock and fault knobs (shared/reference/runpod.md,
section 6). Pods can run a real pod service (`start_pod`), reached through their port mapping."""

from __future__ import annotations

import json
import random
import string
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from graphql import build_schema, graphql_sync

NO_STOCK = "There are no longer any instances available with the requested specifications. Please refresh and try again."
OPAQUE = "Something went wrong. Please try again later or contact support."

SDL = """
scalar JSON
enum CloudTypeEnum { ALL SECURE COMMUNITY }
input EnvironmentVariableInput { key: String! value: String! }
input PodFindAndDeployOnDemandInput {
  name: String imageName: String cloudType: CloudTypeEnum gpuTypeId: String gpuCount: Int volumeInGb: Int
  containerDiskInGb: Int minVcpuCount: Int minMemoryInGb: Int dockerArgs: String ports: String volumeMountPath: String
  env: [EnvironmentVariableInput] templateId: String networkVolumeId: String dataCenterId: String countryCode: String
  supportPublicIp: Boolean startSsh: Boolean allowedCudaVersions: [String] minDownload: Int minUpload: Int
}
input PodInput { podId: String! }
input GpuTypeFilter { id: String ids: [String] }
input LowestPriceInput { gpuCount: Int secureCloud: Boolean dataCenterId: String }
type PortMapping { ip: String isIpPublic: Boolean privatePort: Int publicPort: Int type: String }
type Runtime { uptimeInSeconds: Int ports: [PortMapping] }
type Machine { podHostId: String gpuDisplayName: String }
type Pod {
  id: String name: String imageName: String env: [String] machineId: String machine: Machine desiredStatus: String
  lastStatusChange: String costPerHr: Float gpuCount: Int vcpuCount: Float memoryInGb: Float containerDiskInGb: Int
  volumeInGb: Float volumeMountPath: String dockerArgs: String dockerId: String podType: String port: Int ports: String
  uptimeSeconds: Int runtime: Runtime
}
type LowestPrice { minimumBidPrice: Float uninterruptablePrice: Float stockStatus: String availableGpuCounts: [Int] }
type GpuType {
  id: String displayName: String memoryInGb: Int manufacturer: String cudaCores: Int secureCloud: Boolean
  communityCloud: Boolean securePrice: Float communityPrice: Float oneWeekPrice: Float oneMonthPrice: Float
  threeMonthPrice: Float secureSpotPrice: Float communitySpotPrice: Float maxGpuCount: Int
  lowestPrice(input: LowestPriceInput): LowestPrice
}
type User { id: String pubKey: String clientBalance: Float pods: [Pod] }
type Query { myself: User pod(input: PodInput): Pod gpuTypes(input: GpuTypeFilter): [GpuType] }
type Mutation {
  podFindAndDeployOnDemand(input: PodFindAndDeployOnDemandInput): Pod
  podTerminate(input: PodInput): JSON
  podStop(input: PodInput): Pod
}
"""
SCHEMA = build_schema(SDL)

GPUS = {
    "NVIDIA RTX A5000": (24, 0.27, 0.16),
    "NVIDIA A40": (48, 0.44, 0.40),
    "NVIDIA GeForce RTX 4090": (24, 0.74, 0.34),
    "NVIDIA RTX A6000": (48, 0.79, 0.49),
}


class GraphQLFault(Exception):
    pass


@dataclass
class World:
    """The provider's state and fault knobs; `now` is the virtual clock (seconds)."""

    now: float = 0.0
    stock: dict[str, int] = field(default_factory=lambda: {g: 100 for g in GPUS})
    boot_seconds: float = 120.0
    never_boot: set[str] = field(default_factory=set)  # GPU types whose pods never get a runtime
    die_after: dict[str, float] = field(default_factory=dict)  # pod id -> seconds of uptime, then it vanishes
    opaque_next: int = 0
    create_then_error: int = 0  # creates that succeed but answer an opaque error (orphans)
    terminate_noop: int = 0
    http_fail_next: list = field(default_factory=list)  # (status, body) answered before GraphQL
    pods: dict[str, dict] = field(default_factory=dict)
    calls: list[tuple[str, dict]] = field(default_factory=list)
    on_boot: object = None  # callable(pod) -> (ip, port): starts a fake pod service
    on_death: object = None  # callable(pod): stops it when the pod dies or is terminated
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    lock: threading.Lock = field(default_factory=threading.Lock)

    def _alive(self, pod: dict) -> bool:
        died = pod["id"] in self.die_after and self.now - pod["created"] >= self.die_after[pod["id"]] + self.boot_seconds
        return not pod["terminated"] and not died

    def tick(self) -> None:
        """Let time act: pods whose death is due die now (their service stops answering)."""
        with self.lock:
            for pod in self.pods.values():
                self._view(pod)

    def billed(self) -> float:
        return sum(p["costPerHr"] * ((p["ended"] if p["ended"] is not None else self.now) - p["created"]) / 3600
                   for p in self.pods.values())

    def running(self) -> list[dict]:
        return [p for p in self.pods.values() if self._alive(p)]

    def _view(self, pod: dict) -> dict | None:
        if not self._alive(pod):
            if pod["ended"] is None:
                pod["ended"] = self.now
            if pod.get("service") is not None and self.on_death is not None:
                self.on_death(pod)
                pod["service"] = None
            return None
        view = {k: v for k, v in pod.items() if k not in ("created", "terminated", "ended", "service")}
        booted = pod["gpuType"] not in self.never_boot and self.now - pod["created"] >= self.boot_seconds
        if booted and self.on_boot is not None and pod.get("service") is None:
            pod["service"] = self.on_boot(pod)
        if booted:
            ip, port = pod.get("service") or ("127.0.0.1", 0)
            view["runtime"] = {"uptimeInSeconds": int(self.now - pod["created"]),
                               "ports": [{"ip": ip, "isIpPublic": True, "privatePort": 8000, "publicPort": port, "type": "tcp"}]}
        else:
            view["runtime"] = None
        return view

    # --- resolvers ---------------------------------------------------------------------------
    def create(self, _info, input):  # noqa: A002 - GraphQL argument name
        self.calls.append(("create", input))
        if self.opaque_next:
            self.opaque_next -= 1
            raise GraphQLFault(OPAQUE)
        gpu, cloud, count = input["gpuTypeId"], input.get("cloudType", "ALL"), input.get("gpuCount", 1)
        if self.stock.get(gpu, 0) < count:
            raise GraphQLFault(NO_STOCK)
        self.stock[gpu] -= count
        pod_id = "".join(self.rng.choices(string.ascii_lowercase + string.digits, k=14))
        price = GPUS[gpu][1 if cloud != "COMMUNITY" else 2]
        self.pods[pod_id] = {
            "id": pod_id, "name": input["name"], "imageName": input.get("imageName"), "gpuType": gpu,
            "env": [f"{e['key']}={e['value']}" for e in input.get("env") or []], "machineId": "m-" + pod_id[:6],
            "machine": {"podHostId": f"{pod_id}-64410f4e", "gpuDisplayName": gpu}, "desiredStatus": "RUNNING",
            "costPerHr": price * count, "gpuCount": count, "ports": input.get("ports"), "created": self.now,
            "terminated": False, "ended": None, "service": None,
        }
        if self.create_then_error:
            self.create_then_error -= 1
            raise GraphQLFault(OPAQUE)
        return {k: self.pods[pod_id][k] for k in ("id", "imageName", "env", "machineId", "machine")}

    def pod(self, _info, input):  # noqa: A002
        self.calls.append(("pod", input))
        pod = self.pods.get(input["podId"])
        return None if pod is None else self._view(pod)

    def myself(self, _info):
        self.calls.append(("pods", {}))
        return {"id": "user", "pods": [v for p in self.pods.values() if (v := self._view(p)) is not None]}

    def terminate(self, _info, input):  # noqa: A002
        self.calls.append(("terminate", input))
        if self.terminate_noop:
            self.terminate_noop -= 1
            return None
        pod = self.pods.get(input["podId"])
        if pod is not None and not pod["terminated"]:
            pod["terminated"], pod["ended"] = True, self.now
            self.stock[pod["gpuType"]] += pod["gpuCount"]
        return None

    def gpu_types(self, _info, input=None):  # noqa: A002
        ids = [input["id"]] if input and input.get("id") else list(GPUS)
        return [{"id": g, "displayName": g.removeprefix("NVIDIA ").removeprefix("GeForce "), "memoryInGb": GPUS[g][0],
                 "securePrice": GPUS[g][1], "communityPrice": GPUS[g][2], "maxGpuCount": 8, "secureCloud": True,
                 "communityCloud": True, "manufacturer": "Nvidia", "cudaCores": 0,
                 "lowestPrice": {"uninterruptablePrice": GPUS[g][1] if self.stock.get(g) else None,
                                 "minimumBidPrice": None, "stockStatus": "High" if self.stock.get(g) else None}}
                for g in ids if g in GPUS]

    def execute(self, body: dict) -> dict:
        with self.lock:
            root = {"podFindAndDeployOnDemand": self.create, "pod": self.pod, "myself": self.myself,
                    "podTerminate": self.terminate, "gpuTypes": self.gpu_types, "podStop": self.pod}
            result = graphql_sync(SCHEMA, body.get("query", ""), root_value=root, variable_values=body.get("variables"))
            out = {"data": result.data}
            if result.errors:
                out["errors"] = [{"message": e.message, "path": e.path,
                                  "extensions": {"code": "SUPPLY_CONSTRAINT" if e.message == NO_STOCK else "INTERNAL"}}
                                 for e in result.errors]
            return out


class FakeRunpod:
    """Serves a `World` at http://127.0.0.1:<port>/graphql; API key "test-key"."""

    def __init__(self, world: World, key: str = "test-key"):
        self.world, self.key = world, key
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):  # noqa: N802
                auth = self.headers.get("Authorization", "")
                if auth != f"Bearer {outer.key}" and f"api_key={outer.key}" not in self.path:
                    return self._send(401, b'{"error": "unauthorized"}')
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                if outer.world.http_fail_next:
                    status, payload = outer.world.http_fail_next.pop(0)
                    return self._send(status, payload)
                self._send(200, json.dumps(outer.world.execute(body)).encode())

            def _send(self, status: int, payload: bytes):
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()
