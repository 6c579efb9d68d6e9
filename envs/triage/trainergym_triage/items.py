"""triage items: name the deploy that caused an incident and the owner of the service it hit.

Pure Python (no verifiers import) so the trainergym library can generate, check and solve
items in its own process without paying the verifiers import.

Each item is a small on-call world: services (owner, dependencies), one incident (service,
start time, symptom) and a deploy log. The prompt names only the incident id, so every fact
comes through the ops tools. The runbook rule (stated in every prompt): only a deploy in the
`WINDOW_MINUTES` before the incident started can be the cause; look at the incident's own
service first, then its dependencies, then theirs; the culprit is the most recent deploy in
the window at the nearest level. Decoys make the shortcuts wrong: releases just after the
start, older releases, and releases on services that call the incident's service.
"""

from __future__ import annotations

import json
import random
import re

from trainergym_kit.answers import after_think
from trainergym_kit.items import seeded_items, strict

from trainergym_triage.ops import _service_key, get_incident, get_service, list_deploys, minutes  # noqa: F401  (re-exported)

WINDOW_MINUTES = 120
LEVEL_TAGS = {1: "direct_deploy", 2: "dependency_deploy", 3: "two_level_dependency"}
DECOY_TAGS = ("decoy_after_start", "decoy_older", "unrelated_service")
SKILL_TAGS = (*LEVEL_TAGS.values(), *DECOY_TAGS, "owner_lookup")
# Difficulty knob: the dependency depth of the culprit is level - 1; each decoy kind appears
# with this probability (at least one always does; level 3 always has all three).
DECOY_ODDS = {1: 0.5, 2: 0.6, 3: 1.0}
DIFFICULTY_LEVELS = tuple(LEVEL_TAGS)

ANSWER_FORMAT = (
    "Finish with a line `Answer: <deploy id>, <owner>` naming the culprit deploy (like D-1234) and the "
    "owner of the service that deploy went to."
)
RUNBOOK = (
    f"Runbook: only a deploy in the {WINDOW_MINUTES // 60} hours before the incident started can be the cause; "
    "a deploy at or after the start cannot. Check the incident's own service first. If it had no deploy in "
    "that window, check the services it depends on; if none of those did either, check their dependencies. "
    "The culprit is the most recent deploy in the window at the nearest level."
)
# How the prompt states what the first responder saw (the level) and the decoys present (hints
# for the model; `skills` reads the level and the decoys off the world itself).
RESPONDER = {
    1: "the incident's own service was deployed recently.",
    2: "the incident's own service has been quiet; suspect one of its direct dependencies.",
    3: "the incident's service and its direct dependencies have been quiet; suspect a dependency of a dependency.",
}
HEADS_UP = {
    "decoy_after_start": "a release went out just after the incident started",
    "decoy_older": "older releases are in the deploy log too",
    "unrelated_service": "services that call this one (they are not its dependencies) shipped during the window",
}
QUIET = "nothing unusual in the deploy log"

SERVICES = (
    "checkout", "payments", "cart", "inventory", "auth", "search", "catalog", "notifications", "gateway",
    "billing", "orders", "shipping", "pricing", "recommendations", "sessions", "email", "ledger",
    "fraud-check", "user-profile", "media", "reviews", "coupons", "geo", "feature-flags",
)
PEOPLE = (
    "Priya Natarajan", "Tom Becker", "Ana Lima", "Kwame Mensah", "Sofia Rossi", "Jonas Berg", "Mei Chen",
    "Diego Alvarez", "Fatima Khan", "Lars Nilsson", "Aisha Bello", "Ravi Iyer", "Elena Petrova", "Sam Ortiz",
    "Hana Sato", "Omar Haddad", "Grace Okafor", "Luca Moretti", "Nina Kowalski", "Ben Carter",
)
# Symptom templates; the page quotes one, so prompts vary beyond the incident id.
SYMPTOMS = (
    ("p99 latency at {:.1f} s", 1.5, 9.0), ("5xx error rate at {:.0f}%", 3, 40), ("{:.0f}% of logins failing", 5, 60),
    ("{:.0f}k messages backed up in the queue", 10, 500), ("{:.0f} OOM kills in ten minutes", 3, 50),
    ("{:.0f}% of requests timing out", 2, 30),
)


