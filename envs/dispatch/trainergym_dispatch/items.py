"""dispatch items: route a support ticket under ordered rules that live only in the world.

Pure Python (no verifiers import) so the trainergym library can generate, check and
solve items in its own process without paying the verifiers import.

An item's world holds tickets, per-category routing rules and teams. The prompt names only
the ticket id, so every fact is a tool call away, and each call needs the previous one's
output: the ticket gives the category, the category's rules give the team, the team's
record gives its status and overflow team.
"""

from __future__ import annotations

import itertools
import random
import re

from trainergym_kit.answers import last_match
from trainergym_kit.items import seeded_items, strict

from trainergym_dispatch.desk import (  # noqa: F401  (the tools' logic; re-exported for the library and tests)
    _condition_text, _ticket_key, get_rules, get_team, get_ticket, team_key,
)

REGIONS = ("EU", "NA", "APAC", "LATAM")
TIERS = ("gold", "silver", "bronze")
CHANNELS = ("email", "chat", "phone", "web form")
# Team names are unique across categories, none starts or ends with the word "team".
CATEGORY_TEAMS = {
    "billing": ("billing-core", "refunds-desk", "billing-vip", "payments-eu", "invoicing", "collections"),
    "outage": ("noc-primary", "sre-oncall", "incident-command", "platform-emea", "network-ops", "status-desk"),
    "account": ("accounts-core", "identity-desk", "vip-concierge", "access-recovery", "onboarding", "account-apac"),
    "shipping": ("logistics-core", "carrier-escalations", "returns-desk", "freight-eu", "last-mile", "customs-desk"),
    "security": ("trust-safety", "fraud-desk", "secops-l2", "abuse-response", "compliance", "soc-night"),
}
OVERFLOW_POOL = ("general-support", "overflow-desk", "follow-the-sun", "backlog-crew", "weekend-rota")
AT_CAPACITY, AVAILABLE = "at capacity", "available"

# Difficulty knobs: (min rules, max rules, max clauses per rule, overflow steps lo, hi).
# Rule counts include the final `else`. Level 1: ticket + rules (2 calls), every team free;
# level 2: + a team check (3 calls); level 3: + an overflow chain (4-5 calls).
DIFFICULTY = {1: (3, 3, 1, 0, 0), 2: (3, 4, 2, 0, 0), 3: (3, 5, 2, 1, 2)}
DIFFICULTY_LEVELS = tuple(DIFFICULTY)
FIELD_SKILLS = {"priority": "priority_condition", "region": "region_condition", "customer_tier": "tier_condition"}
SKILL_TAGS = ("rule_match", "default_rule", *FIELD_SKILLS.values(), "overflow", "double_overflow")

ANSWER_FORMAT = "Finish with a line `Answer: <team name>`, the team's name as the tools spell it."
_FIELD_WORDS = {"priority": "priority", "region": "region", "customer_tier": "customer tier"}
_CONTEXT = (
    "It has been sitting unassigned in the shared inbox.",
    "The dispatcher on shift wants a second opinion.",
    "It was reopened after an earlier handoff went nowhere.",
    "A supervisor wants it assigned before the hour is up.",
    "The customer has already written twice.",
)
_CUSTOMERS = ("Northwind", "Globex", "Initech", "Hooli", "Vandelay Imports", "Wayne Freight", "Soylent", "Cyberdyne",
              "Umbrella Foods", "Wonka Retail", "Tyrell Systems", "Acme Outdoors", "Pied Piper", "Oscorp", "Massive Dynamic")
_ALL_FREE = "Every team has capacity today, so the first routing rule that matches the ticket decides."
_CAPACITY = ("Some teams are at capacity today: the team the first matching rule names takes the ticket only "
             "if it is available; otherwise pass the ticket to that team's overflow team and check that one the same way.")


# --- routing semantics ----------------------------------------------------------------

def holds(ticket: dict, condition) -> bool:
    """One condition on a ticket; values may be typed (the world) or text (parsed tool output)."""
    field, op, value = condition
    have = ticket[field]
    if op in (">=", "<="):
        return int(have) >= int(value) if op == ">=" else int(have) <= int(value)
    if op == "in":
        return str(have) in [str(v) for v in value]
    return (str(have) == str(value)) == (op == "==")


