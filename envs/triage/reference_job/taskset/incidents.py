"""Training data and reward for on-call triage.

The generator is written here rather than taken from the family so the job controls its own
mix: more pages whose culprit sits one or two dependency levels down, every decoy kind, and
its own service and people names so the model learns the procedure, not the names. Worlds use
exactly the eval toolset's format: {services: {name: {owner, depends_on}}, incidents: {id:
{service, started_at, symptom}}, deploys: [{id, service, at, author}]}.
"""

import random
import re

import verifiers.v1 as vf
from trainergym_kit.answers import last_match
from trainergym_triage.toolset import TriageToolset

WINDOW = 120  # minutes before the incident start in which a deploy can be the cause
SYSTEM = (
    "You are the on-call engineer. Use the ops tools for every fact: ops_get_incident for the incident's "
    "service and start time, ops_list_deploys for a service's deploys, ops_get_service for its owner and "
    "dependencies. Only deploys in the 2 hours before the start count. Search the incident's service, then "
    "its dependencies, then theirs; the most recent deploy in the window at the nearest level is the "
    "culprit. Finish with a line `Answer: <deploy id>, <owner>`."
)
RESPONDER = {
    0: "the incident's own service was deployed recently.",
    1: "the incident's own service has been quiet; suspect one of its direct dependencies.",
    2: "the incident's service and its direct dependencies have been quiet; suspect a dependency of a dependency.",
}
HEADS_UP = {
    "after": "a release went out just after the incident started",
    "older": "older releases are in the deploy log too",
    "callers": "services that call this one (they are not its dependencies) shipped during the window",
}
SERVICES = [
    "api-edge", "accounts", "billing-api", "catalog-svc", "cdn-purge", "config", "identity", "invoices",
    "kafka-bridge", "maps", "matching", "metering", "payouts", "profile", "quotes", "ratings", "refunds",
    "routing", "scheduler", "storefront", "tax", "tokens", "uploads", "webhooks", "wallet", "warehouse",
]
PEOPLE = [f"{a} {b}" for a in ("Alex", "Bea", "Chidi", "Dana", "Emil", "Farah", "Goran", "Ines", "Jun", "Kofi")
          for b in ("Adeyemi", "Brandt", "Costa", "Duarte", "Eriksen", "Fujita")]
SYMPTOMS = ["error budget burning", "latency spike", "dropped messages", "payment declines", "CPU saturation"]


def hhmm(m: int) -> str:
    return f"{m // 60:02d}:{m % 60:02d}"


def mins(t: str) -> int:
    h, m = t.split(":")
    return int(h) * 60 + int(m)


def make_page(rng: random.Random) -> tuple[str, dict, str]:
    """(prompt, world, answer) for one page; the culprit is planted `depth` levels down."""
    depth = rng.choices((0, 1, 2), weights=(2, 4, 4))[0]
    pool = rng.sample(SERVICES, len(SERVICES))
    root = pool.pop()
    levels, deps = [[root]], {root: []}
    for d in range(2):
        nxt = []
        for parent in levels[-1]:
            for _ in range(rng.randint(1 if (d <= depth - 1 and parent == levels[-1][0]) else 0, 2)):
                if len(nxt) < 3:
                    child = pool.pop()
                    deps[parent].append(child)
                    deps[child] = []
                    nxt.append(child)
        levels.append(nxt)
    callers = [pool.pop() for _ in range(rng.randint(1, 3))]
    for c in callers:
        deps[c] = [root] + rng.sample(levels[1], min(len(levels[1]), rng.randint(0, 1)))
    owner = dict(zip(deps, rng.sample(PEOPLE, len(deps))))
    start = rng.randint(8 * 60 + 30, 21 * 60)
    upto = [s for lvl in levels[: depth + 1] for s in lvl]
    home = rng.choice(levels[depth])
    at = start - rng.randint(8, 110)
    plan = [(home, at)]
    decoys = [k for k in HEADS_UP if rng.random() < (0.9 if depth == 2 else 0.6)]
    if "after" in decoys:
        plan.append((rng.choice(upto), start + rng.randint(0, 30)))
    if "older" in decoys:
        plan.append((rng.choice(upto), start - rng.randint(WINDOW + 5, 360)))
        if at - 2 > start - WINDOW:
            plan.append((rng.choice(levels[depth]), rng.randint(start - WINDOW, at - 2)))
    if "callers" in decoys:
        plan.append((rng.choice(callers), rng.randint(at + 1, start - 1)))
    numbers = rng.sample(range(1000, 100000), len(plan))
    deploys = [{"id": f"D-{n}", "service": s, "at": hhmm(t),
                "author": rng.choice([p for p in PEOPLE if p != owner[s]])} for (s, t), n in zip(plan, numbers)]
    answer = f"{deploys[0]['id']}, {owner[home]}"
    rng.shuffle(deploys)
    incident = f"INC-{rng.randint(100, 99999)}"
    world = {
        "services": {s: {"owner": owner[s], "depends_on": deps[s]} for s in deps},
        "incidents": {incident: {"service": root, "started_at": hhmm(start), "symptom": rng.choice(SYMPTOMS)}},
        "deploys": deploys,
    }
    heads_up = "; ".join(HEADS_UP[k] for k in HEADS_UP if k in decoys) or "nothing unusual in the deploy log"
    prompt = (
        f"Incident {incident} just paged you. Which deploy caused it, and who owns the service it went to?\n"
        f"First responder: {RESPONDER[depth]}\n"
        f"Heads-up from the incident channel: {heads_up}.\n"
        "Name the owner of the culprit deploy's service, not the deploy's author. "
        "Finish with `Answer: <deploy id>, <owner>`."
    )
    return prompt, world, answer