def clock(total: int) -> str:
    return f"{total // 60:02d}:{total % 60:02d}"


# --- generation


def _dependency_tree(rng: random.Random, names: list[str], level: int) -> tuple[str, list[list[str]], dict]:
    """The incident's service, its dependency levels [[root], deps, deps of deps] and depends_on."""
    root = names.pop()
    first = [names.pop() for _ in range(rng.randint(1, 2))]
    depends_on = {root: list(first), **{s: [] for s in first}}
    second: list[str] = []
    for i, parent in enumerate(first):
        wanted = rng.randint(1, 2) if level == 3 and i == 0 else rng.randint(0, 1)
        for _ in range(min(wanted, 3 - len(second))):
            child = names.pop()
            depends_on[parent].append(child)
            depends_on[child] = []
            second.append(child)
    return root, [[root], first, second], depends_on


def make_item(rng: random.Random, item_id: str, level: int) -> dict:
    names = rng.sample(SERVICES, len(SERVICES))
    root, levels, depends_on = _dependency_tree(rng, names, level)
    callers = [names.pop() for _ in range(rng.randint(1, 2))]
    for caller in callers:
        depends_on[caller] = [root] + ([levels[1][0]] if rng.random() < 0.5 else [])
    owners = dict(zip(depends_on, rng.sample(PEOPLE, len(depends_on))))
    start = rng.randint(9 * 60, 20 * 60)
    searched = [s for lvl in levels[:level] for s in lvl]  # every level up to the culprit's
    culprit_service = rng.choice(levels[level - 1])
    culprit_at = start - rng.randint(10, 100)

    decoys = [t for t in DECOY_TAGS if rng.random() < DECOY_ODDS[level]] or [rng.choice(DECOY_TAGS)]
    plan = [(culprit_service, culprit_at)]  # (service, minute); the culprit comes first
    if "decoy_after_start" in decoys:
        plan.append((rng.choice(searched), start + rng.randint(1, 25)))
    if "decoy_older" in decoys:  # before the window on a searched service, sometimes also inside it
        plan.append((rng.choice(searched), start - rng.randint(WINDOW_MINUTES + 15, 300)))
        if rng.random() < 0.5:
            plan.append((rng.choice(levels[level - 1]), rng.randint(start - WINDOW_MINUTES + 5, culprit_at - 3)))
    if "unrelated_service" in decoys:  # newer than the culprit, inside the window, on a caller
        plan.append((rng.choice(callers), rng.randint(culprit_at + 1, start - 1)))

    ids = rng.sample(range(1000, 10000), len(plan))
    deploys = []
    for k, ((service, at), number) in enumerate(zip(plan, ids)):
        author = rng.choice([p for p in PEOPLE if k or p != owners[service]])  # the culprit's author is not the owner
        deploys.append({"id": f"D-{number}", "service": service, "at": clock(at), "author": author})
    culprit = deploys[0]
    deploys.sort(key=lambda d: minutes(d["at"]))

    incident_id = f"INC-{rng.randint(100000, 999999)}"
    template, low, high = rng.choice(SYMPTOMS)
    symptom = template.format(round(rng.uniform(low, high), 1))
    world = {
        "services": {s: {"owner": owners[s], "depends_on": deps} for s, deps in depends_on.items()},
        "incidents": {incident_id: {"service": root, "started_at": clock(start), "symptom": symptom}},
        "deploys": deploys,
    }
    skills = sorted({LEVEL_TAGS[level], "owner_lookup", *decoys})
    return {
        "id": item_id,
        "prompt": render_prompt(incident_id, symptom, level, decoys),
        "answer": f"{culprit['id']}, {owners[culprit_service]}",
        "skills": skills,
        "difficulty": level,
        "world": world,
    }


