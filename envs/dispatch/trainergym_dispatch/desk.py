"""The dispatch tools' semantics over an item's world, shared by the eval tools
(`trainergym_dispatch.toolset`) and the solver (`trainergym_dispatch.items`).

A public module of the family: job code may import it (see `PUBLIC_MODULES` in family.py), so
it is pure Python and imports nothing else from the package.
"""

from __future__ import annotations

import re
from functools import lru_cache

_SEPARATORS = re.compile(r"[\s_\-]+")


@lru_cache(maxsize=4096)
def _key(name: str) -> str:
    return _SEPARATORS.sub("-", name.strip().lower()).strip("-")


def team_key(name: str) -> str:
    """Team names compare case-insensitively, with spaces, hyphens and underscores alike."""
    return _key(str(name))


def _ticket_key(ticket_id: str) -> str:
    key = str(ticket_id).strip().upper()
    return f"T-{key}" if key.isdigit() else key


def get_ticket(world: dict, ticket_id: str) -> str:
    ticket = world.get("tickets", {}).get(_ticket_key(ticket_id))
    if ticket is None:
        return f"error: no ticket {ticket_id!r}"
    return "\n".join([f"ticket {_ticket_key(ticket_id)}"] + [f"{k}: {v}" for k, v in ticket.items()])


def _condition_text(field: str, op: str, value) -> str:
    return f"{field} in [{', '.join(value)}]" if op == "in" else f"{field} {op} {value}"


def get_rules(world: dict, category: str) -> str:
    rules = world.get("rules", {})
    key = str(category).strip().lower()
    if key not in rules:
        return f"error: no routing rules for category {category!r}; known categories: {', '.join(sorted(rules))}"
    lines = [f"routing rules for {key} (the first rule that matches wins):"]
    for i, rule in enumerate(rules[key], 1):
        if not rule["if"]:
            lines.append(f"{i}. else -> {rule['team']}")
        else:
            conditions = " and ".join(_condition_text(*c) for c in rule["if"])
            lines.append(f"{i}. {'if' if i == 1 else 'elif'} {conditions} -> {rule['team']}")
    return "\n".join(lines)


def get_team(world: dict, team: str) -> str:
    found = {team_key(name): name for name in world.get("teams", {})}
    name = found.get(team_key(team))
    if name is None:
        return f"error: no team named {team!r}"
    record = world["teams"][name]
    return f"team {name}\nstatus: {record['status']}\noverflow: {record['overflow']}"
