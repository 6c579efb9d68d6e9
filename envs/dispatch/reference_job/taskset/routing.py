"""Training data and reward for dispatch.

The generator is written here rather than taken from the family so the job controls its
mix: more tickets where capacity matters (the eval's hardest and most error-prone cases),
overflow chains of up to three hops, and tickets that satisfy part of an earlier rule so a
careless reading picks the wrong team. Worlds use the eval's format, because the eval
toolset reads them from each task's `world` field.
"""

import random
import re

import verifiers.v1 as vf
from trainergym_dispatch.toolset import DispatchToolset
from trainergym_kit.answers import last_match

SYSTEM = (
    "You route support tickets with the dispatch tools. Look up the ticket first, then the routing "
    "rules of its category and apply them in order: the first rule whose conditions all hold wins, "
    "else the default. When teams may be at capacity, check the chosen team and follow its overflow "
    "team in turn until one is available. Never guess a fact you did not look up. Finish with a line "
    "`Answer: <team name>`."
)
REGIONS = ("EU", "NA", "APAC", "LATAM")
TIERS = ("gold", "silver", "bronze")
QUEUES = {
    "billing": ["billing-core", "refunds-desk", "billing-vip", "payments-eu", "invoicing", "collections", "chargebacks"],
    "outage": ["noc-primary", "sre-oncall", "incident-command", "platform-emea", "network-ops", "status-desk"],
    "account": ["accounts-core", "identity-desk", "vip-concierge", "access-recovery", "onboarding", "sso-support"],
    "shipping": ["logistics-core", "carrier-escalations", "returns-desk", "freight-eu", "last-mile", "customs-desk"],
    "security": ["trust-safety", "fraud-desk", "secops-l2", "abuse-response", "compliance", "soc-night"],
    "product": ["product-feedback", "feature-requests", "beta-desk", "docs-desk", "ux-research"],
}
SPARE = ["general-support", "overflow-desk", "follow-the-sun", "backlog-crew", "weekend-rota", "swing-shift", "reserve-desk"]
FIELD_WORDS = {"priority": "priority", "region": "region", "customer_tier": "customer tier"}


def condition(rng: random.Random, field: str) -> list:
    if field == "priority":
        return ["priority", rng.choice([">=", "<="]), rng.randint(2, 4)]
    if field == "region":
        return ["region", rng.choice(["==", "==", "!="]), rng.choice(REGIONS)]
    op = rng.choice(["==", "in"])
    return ["customer_tier", op, rng.choice(TIERS) if op == "==" else rng.sample(TIERS, 2)]


def holds(ticket: dict, field: str, op: str, value) -> bool:
    have = ticket[field]
    return {">=": lambda: have >= value, "<=": lambda: have <= value, "==": lambda: have == value,
            "!=": lambda: have != value, "in": lambda: have in value}[op]()


def first_team(ticket: dict, rules: list[dict]) -> str:
    return next(r["team"] for r in rules if all(holds(ticket, *c) for c in r["if"]))


def final_team(world: dict, ticket_id: str) -> str:
    """The gold answer, recomputed from the world: first matching rule, then overflow."""
    ticket = world["tickets"][ticket_id]
    team = first_team(ticket, world["rules"][ticket["category"]])
    for _ in range(len(world["teams"])):
        if world["teams"][team]["status"] != "at capacity":
            break
        team = world["teams"][team]["overflow"]
    return team


def make_rules(rng: random.Random, queue: str, level: int) -> list[dict]:
    teams = rng.sample(QUEUES[queue], rng.randint(3, 2 + level))
    rules = [{"if": [condition(rng, f) for f in rng.sample(sorted(FIELD_WORDS), rng.randint(1, min(level, 2)))],
              "team": t} for t in teams[:-1]]
    return rules + [{"if": [], "team": teams[-1]}]


def random_ticket(rng: random.Random, queue: str) -> dict:
    return {"category": queue, "priority": rng.randint(1, 5), "region": rng.choice(REGIONS),
            "customer_tier": rng.choice(TIERS), "channel": rng.choice(["email", "chat", "phone", "web form"])}