def first_match(ticket: dict, rules: list[dict]) -> int:
    return next(i for i, rule in enumerate(rules) if all(holds(ticket, c) for c in rule["if"]))


def route(world: dict, ticket_id: str) -> tuple[list[dict], int, list[str]]:
    """(the category's rules, the index of the first matching rule, the chain of teams from
    the matched team through overflow to the first available one)."""
    ticket = world["tickets"][ticket_id]
    rules = world["rules"][ticket["category"]]
    matched = first_match(ticket, rules)
    chain = [rules[matched]["team"]]
    while world["teams"][chain[-1]]["status"] == AT_CAPACITY and len(chain) <= len(world["teams"]):
        chain.append(world["teams"][chain[-1]]["overflow"])
    return rules, matched, chain


# --- generation -----------------------------------------------------------------------

def _condition(rng: random.Random, field: str) -> list:
    if field == "priority":
        return ["priority", ">=", rng.randint(3, 5)] if rng.random() < 0.6 else ["priority", "<=", rng.randint(1, 3)]
    if field == "region":
        return ["region", rng.choice(("==", "==", "!=")), rng.choice(REGIONS)]
    if rng.random() < 0.6:
        return ["customer_tier", "==", rng.choice(TIERS)]
    return ["customer_tier", "in", sorted(rng.sample(TIERS, 2), key=TIERS.index)]


def _rules(rng: random.Random, category: str, n_rules: int, max_clauses: int) -> list[dict]:
    teams = rng.sample(CATEGORY_TEAMS[category], n_rules)
    rules = []
    for team in teams[:-1]:
        fields = rng.sample(sorted(FIELD_SKILLS), rng.randint(1, max_clauses))
        rules.append({"if": [_condition(rng, f) for f in sorted(fields, key=list(FIELD_SKILLS).index)], "team": team})
    return rules + [{"if": [], "team": teams[-1]}]


def _ticket(rng: random.Random, category: str, rules: list[dict], target: int, near_miss: bool) -> dict | None:
    """A ticket whose first matching rule is `target`; with `near_miss`, prefer one that
    meets some but not all conditions of an earlier rule (the trap a careless reader falls in)."""
    fits, traps = [], []
    for priority, region, tier in itertools.product(range(1, 6), REGIONS, TIERS):
        ticket = {"category": category, "priority": priority, "region": region, "customer_tier": tier}
        if first_match(ticket, rules) == target:
            fits.append(ticket)
            if any(any(holds(ticket, c) for c in r["if"]) for r in rules[:target]):
                traps.append(ticket)
    pool = traps if near_miss and traps else fits
    return dict(rng.choice(pool), channel=rng.choice(CHANNELS)) if pool else None


def make_world(rng: random.Random, level: int) -> tuple[dict, str]:
    """(world, the id of the ticket to route) for one item of `level`."""
    lo, hi, max_clauses, chain_lo, chain_hi = DIFFICULTY[level]
    categories = rng.sample(sorted(CATEGORY_TEAMS), rng.randint(2, 3))
    category = categories[0]
    while True:
        rules = _rules(rng, category, rng.randint(lo, hi), max_clauses)
        ticket = _ticket(rng, category, rules, rng.randrange(len(rules)), near_miss=level > 1)
        if ticket:
            break
    world_rules = {category: rules}
    for other in categories[1:]:
        world_rules[other] = _rules(rng, other, rng.randint(lo, hi), max_clauses)
    ticket_id, *others = (f"T-{n}" for n in rng.sample(range(1000, 10000), rng.randint(3, 5)))
    tickets = {ticket_id: ticket}
    for other in others:  # the rest of the queue
        tickets[other] = {"category": rng.choice(categories), "priority": rng.randint(1, 5), "region": rng.choice(REGIONS),
                          "customer_tier": rng.choice(TIERS), "channel": rng.choice(CHANNELS)}
    tickets = dict(sorted(tickets.items()))
    matched = rules[first_match(ticket, rules)]["team"]
    pool = list(OVERFLOW_POOL)
    rng.shuffle(pool)
    chain = [matched] + pool[: rng.randint(chain_lo, chain_hi)]
    spare = [p for p in pool if p not in chain]
    busy = set(chain[:-1])
    if level > 1:  # decoys: other teams of the ticket's category that are full too
        others = [r["team"] for r in rules if r["team"] != matched]
        busy |= set(rng.sample(others, rng.randint(1, 2)))
    teams = {}
    for name in [r["team"] for rs in world_rules.values() for r in rs] + list(OVERFLOW_POOL):
        nxt = chain[chain.index(name) + 1] if name in chain[:-1] else rng.choice([p for p in spare if p != name])
        teams[name] = {"status": AT_CAPACITY if name in busy else AVAILABLE, "overflow": nxt}
    return {"tickets": tickets, "rules": world_rules, "teams": teams}, ticket_id