def render_prompt(incident_id: str, symptom: str, level: int, decoys: list[str]) -> str:
    heads_up = "; ".join(HEADS_UP[t] for t in DECOY_TAGS if t in decoys) or QUIET
    return "\n".join([
        f"You are on call and incident {incident_id} just paged you ({symptom}). Find the deploy that most likely "
        "caused it and the owner of the service that deploy went to.",
        RUNBOOK,
        f"First responder: {RESPONDER[level]}",
        f"Heads-up from the incident channel: {heads_up}.",
        "Name the owner of the service the culprit deploy went to, not the deploy's author. Use the ops tools "
        "to look up the incident, its services and their deploys. " + ANSWER_FORMAT,
    ])


def generate(seed: int | str, n: int, namespace: str = "public", difficulty: int | None = None) -> list[dict]:
    """`n` items for `seed`. Each item draws from its own RNG keyed by (namespace, seed, index),
    so namespaces never share an item stream and item k is the same whatever `n` is. With no
    `difficulty`, levels mix 30/40/30 (1/2/3)."""
    return seeded_items("triage", seed, n, namespace, difficulty, make_item)


# --- checking


_DEPLOY_ID = re.compile(r"\bD-(\d+)\b", re.IGNORECASE)
_ANSWER = re.compile(r"answer\s*:", re.IGNORECASE)


def answer_line(reply: str) -> str:
    """The text after the last `Answer:` (on its line, or the next non-empty line when that is
    blank), looking only after the last `</think>` so reasoning drafts are never graded."""
    reply = after_think(reply)
    found = list(_ANSWER.finditer(reply))
    if not found:
        return ""
    lines = reply[found[-1].end():].split("\n")
    return lines[0].strip() or next((line.strip() for line in lines[1:] if line.strip()), "")


def check(reply: str, answer: str) -> bool:
    """True iff the last `Answer:` line names exactly one deploy id (`D-<digits>`, any case),
    the right one, and contains the owner's name as whole words (case-insensitive, runs of
    whitespace collapsed). Hedging between several deploy ids fails."""
    line = answer_line(reply)
    want_id, _, want_owner = answer.partition(",")
    ids = {int(m) for m in _DEPLOY_ID.findall(line)}
    if ids != {int(_DEPLOY_ID.search(want_id).group(1))}:
        return False
    owner = " ".join(want_owner.split()).casefold()
    text = " ".join(line.split()).casefold()
    return bool(owner) and re.search(rf"(?<!\w){re.escape(owner)}(?!\w)", text) is not None


# --- the reference solver and the distractors


# What the checker reads (see READ_FORM in family.py): the prompt names one incident
# (`INC-<digits>`); the world (format in WORLD) holds it, its services and the deploy log, and
# the runbook finds the culprit within MAX_DEPTH dependency levels of the incident's service.
MAX_DEPTH = len(LEVEL_TAGS) - 1
_INCIDENT = re.compile(r"\bINC-\d+")
_CLOCK = re.compile(r"([01]\d|2[0-3]):[0-5]\d")
_DEPLOY = re.compile(r"D-\d{1,30}")


def _text(value) -> bool:
    return isinstance(value, str) and bool(value.strip())


