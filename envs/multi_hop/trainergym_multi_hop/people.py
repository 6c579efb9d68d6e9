"""The people tools' semantics over an item's world, shared by the eval tools
(`trainergym_multi_hop.toolset`) and the solver (`trainergym_multi_hop.items`).

A public module of the family: job code may import it (see `PUBLIC_MODULES` in family.py), so
it is pure Python and imports nothing else from the package.

World format: {"people": {"<Full Name>": {"attributes": {"city": "Lisbon", ...},
                                          "relations": {"manager": "<Full Name>", ...}}}}
"""

from __future__ import annotations

import re

RELATIONS = ("manager", "mentor", "sibling", "neighbor", "best_friend")
ATTRIBUTES = ("city", "employer", "birth_year", "pet", "hobby")

_ALIASES = {"neighbour": "neighbor", "bestfriend": "best_friend", "home_city": "city", "year_of_birth": "birth_year"}


def _key(text: str) -> str:
    """A relation or attribute name as the world spells it ("Best friend" -> "best_friend")."""
    key = re.sub(r"[\s-]+", "_", str(text).strip().lower())
    return _ALIASES.get(key, key)


def _name_key(name: str) -> str:
    return " ".join(str(name).replace(".", " ").split()).lower()


def _person(world: dict, name: str) -> tuple[str, dict] | str:
    """(canonical name, record), or an error string. Names match case-insensitively, and the
    period after a middle initial is optional."""
    wanted = _name_key(name)
    for full, record in (world.get("people") or {}).items():
        if _name_key(full) == wanted:
            return full, record
    return f"error: no person named {name!r}"


def get_relation(world: dict, person: str, relation: str) -> str:
    """The full name of `person`'s `relation`, or an error string."""
    found = _person(world, person)
    if isinstance(found, str):
        return found
    name, record = found
    rel = _key(relation)
    if rel not in RELATIONS:
        return f"error: unknown relation {relation!r} (known: {', '.join(RELATIONS)})"
    other = record.get("relations", {}).get(rel)
    return other if other else f"error: {name} has no {rel}"


def get_attribute(world: dict, person: str, attribute: str) -> str:
    """`person`'s `attribute`, or an error string."""
    found = _person(world, person)
    if isinstance(found, str):
        return found
    name, record = found
    attr = _key(attribute)
    if attr not in ATTRIBUTES:
        return f"error: unknown attribute {attribute!r} (known: {', '.join(ATTRIBUTES)})"
    value = record.get("attributes", {}).get(attr)
    return str(value) if value is not None else f"error: {name} has no recorded {attr}"


def list_relations(world: dict, person: str) -> str:
    """The relations `person` has, comma-separated, or an error string."""
    found = _person(world, person)
    if isinstance(found, str):
        return found
    name, record = found
    rels = [r for r in RELATIONS if record.get("relations", {}).get(r)]
    return ", ".join(rels) if rels else f"{name} has no recorded relations"