def _skills(world: dict, ticket_id: str) -> list[str]:
    return _tags(*route(world, ticket_id))


def _prompt(rng: random.Random, world: dict, ticket_id: str, level: int) -> str:
    rules = world["rules"][world["tickets"][ticket_id]["category"]]
    fields = [_FIELD_WORDS[f] for f in FIELD_SKILLS if any(c[0] == f for r in rules for c in r["if"])]
    listed = fields[0] if len(fields) == 1 else ", ".join(fields[:-1]) + " and " + fields[-1]
    return "\n".join([
        f"Route ticket {ticket_id}: which team must handle it? {rng.choice(_CUSTOMERS)} opened it at "
        f"{rng.randint(7, 19):02d}:{rng.randint(0, 59):02d}. {rng.choice(_CONTEXT)}",
        _ALL_FREE if level == 1 else _CAPACITY,
        f"The rules for this ticket's queue look at {listed}.",
        "Look up the ticket, its category's routing rules and the teams with the dispatch tools. " + ANSWER_FORMAT,
    ])


def _row(rng: random.Random, item_id: str, level: int) -> dict:
    world, ticket_id = make_world(rng, level)
    return {
        "id": item_id, "prompt": _prompt(rng, world, ticket_id, level),
        "answer": route(world, ticket_id)[2][-1], "skills": _skills(world, ticket_id),
        "difficulty": level, "world": world,
    }


def generate(seed: int | str, n: int, namespace: str = "public", difficulty: int | None = None) -> list[dict]:
    """`n` items for `seed`. Each item draws from its own RNG keyed by (namespace, seed,
    index), so namespaces never share items and item k is the same whatever `n` is
    (`trainergym_kit.items.seeded_items`). With no `difficulty`, levels mix 30/40/30 (1/2/3)."""
    return seeded_items("dispatch", seed, n, namespace, difficulty, _row)


# --- checking, solving, distractors, skills ---------------------------------------------

_ANSWER_LINE = re.compile(r"\banswer[ \t*_]*:[ \t*_`]*(.*?)[ \t*_`]*$", re.IGNORECASE | re.MULTILINE)


def extract_answer(reply: str) -> str | None:
    """Normalisation: only text after the last `</think>`; take the last `Answer: ...` line
    (markdown emphasis and backticks around it ignored); drop quotes, trailing punctuation
    and a leading "the"/"team" or trailing "team" word; then compare as `team_key` does:
    case-insensitive, spaces, hyphens and underscores alike."""
    found = last_match(_ANSWER_LINE, reply)
    if found is None:
        return None
    value = found.strip().strip("'\"").rstrip(".!;,").strip("'\"").strip()
    value = re.sub(r"^(the\s+)?(team\b\s*)?|\s+team$", "", value, flags=re.IGNORECASE)
    return team_key(value) or None


def check(reply: str, answer: str) -> bool:
    """True iff the reply's final `Answer:` names the expected team."""
    got = extract_answer(reply)
    return got is not None and got == team_key(answer)