def find_culprit(world: dict, incident_id: str) -> str | None:
    """The runbook applied to a world: the gold check of `validate`."""
    incident = world["incidents"][incident_id]
    start, level, seen = mins(incident["started_at"]), [incident["service"]], {incident["service"]}
    while level:
        hits = [d for d in world["deploys"] if d["service"] in level and start - WINDOW <= mins(d["at"]) < start]
        if hits:
            best = max(hits, key=lambda d: mins(d["at"]))
            return f"{best['id']}, {world['services'][best['service']]['owner']}"
        below = [c for s in level for c in world["services"][s]["depends_on"] if c not in seen]
        level = list(dict.fromkeys(below))
        seen.update(level)
    return None


ANSWER = re.compile(r"answer\s*:(.*)", re.IGNORECASE)


def graded(reply: str, answer: str) -> bool:
    """Exact match on the last `Answer:` line: one deploy id, the right one, and the owner."""
    found = last_match(ANSWER, reply)
    if found is None:
        return False
    line = " ".join(found.split()).lower()
    deploy, owner = (p.strip().lower() for p in answer.split(",", 1))
    return set(re.findall(r"\bd-\d+\b", line)) == {deploy} and re.search(rf"\b{re.escape(owner)}\b", line) is not None


class IncidentData(vf.TaskData):
    answer: str
    world: dict = {}


class IncidentTaskConfig(vf.TaskConfig):
    tools: vf.ToolsetConfig = vf.ToolsetConfig()


class IncidentTask(vf.Task[IncidentData, vf.State, IncidentTaskConfig]):
    @classmethod
    def toolsets(cls, config: IncidentTaskConfig) -> list[vf.Toolset]:
        return [TriageToolset(config.tools)]

    @vf.reward(weight=1.0)
    async def exact_answer(self, trace: vf.Trace) -> float:
        return float(graded(trace.last_reply or "", self.data.answer))

    @vf.metric
    async def tool_calls(self, trace: vf.Trace) -> float:
        return float(len(trace.tool_messages))

    async def validate(self, runtime) -> bool:
        incident = re.search(r"INC-\d+", self.data.prompt_text).group(0)
        return find_culprit(self.data.world, incident) == self.data.answer


class IncidentConfig(vf.TasksetConfig):
    seed: int = 11
    num_tasks: int = 2000
    task: IncidentTaskConfig = IncidentTaskConfig()


class IncidentTaskset(vf.Taskset[IncidentTask, IncidentConfig]):
    def load(self) -> list[IncidentTask]:
        rng = random.Random(self.config.seed)
        tasks = []
        for _ in range(self.config.num_tasks):
            prompt, world, answer = make_page(rng)
            tasks.append(IncidentTask(IncidentData(prompt=prompt, system_prompt=SYSTEM, answer=answer, world=world),
                                      self.config.task))
        return tasks
