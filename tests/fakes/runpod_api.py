"""A fake Runpod on 127.0.0.1: one `World` (the provider's pods, stock, virtual clock and fault
knobs) spoken to through two APIs, the GraphQL one here (a real graphql-core executor over the
surface the runpod SDK speaks; shared/reference/runpod.md, section 6) and REST v2 in
tests/fakes/runpod_rest_api.py. A fault set on the world shows through either API. Pods can
run a real pod service (`on_boot`), reached through their port mapping."""

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

# GPU type id -> (VRAM GB, secure $/h, community $/h), per GPU; secure prices are the library's list prices.
GPUS = {
    "NVIDIA RTX A5000": (24, 0.27, 0.16),
    "NVIDIA A40": (48, 0.44, 0.40),
    "NVIDIA GeForce RTX 4090": (24, 0.74, 0.34),
    "NVIDIA RTX A6000": (48, 0.79, 0.49),
}


def display_name(gpu: str) -> str:
    """Runpod's display name of a GPU type (`gpuDisplayName`), e.g. "RTX A5000"."""
    return gpu.removeprefix("NVIDIA ").removeprefix("GeForce ")


class Refused(Exception):
    """The world refuses a create: `kind` is "capacity" (out of stock) or "opaque" (a server
    error that says nothing; the pod may have been made all the same)."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


@dataclass
class World:
    """The provider's state and fault knobs, whichever API speaks for it; `now` is the virtual
    clock (seconds). A pod record holds what was asked and what was given: `gpuType`/`gpuCount`
    (the GPUs it holds), `asked`, `cloud`, `price` ($/h it bills), `env` ("K=V" strings), `created`,
    `terminated`, `ended` and its `service` (ip, port) once booted."""

    now: float = 0.0
    stock: dict[str, int] = field(default_factory=lambda: {g: 100 for g in GPUS})
    boot_seconds: float = 120.0
    boot_jitter: float = 0.0  # each pod boots in gauss(boot_seconds, boot_jitter) seconds (at least 10) when set
    never_boot: set[str] = field(default_factory=set)  # GPU types whose pods never get a runtime
    die_after: dict[str, float] = field(default_factory=dict)  # pod id -> seconds of uptime, then it vanishes
    opaque_next: int = 0  # creates that fail with an opaque error (nothing made)
    create_then_error: int = 0  # creates that succeed but answer an opaque error (orphans)
    terminate_noop: int = 0  # terminates that answer success and do nothing
    http_fail_next: list = field(default_factory=list)  # (status, body) answered before the API
    throttle_next: int = 0  # requests answered 429 (a problem body, `Retry-After: retry_after`)
    retry_after: int = 2
    list_lag: float = 0.0  # seconds after its create during which a pod is missing from get and list
    rate_unknown: bool = False  # pods report no rate (0 / null) until they run; they bill their price all the same
    substitute: dict[str, str] = field(default_factory=dict)  # GPU type asked -> GPU type given (and billed)
    catalog_blind: bool = False  # the catalog shows every type in stock (it is no reservation): only creates find out
    pods: dict[str, dict] = field(default_factory=dict)
    calls: list[tuple[str, dict]] = field(default_factory=list)  # (operation, the API's own input) in order
    on_boot: object = None  # callable(pod) -> (ip, port): starts a fake pod service
    on_death: object = None  # callable(pod): stops it when the pod dies or is terminated
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    lock: threading.RLock = field(default_factory=threading.RLock)

    # --- what both APIs share ----------------------------------------------------------------
    def gate(self) -> tuple[int, bytes, dict[str, str]] | None:
        """What answers a request before the API does: a queued HTTP failure, then a 429."""
        with self.lock:
            if self.http_fail_next:
                status, body = self.http_fail_next.pop(0)
                return status, body, {}
            if self.throttle_next:
                self.throttle_next -= 1
                body = {"title": "Too Many Requests", "status": 429, "detail": "rate limit exceeded for the minute window"}
                return 429, json.dumps(body).encode(), {"Retry-After": str(self.retry_after)}
        return None

    def create_pod(self, name: str, gpu: str, count: int, cloud: str, env: list[str], **spec) -> dict:
        """Make a pod of `count` GPUs of `gpu` (or what `substitute` gives instead) and return its
        record; raises Refused for a stock out or an opaque fault."""
        if self.opaque_next:
            self.opaque_next -= 1
            raise Refused("opaque", OPAQUE)
        given = self.substitute.get(gpu, gpu)
        if self.stock.get(given, 0) < count:
            raise Refused("capacity", NO_STOCK)
        self.stock[given] -= count
        pod_id = "".join(self.rng.choices(string.ascii_lowercase + string.digits, k=14))
        self.pods[pod_id] = {
            "id": pod_id, "name": name, "gpuType": given, "gpuCount": count, "asked": gpu, "cloud": cloud,
            "price": GPUS[given][2 if cloud == "COMMUNITY" else 1] * count, "env": env, "spec": spec,
            "created": self.now, "terminated": False, "ended": None, "service": None,
            "boot": max(10.0, self.rng.gauss(self.boot_seconds, self.boot_jitter)) if self.boot_jitter else None,
        }
        if self.create_then_error:
            self.create_then_error -= 1
            raise Refused("opaque", OPAQUE)
        return self.pods[pod_id]

    def _death(self, pod: dict) -> float | None:
        if pod["id"] not in self.die_after:
            return None
        return pod["created"] + self.boot_time(pod) + self.die_after[pod["id"]]

    def boot_time(self, pod: dict) -> float:
        """Seconds from its create until the pod boots."""
        return self.boot_seconds if pod.get("boot") is None else pod["boot"]

    def _alive(self, pod: dict) -> bool:
        death = self._death(pod)
        return not pod["terminated"] and (death is None or self.now < death)

    def booted(self, pod: dict) -> bool:
        """Whether the pod's container runs (its service starts with it)."""
        return pod["gpuType"] not in self.never_boot and self.now - pod["created"] >= self.boot_time(pod)

    def observe(self, pod: dict) -> dict | None:
        """The pod's record now, or None once it is terminated or dead (its service then stops);
        a booted pod's service is started."""
        if not self._alive(pod):
            if pod["ended"] is None:
                pod["ended"] = min(self.now, self._death(pod) or self.now)
            if pod.get("service") is not None and self.on_death is not None:
                self.on_death(pod)
                pod["service"] = None
            return None
        if self.booted(pod) and self.on_boot is not None and pod.get("service") is None:
            pod["service"] = self.on_boot(pod)
        return pod

    def lagging(self, pod: dict) -> bool:
        """Whether the provider's answers do not show the new pod yet (`list_lag`)."""
        return self.now < pod["created"] + self.list_lag

    def visible(self, pod_id: str) -> dict | None:
        """The pod as get and list see it: None when unknown, gone, dead or not listed yet."""
        pod = self.pods.get(pod_id)
        if pod is None or self.observe(pod) is None or self.lagging(pod):
            return None
        return pod

    def reported_rate(self, pod: dict) -> float | None:
        """The $/h the API reports: None (not said) before the pod runs under `rate_unknown`."""
        return None if self.rate_unknown and not self.booted(pod) else pod["price"]

    def terminate_pod(self, pod_id: str) -> bool:
        """End the pod (unless `terminate_noop`); False for an id the world never had."""
        if self.terminate_noop:
            self.terminate_noop -= 1
            return pod_id in self.pods
        pod = self.pods.get(pod_id)
        if pod is None:
            return False
        if not pod["terminated"]:
            alive = self._alive(pod)
            pod["terminated"] = True
            if alive:
                pod["ended"] = self.now
                self.stock[pod["gpuType"]] += pod["gpuCount"]
            self.observe(pod)
        return True

    def availability(self, gpu: str, count: int) -> str:
        """The catalog's word for `count` GPUs of `gpu`: NONE, LOW or HIGH (HIGH if `catalog_blind`)."""
        left = self.stock.get(gpu, 0)
        if self.catalog_blind:
            return "HIGH"
        return "NONE" if left < count else "LOW" if left < 4 * count else "HIGH"

    def tick(self) -> None:
        """Let time act: pods whose death is due die now (their service stops answering)."""
        with self.lock:
            for pod in self.pods.values():
                self.observe(pod)

    def billed(self) -> float:
        """What the provider bills: each pod's price from its create to its end (terminate or death)."""
        return sum(p["price"] * ((p["ended"] if p["ended"] is not None else min(self.now, self._death(p) or self.now))
                                 - p["created"]) / 3600 for p in self.pods.values())

    def running(self) -> list[dict]:
        """The pods alive (billing)."""
        return [p for p in self.pods.values() if self._alive(p)]

    def execute(self, body: dict) -> dict:
        """Answer a GraphQL request body (for tests that speak GraphQL to the world directly)."""
        return GraphQL(self).execute(body)