# What the checker reads (see READ_FORM in family.py): the prompt names the ticket once as
# `Route ticket <id>:`; the world (format in WORLD) holds that ticket, its category's rules and
# the teams on its route. The solver follows at most MAX_OVERFLOWS overflow steps.
MAX_OVERFLOWS = 7
_ROUTE = re.compile(r"Route ticket (\S+?):")
_OPS = (">=", "<=", "==", "!=", "in")


def _text(value) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _check_rules(rules) -> None:
    if not isinstance(rules, list) or not rules:
        raise ValueError("a category's rules must be a non-empty list")
    for rule in rules:
        if not isinstance(rule, dict) or not isinstance(rule.get("if"), list) or not _text(rule.get("team")):
            raise ValueError('every rule must be {"if": [conditions], "team": name}')
        for condition in rule["if"]:
            if not isinstance(condition, list) or len(condition) != 3:
                raise ValueError("every condition must be [field, op, value]")
            field, op, value = condition
            if field not in FIELD_SKILLS or op not in _OPS:
                raise ValueError(f"unknown condition {condition!r}: fields are {', '.join(FIELD_SKILLS)}; "
                                 f"ops are {', '.join(_OPS)}")
            if op in (">=", "<=") and not (field == "priority" and isinstance(value, int) and not isinstance(value, bool)):
                raise ValueError(f"{op} compares the priority with an integer: {condition!r}")
            if op == "in" and not (isinstance(value, list) and value and all(_text(v) for v in value)):
                raise ValueError(f"`in` takes a non-empty list of strings: {condition!r}")
            if op in ("==", "!=") and not (_text(value) or (isinstance(value, int) and not isinstance(value, bool))):
                raise ValueError(f"{op} takes a string or an integer: {condition!r}")


def _world(row: dict) -> tuple[dict, str]:
    """(world, ticket id as the prompt writes it), checked; ValueError if unreadable."""
    if not isinstance(row, dict):
        raise ValueError("an item is a dict")
    prompt, world = row["prompt"], row.get("world")
    if not isinstance(prompt, str):
        raise ValueError("the prompt is not a string")
    named = [m.group(1) for _, m in zip(range(2), _ROUTE.finditer(prompt))]
    if len(named) != 1:
        raise ValueError("the prompt must name the ticket once, as `Route ticket <id>:`")
    if not isinstance(world, dict) or not all(isinstance(world.get(k), dict) for k in ("tickets", "rules", "teams")):
        raise ValueError('the world must be {"tickets": {...}, "rules": {...}, "teams": {...}}')
    ticket = world["tickets"].get(_ticket_key(named[0]))
    if ticket is None:
        raise ValueError(f"the world has no ticket {named[0]!r}")
    priority = ticket.get("priority") if isinstance(ticket, dict) else None
    if not isinstance(ticket, dict) or not _text(ticket.get("category")) or not _text(ticket.get("region")) \
            or not _text(ticket.get("customer_tier")) or not isinstance(priority, int) or isinstance(priority, bool) \
            or not 1 <= priority <= 5:
        raise ValueError("the ticket needs a category, a priority 1-5, a region and a customer_tier")
    rules = world["rules"].get(str(ticket["category"]).strip().lower())
    if rules is None:
        raise ValueError(f"the world has no rules for category {ticket['category']!r}")
    _check_rules(rules)
    keys: dict[str, str] = {}
    for name, record in world["teams"].items():
        if not _text(name) or team_key(name) in keys:
            raise ValueError(f"team names must be non-empty and distinct: {name!r}")
        keys[team_key(name)] = name
        if not isinstance(record, dict) or record.get("status") not in (AVAILABLE, AT_CAPACITY) \
                or not _text(record.get("overflow")):
            raise ValueError(f'team {name!r} needs "status": "available" or "at capacity" and an "overflow" team')
    return world, named[0]


