"""The ops tools' semantics as pure functions of an item's world, shared by the eval tools
(`trainergym_triage.toolset`) and the solver (`trainergym_triage.items`).

World format: {"services": {name: {"owner", "depends_on": [names]}}, "incidents": {"INC-1234":
{"service", "started_at": "HH:MM", "symptom"}}, "deploys": [{"id": "D-1234", "service", "at": "HH:MM",
"author"}]}.

A public module of the family: job code may import it (see `PUBLIC_MODULES` in family.py), so
it is pure Python and imports nothing else from the package.
"""

from __future__ import annotations

import json


def minutes(clock: str) -> int:
    hours, mins = clock.split(":")
    return int(hours) * 60 + int(mins)


def _service_key(world: dict, service: str) -> str | None:
    wanted = str(service).strip().lower()
    return next((name for name in world.get("services", {}) if name.lower() == wanted), None)


def get_incident(world: dict, incident_id: str) -> str:
    """The incident's id, service, start time and symptom, as JSON."""
    wanted = str(incident_id).strip().upper()
    for key, incident in world.get("incidents", {}).items():
        if key.upper() == wanted:
            return json.dumps({"id": key, **incident})
    return f"error: no incident {incident_id!r}"


def get_service(world: dict, service: str) -> str:
    """A service's owner, its dependencies and (derived) the services that call it, as JSON."""
    name = _service_key(world, service)
    if name is None:
        return f"error: no service named {service!r}"
    info = world["services"][name]
    used_by = sorted(other for other, o in world["services"].items() if name in o["depends_on"])
    return json.dumps({"name": name, "owner": info["owner"], "depends_on": info["depends_on"], "used_by": used_by})


def list_deploys(world: dict, service: str) -> str:
    """A service's deploys, oldest first, as a JSON list of {id, at, author}."""
    name = _service_key(world, service)
    if name is None:
        return f"error: no service named {service!r}"
    mine = [d for d in world.get("deploys", []) if d["service"] == name]
    mine.sort(key=lambda d: minutes(d["at"]))
    return json.dumps([{"id": d["id"], "at": d["at"], "author": d["author"]} for d in mine])