def check_world(world) -> None:
    """ValueError unless `world` is an on-call world in the family's format (see WORLD): services
    with owners and dependencies that exist, incidents on known services with HH:MM start times,
    and deploys with distinct `D-<digits>` ids on known services at HH:MM times."""
    if not isinstance(world, dict) or not isinstance(world.get("services"), dict) \
            or not isinstance(world.get("incidents"), dict) or not isinstance(world.get("deploys"), list):
        raise ValueError('the world must be {"services": {...}, "incidents": {...}, "deploys": [...]}')
    services = world["services"]
    if len({name.lower() for name in services if isinstance(name, str)}) != len(services):
        raise ValueError("service names must be distinct strings (case-insensitively)")
    for name, info in services.items():
        if not _text(name) or not isinstance(info, dict) or not _text(info.get("owner")) \
                or not isinstance(info.get("depends_on"), list) \
                or not all(isinstance(d, str) and d in services for d in info["depends_on"]):
            raise ValueError(f'service {name!r} needs an "owner" and "depends_on": [names of services in the world]')
    for key, incident in world["incidents"].items():
        if not isinstance(incident, dict) or incident.get("service") not in services \
                or not isinstance(incident.get("started_at"), str) or not _CLOCK.fullmatch(incident["started_at"]):
            raise ValueError(f'incident {key!r} needs a "service" of the world and "started_at": "HH:MM"')
    ids = set()
    for deploy in world["deploys"]:
        if not isinstance(deploy, dict) or not isinstance(deploy.get("id"), str) or not _DEPLOY.fullmatch(deploy["id"]) \
                or deploy.get("service") not in services or not isinstance(deploy.get("at"), str) \
                or not _CLOCK.fullmatch(deploy["at"]) or not isinstance(deploy.get("author"), str):
            raise ValueError(f'every deploy needs an "id" D-<digits>, a "service" of the world, "at": "HH:MM" and '
                             f'an "author": {str(deploy)[:200]}')
        number = int(deploy["id"][2:])  # ids compare as numbers, as `check` compares them
        if number in ids:
            raise ValueError(f"two deploys share the id {deploy['id']}")
        ids.add(number)


def _read(item: dict) -> dict:
    """The runbook applied to an item, through the ops tools only: the incident, then each
    level's deploys until one falls in the window, then the culprit service's owner. Returns the
    reference calls, the answer and what `skills` needs; ValueError when the family cannot read
    the item (no single incident id in the prompt; the world missing, malformed, without that
    incident, or without a single latest deploy in the window within MAX_DEPTH levels)."""
    if not isinstance(item, dict):
        raise ValueError("an item is a dict")
    prompt, world = item["prompt"], item.get("world")
    if not isinstance(prompt, str):
        raise ValueError("the prompt is not a string")
    named = {m.group(0).upper() for m in _INCIDENT.finditer(prompt)}
    if len(named) != 1:
        raise ValueError("the prompt must name exactly one incident, as INC-<digits>")
    check_world(world)
    calls = []

    def call(name: str, tool, arg_name: str, arg: str) -> dict | list:
        result = tool(world, arg)
        calls.append({"tool": f"ops_{name}", "arguments": {arg_name: arg}, "result": result})
        if result.startswith("error:"):
            raise ValueError(f"the world does not answer the runbook: {result}")
        return json.loads(result)

    incident_id = _INCIDENT.search(prompt).group(0)
    incident = call("get_incident", get_incident, "incident_id", incident_id)
    start = minutes(incident["started_at"])
    level, seen, services, searched = [incident["service"]], {incident["service"]}, {}, []
    for depth in range(MAX_DEPTH + 1):
        searched += level
        in_window = []
        for service in level:
            for d in call("list_deploys", list_deploys, "service", service):
                if start - WINDOW_MINUTES <= minutes(d["at"]) < start:
                    in_window.append((minutes(d["at"]), d["id"], service))
        if in_window:
            at, deploy_id, service = max(in_window)
            if sum(1 for t, _, _ in in_window if t == at) > 1:
                raise ValueError("two deploys tie for the most recent in the window")
            owner = (services.get(service) or call("get_service", get_service, "service", service))["owner"]
            return {"calls": calls, "answer": f"{deploy_id}, {owner}", "depth": depth, "start": start,
                    "culprit": (at, deploy_id), "searched": searched}
        next_level = []
        for service in level:
            services[service] = call("get_service", get_service, "service", service)
            for dependency in services[service]["depends_on"]:
                if dependency not in seen:
                    seen.add(dependency)
                    next_level.append(dependency)
        level = next_level
    raise ValueError(f"no deploy in the window within {MAX_DEPTH} dependency levels of the incident's service")