def _read(row: dict) -> tuple[list[dict], int, list[str], list[dict]]:
    """(the ticket's rules, the index of the first matching rule, the teams from the matched one
    through overflow to the one that takes the ticket, the reference tool calls); ValueError
    when the family cannot read the item: the prompt names no ticket, or the world is missing,
    malformed or routes nowhere (no rule matches, a team is missing, the overflow loops or runs
    past MAX_OVERFLOWS steps, or the prompt says every team is free while the matched one is full)."""
    world, ticket_id = _world(row)
    calls = []

    def call(tool, fn, **arguments) -> str:
        result = fn(world, **arguments)
        calls.append({"tool": f"dispatch_{tool}", "arguments": arguments, "result": result})
        if result.startswith("error:"):
            raise ValueError(f"the world does not route this ticket: {result}")
        return result

    call("get_ticket", get_ticket, ticket_id=ticket_id)
    ticket = world["tickets"][_ticket_key(ticket_id)]
    call("get_rules", get_rules, category=str(ticket["category"]))
    rules = world["rules"][str(ticket["category"]).strip().lower()]
    matched = next((i for i, rule in enumerate(rules) if all(holds(ticket, c) for c in rule["if"])), None)
    if matched is None:
        raise ValueError("no routing rule matches the ticket (the last rule should have an empty `if`)")
    teams = {team_key(name): record for name, record in world["teams"].items()}
    chain = [rules[matched]["team"]]
    if _ALL_FREE in row["prompt"]:
        if teams.get(team_key(chain[0]), {}).get("status") != AVAILABLE:
            raise ValueError("the prompt says every team is free, but the matched team is not available")
        return rules, matched, chain, calls
    while True:
        call("get_team", get_team, team=chain[-1])
        record = teams[team_key(chain[-1])]
        if record["status"] != AT_CAPACITY:
            return rules, matched, chain, calls
        if len(chain) > MAX_OVERFLOWS or team_key(record["overflow"]) in {team_key(t) for t in chain}:
            raise ValueError("the overflow chain finds no available team")
        chain.append(record["overflow"])


_strict = strict("dispatch", StopIteration)


@_strict
def solve(row: dict) -> dict:
    """The reference solver: ticket -> its category's rules -> (unless the prompt says every
    team is free) the matched team's status, following overflow until a team is available.
    Records every fact through the tool functions on the item's world; ValueError when the
    family cannot read the item."""
    _, _, chain, calls = _read(row)
    return {"calls": calls, "reply": f"Answer: {chain[-1]}"}


def _tags(rules: list[dict], matched: int, chain: list[str]) -> list[str]:
    tags = {"default_rule" if not rules[matched]["if"] else "rule_match"}
    tags |= {FIELD_SKILLS[c[0]] for rule in rules[: matched + 1] for c in rule["if"]}
    if len(chain) > 1:
        tags.add("overflow")
    if len(chain) > 2:
        tags.add("double_overflow")
    return [t for t in SKILL_TAGS if t in tags]


@_strict
def skills(row: dict) -> set[str]:
    """The item's skill tags, read by the family's own solver from the ticket the prompt names
    and the item's world (the conditions checked up to the matching rule, which rule fires, how
    far the ticket overflows; equal to the generator's `skills` on generated items); ValueError
    when the family cannot read the item (see READ_FORM)."""
    rules, matched, chain, _ = _read(row)
    return set(_tags(rules, matched, chain))


@_strict
def distractors(row: dict) -> list[dict]:
    """Plausible wrong teams, each labelled by the mistake: `wrong_route` (the else team),
    `ignored_condition` (the rule after the match, taken because a met condition was missed,
    or an earlier rule taken although one of its conditions fails), `unavailable_team` (the
    matched team, full, before following overflow), `stopped_overflow` (one overflow step
    short). Only those that differ from the answer are kept."""
    rules, matched, chain, _ = _read(row)
    candidates = [("wrong_route", rules[-1]["team"])]
    candidates += [("ignored_condition", r["team"]) for r in rules[matched + 1 : matched + 2] + rules[:matched]]
    candidates += [("unavailable_team", chain[0]), ("stopped_overflow", chain[-2] if len(chain) > 1 else chain[0])]
    seen, out = {team_key(chain[-1])}, []
    for kind, team in candidates:
        if team_key(team) not in seen:
            seen.add(team_key(team))
            out.append({"kind": kind, "reply": f"Answer: {team}"})
    return out