def make_task(rng: random.Random, level: int) -> tuple[str, dict, str]:
    """(prompt, world, answer). Level 1: every team free; 2: capacity matters, chosen team
    free; 3: the chosen team is full and the ticket overflows one to three times."""
    queues = rng.sample(sorted(QUEUES), rng.randint(2, 3))
    rules = {q: make_rules(rng, q, level) for q in queues}
    ids = rng.sample(range(1000, 10000), rng.randint(3, 5))
    tickets = {f"T-{i}": random_ticket(rng, rng.choice(queues)) for i in ids}
    ticket_id = f"T-{ids[0]}"
    tickets[ticket_id] = random_ticket(rng, queues[0])
    mine, queue_rules = tickets[ticket_id], rules[queues[0]]
    want_near_miss = level > 1 and rng.random() < 0.6  # part of an earlier rule holds
    for _ in range(30):
        matched = next(i for i, r in enumerate(queue_rules) if all(holds(mine, *c) for c in r["if"]))
        if not want_near_miss or any(holds(mine, *c) for r in queue_rules[:matched] for c in r["if"]):
            break
        mine.update(random_ticket(rng, queues[0]))
    chosen = queue_rules[matched]["team"]
    spare = rng.sample(SPARE, len(SPARE))
    hops = rng.choice([1, 1, 2, 2, 3]) if level == 3 else 0
    chain = [chosen] + spare[:hops]
    busy = set(chain[:-1])
    if level > 1:
        busy |= set(rng.sample([r["team"] for r in queue_rules if r["team"] != chosen], 1))
    free_spares = [s for s in spare if s not in busy and s not in chain]
    teams = {}
    for team in [r["team"] for q in queues for r in rules[q]] + SPARE:
        overflow = chain[chain.index(team) + 1] if team in chain[:-1] else rng.choice([s for s in free_spares if s != team])
        teams[team] = {"status": "at capacity" if team in busy else "available", "overflow": overflow}
    world = {"tickets": dict(sorted(tickets.items())), "rules": rules, "teams": teams}
    fields = [w for f, w in FIELD_WORDS.items() if any(c[0] == f for r in queue_rules for c in r["if"])]
    capacity = ("Every team has capacity today, so the first matching rule decides." if level == 1 else
                "Some teams are at capacity today: a full team passes the ticket to its overflow team, "
                "and you check that team the same way, in turn, until one is available.")
    prompt = (f"Route ticket {ticket_id}: which team must handle it? {capacity} "
              f"Its queue's routing rules look at {' and '.join(fields)}; the first rule that matches wins, "
              "otherwise the default rule applies. Use the dispatch tools to look up the facts.")
    return prompt, world, final_team(world, ticket_id)


def team_key(text: str) -> str:
    text = re.sub(r"^(the\s+)?(team\s+)?", "", text.strip().strip("*`'\"").rstrip(".").strip(), flags=re.I)
    return re.sub(r"[\s_-]+", "-", text.lower()).strip("-")


ANSWER = re.compile(r"answer[\s*]*:[ \t*`]*(.+)", re.IGNORECASE)


def final_answer(reply) -> str | None:
    """The team on the last `Answer:` line after any thinking, normalised; None if absent."""
    found = last_match(ANSWER, reply)
    return (team_key(found) or None) if found is not None else None


class RoutingData(vf.TaskData):
    answer: str
    world: dict = {}
    level: int = 1


class RoutingTaskConfig(vf.TaskConfig):
    tools: vf.ToolsetConfig = vf.ToolsetConfig()


class RoutingTask(vf.Task[RoutingData, vf.State, RoutingTaskConfig]):
    @classmethod
    def toolsets(cls, config: RoutingTaskConfig) -> list[vf.Toolset]:
        return [DispatchToolset(config.tools)]

    @vf.reward(weight=1.0)
    async def right_team(self, trace: vf.Trace) -> float:
        return float(final_answer(trace.last_reply) == team_key(self.data.answer))

    @vf.metric
    async def tool_calls(self, trace: vf.Trace) -> float:
        return float(len(trace.tool_messages))

    async def validate(self, runtime) -> bool:
        ticket_id = re.search(r"Route ticket (T-\d+)", self.data.prompt_text).group(1)
        return final_team(self.data.world, ticket_id) == self.data.answer


class RoutingConfig(vf.TasksetConfig):
    seed: int = 11
    num_tasks: int = 2000
    task: RoutingTaskConfig = RoutingTaskConfig()


class RoutingTaskset(vf.Taskset[RoutingTask, RoutingConfig]):
    def load(self) -> list[RoutingTask]:
        rng = random.Random(self.config.seed)
        tasks = []
        for _ in range(self.config.num_tasks):
            level = rng.choices((1, 2, 3), weights=(2, 3, 5))[0]
            prompt, world, answer = make_task(rng, level)
            data = RoutingData(prompt=prompt, system_prompt=SYSTEM, answer=answer, world=world, level=level)
            tasks.append(RoutingTask(data, self.config.task))
        return tasks