def _closure(world: dict, root: str) -> set[str]:
    """`root` and every service it depends on, directly or not."""
    closure, frontier = {root}, [root]
    while frontier:
        frontier = list(dict.fromkeys(d for s in frontier for d in world["services"][s]["depends_on"] if d not in closure))
        closure |= set(frontier)
    return closure


_strict = strict("triage")


@_strict
def solve(item: dict) -> dict:
    """The runbook, level by level, through the ops tools only: the incident, then each
    level's deploys until one falls in the window, then the culprit service's owner;
    ValueError when the family cannot read the item."""
    found = _read(item)
    return {"calls": found["calls"], "reply": f"Answer: {found['answer']}"}


@_strict
def skills(row: dict) -> set[str]:
    """The item's skill tags, read off its world by the family's own solver (equal to the
    generator's `skills` on generated items): the culprit's dependency level; `decoy_after_start`
    if a searched service has a deploy at or after the start, `decoy_older` if one has a deploy
    older than the culprit, `unrelated_service` if a service outside the incident service's
    dependencies has one in the window; always `owner_lookup`. ValueError when the family cannot
    read the item (see READ_FORM)."""
    found = _read(row)
    world, start, (culprit_at, culprit_id) = row["world"], found["start"], found["culprit"]
    closure = _closure(world, found["searched"][0])
    searched = set(found["searched"])
    tags = {LEVEL_TAGS[found["depth"] + 1], "owner_lookup"}
    for d in world["deploys"]:
        at = minutes(d["at"])
        if d["service"] in searched and at >= start:
            tags.add("decoy_after_start")
        if d["service"] in searched and at < culprit_at and d["id"] != culprit_id:
            tags.add("decoy_older")
        if d["service"] not in closure and start - WINDOW_MINUTES <= at < start:
            tags.add("unrelated_service")
    return tags


@_strict
def distractors(item: dict) -> list[dict]:
    """Plausible wrong answers, each labelled by the mistake that produces it."""
    _read(item)
    world = item["world"]
    culprit_id, _, owner = (p.strip() for p in item["answer"].partition(","))
    (incident,) = world["incidents"].values()
    start, root = minutes(incident["started_at"]), incident["service"]
    owners = {s: info["owner"] for s, info in world["services"].items()}
    deploys = {d["id"]: d for d in world["deploys"]}
    culprit = deploys[culprit_id]
    closure = _closure(world, root)
    after = [d for d in world["deploys"] if minutes(d["at"]) >= start and d["service"] in closure]
    own_before = [d for d in world["deploys"] if d["service"] == root and minutes(d["at"]) < start and d is not culprit]
    older = own_before or [d for d in world["deploys"] if d["service"] in closure and minutes(d["at"]) < minutes(culprit["at"])]
    unrelated = [d for d in world["deploys"] if d["service"] not in closure and minutes(d["at"]) < start]
    candidates = [
        ("deploy_after_start", after[0] if after else None),
        ("stale_deploy", older[-1] if older else None),
        ("unrelated_service", unrelated[-1] if unrelated else None),
    ]
    pairs = [(kind, d["id"], owners[d["service"]]) for kind, d in candidates if d]
    pairs += [("wrong_owner", culprit_id, owners[root]), ("deploy_author", culprit_id, culprit["author"])]
    out = [{"kind": kind, "reply": f"Answer: {deploy_id}, {name}"} for kind, deploy_id, name in pairs]
    return [d for d in out if not check(d["reply"], item["answer"])]