# --- the GraphQL API ---------------------------------------------------------------------------------
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


class GraphQLFault(Exception):
    pass


class GraphQL:
    """The world as Runpod's GraphQL API shows it: pods RUNNING with a null runtime until they
    boot, `costPerHr`, `machine.gpuDisplayName` of the GPUs held, `stockStatus` in the catalog."""

    def __init__(self, world: World):
        self.world = world

    def _view(self, pod: dict) -> dict:
        view = {"id": pod["id"], "name": pod["name"], "imageName": pod["spec"].get("imageName"), "env": pod["env"],
                "machineId": "m-" + pod["id"][:6], "desiredStatus": "RUNNING", "gpuCount": pod["gpuCount"],
                "machine": {"podHostId": f"{pod['id']}-64410f4e", "gpuDisplayName": display_name(pod["gpuType"])},
                "costPerHr": self.world.reported_rate(pod), "ports": pod["spec"].get("ports"),
                "dockerArgs": pod["spec"].get("dockerArgs"), "runtime": None}
        if self.world.booted(pod):
            ip, port = pod.get("service") or ("127.0.0.1", 0)
            view["runtime"] = {"uptimeInSeconds": int(self.world.now - pod["created"]),
                               "ports": [{"ip": ip, "isIpPublic": True, "privatePort": 8000, "publicPort": port, "type": "tcp"}]}
        return view

    def create(self, _info, input):  # noqa: A002 - GraphQL argument name
        self.world.calls.append(("create", input))
        try:
            pod = self.world.create_pod(input["name"], input["gpuTypeId"], input.get("gpuCount", 1),
                                        input.get("cloudType", "ALL"), [f"{e['key']}={e['value']}" for e in input.get("env") or []],
                                        **{k: v for k, v in input.items() if k in ("imageName", "ports", "dockerArgs")})
        except Refused as e:
            raise GraphQLFault(str(e)) from None
        view = self._view(pod)
        return {k: view[k] for k in ("id", "imageName", "env", "machineId", "machine")}

    def pod(self, _info, input):  # noqa: A002
        self.world.calls.append(("pod", input))
        pod = self.world.visible(input["podId"])
        return None if pod is None else self._view(pod)

    def myself(self, _info):
        self.world.calls.append(("pods", {}))
        return {"id": "user", "pods": [self._view(p) for pid in list(self.world.pods) if (p := self.world.visible(pid))]}

    def terminate(self, _info, input):  # noqa: A002
        self.world.calls.append(("terminate", input))
        self.world.terminate_pod(input["podId"])
        return None

    def gpu_types(self, _info, input=None):  # noqa: A002
        self.world.calls.append(("catalog", input or {}))
        ids = [input["id"]] if input and input.get("id") else list(GPUS)
        world = self.world

        def lowest(g: str, count: int) -> dict:
            level = world.availability(g, count)
            return {"uninterruptablePrice": None if level == "NONE" else GPUS[g][1], "minimumBidPrice": None,
                    "stockStatus": None if level == "NONE" else level.title()}

        return [{"id": g, "displayName": display_name(g), "memoryInGb": GPUS[g][0], "securePrice": GPUS[g][1],
                 "communityPrice": GPUS[g][2], "maxGpuCount": 8, "secureCloud": True, "communityCloud": True,
                 "manufacturer": "Nvidia", "cudaCores": 0,
                 "lowestPrice": lambda _info, input=None, g=g: lowest(g, (input or {}).get("gpuCount") or 1)}  # noqa: A002
                for g in ids if g in GPUS]

    def execute(self, body: dict) -> dict:
        with self.world.lock:
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
    """Serves a `World`'s GraphQL API at http://127.0.0.1:<port>/graphql; API key "test-key"."""

    def __init__(self, world: World, key: str = "test-key"):
        self.world, self.key = world, key
        api = GraphQL(world)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):  # noqa: N802
                auth = self.headers.get("Authorization", "")
                if auth != f"Bearer {outer.key}" and f"api_key={outer.key}" not in self.path:
                    return self._send(401, b'{"error": "unauthorized"}')
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                if (failure := outer.world.gate()) is not None:
                    return self._send(*failure)
                self._send(200, json.dumps(api.execute(body)).encode())

            def _send(self, status: int, payload: bytes, headers: dict[str, str] | None = None):
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()
