"""multi_hop items: questions about a generated persona world, answered by chained look-ups.

Pure Python (no verifiers import) so the trainergym library can generate, check and solve
items in its own process without paying the verifiers import.

Each item carries its own small world of 8-14 invented people with attributes (city,
employer, ...) and relations to each other (manager, mentor, ...). The question names a start
person, a chain of 1-3 relations and an attribute; every fact lives only in the world, so the
model must follow the chain one tool call per relation, each call naming the person the
previous call returned, then read the attribute.

World format (the eval Toolset reads it from the TaskData's `world` field):
    {"people": {"<Full Name>": {"attributes": {"city": "Lisbon", ...},
                                "relations": {"manager": "<Full Name>", ...}}}}
Every attribute value is unique within a world, so naming the wrong person always gives a
wrong answer (that is what makes the distractors wrong).
"""

from __future__ import annotations

import random
import re
import string

from trainergym_kit.answers import after_think
from trainergym_kit.items import seeded_items, strict

from trainergym_multi_hop.people import (  # noqa: F401  (the tools' logic; re-exported for the library and tests)
    _ALIASES, ATTRIBUTES, RELATIONS, _key, _name_key, _person, get_attribute, get_relation, list_relations,
)

VALUES = {
    "city": ("Lisbon", "Porto", "Oslo", "Bergen", "Tampere", "Ghent", "Leeds", "Cork", "Graz", "Lyon", "Nantes",
             "Turin", "Bologna", "Krakow", "Brno", "Seville", "Utrecht", "Aarhus", "Dresden", "Zagreb", "Valencia",
             "Galway", "Basel", "Tallinn"),
    "employer": ("Northwind Traders", "Bluepeak Labs", "Copperline Foods", "Harbor Freight Lines", "Ironleaf Studios",
                 "Quillstone Bank", "Redfern Robotics", "Silverbirch Health", "Tidewater Energy", "Orchard Media",
                 "Pinecrest Insurance", "Lumen Optics", "Granite Logistics", "Foxglove Pharma", "Brightwell Schools",
                 "Kestrel Aviation", "Mosaic Software", "Saltmarsh Fisheries", "Verdant Farms", "Cobalt Mining"),
    "birth_year": tuple(str(y) for y in range(1950, 2005)),
    "pet": ("beagle", "tabby cat", "parrot", "rabbit", "hamster", "goldfish", "tortoise", "ferret", "iguana", "canary",
            "guinea pig", "hedgehog", "gecko", "cockatiel", "chinchilla", "corgi", "husky", "siamese cat"),
    "hobby": ("chess", "rock climbing", "pottery", "birdwatching", "sailing", "woodworking", "baking", "cycling",
              "knitting", "astronomy", "fencing", "gardening", "kayaking", "photography", "calligraphy",
              "orienteering", "beekeeping", "archery"),
}
# Large name pools with a middle initial, so prompts almost never repeat across item streams.
FIRST_NAMES = tuple("""
    Ada Bruno Carla Dmitri Elena Farid Greta Hugo Ines Jonas Kira Lars Maya Nikolai Olga Pavel Quinn Rosa Stefan Tara
    Ulrich Vera Wanda Xavier Yara Zoltan Amira Bastian Celine Dario Esme Felix Gloria Henrik Ilse Joao Leona Marek Nadia
    Oscar Priya Rafael Sanna Tomas Ursula Viggo Wilhelm Yusuf Zara Agnes Benedikt Cosima Desmond Edith Florian Gemma
    Hamid Ingrid Jasper Karina Lorenzo Mirela Niall Ottilie Pietro Renata Soren Thea Umberto Valeria Wiebke Yannick
    Zuzana Aurelio Bettina Cyrus Dagny Emeric Fiona""".split())
LAST_NAMES = tuple("""
    Abbott Brandt Castillo Dekker Eriksen Fontaine Gallo Hartmann Ivanova Jansen Kowalski Lindqvist Moreau Novak Okafor
    Petrov Quintero Rossi Schultz Tanaka Varga Weber Young Zeller Alvarez Bianchi Costa Duval Engel Fischer Gomez Holm
    Iversen Keller Larsen Meyer Nilsen Olsen Pereira Sousa Achterberg Barros Conti Dragomir Esteves Farkas Gruber
    Haugen Ilves Jaramillo Kaminski Lehtonen Mancini Nordin Oyelaran Pacheco Radu Salonen Toivonen Urquhart Valdez
    Wojcik Yilmaz Zapata Aguirre Bergstrom Ciobanu Drummond Ferreira Grimaldi Hoffmann Ibsen Jokela Kuznetsov Laine
    Marchetti Nakamura Ostrowski Rautio""".split())

# How relations and attributes are worded in prompts; `parse` reads these back.
REL_WORDS = {r: r.replace("_", " ") for r in RELATIONS}
ATTR_WORDS = {"city": "home city", "employer": "employer", "birth_year": "birth year", "pet": "pet", "hobby": "hobby"}
QUESTIONS = ("What is the {attr} of {chain}?", "Find the {attr} of {chain}.", "Look up the {attr} of {chain}.",
             "Tell me the {attr} of {chain}.", "Give the {attr} of {chain}.", "Report the {attr} of {chain}.")
INSTRUCTION = "The facts are only in the people directory: look them up with the people tools."
ANSWER_FORMAT = "Finish with a line `Answer: <value>` giving the attribute value exactly as the people tools return it."

# Difficulty knobs: (relations in the chain, fewest people, most people). Level 3 needs 4 dependent calls.
DIFFICULTY = {1: (1, 8, 10), 2: (2, 9, 12), 3: (3, 11, 14)}
DIFFICULTY_LEVELS = tuple(DIFFICULTY)
SKILL_TAGS = ("hops_2", "hops_3", "hops_4", *RELATIONS, *ATTRIBUTES)


# -- generation ---------------------------------------------------------------------------------

def make_world(rng: random.Random, size: int) -> dict:
    """`size` people with unique names ("Ada K. Novak": the middle initial keeps prompts from
    repeating across item streams) and per-attribute unique values; relations drawn so that
    managers form a hierarchy, siblings and neighbors are mutual pairs, and mentors and best
    friends point one way. Not everyone has every relation."""
    names: list[str] = []
    while len(names) < size:
        name = f"{rng.choice(FIRST_NAMES)} {rng.choice(string.ascii_uppercase)}. {rng.choice(LAST_NAMES)}"
        if name not in names:
            names.append(name)
    values = {a: rng.sample(VALUES[a], size) for a in ATTRIBUTES}
    relations: dict[str, dict[str, str]] = {n: {} for n in names}
    for i, name in enumerate(names[2:], 2):  # the first two are top of the hierarchy
        if rng.random() < 0.85:
            relations[name]["manager"] = rng.choice(names[:i])
    for rel, share in (("sibling", 0.5), ("neighbor", 0.7)):
        pool = rng.sample(names, int(size * share) // 2 * 2)
        for a, b in zip(pool[::2], pool[1::2]):
            relations[a][rel], relations[b][rel] = b, a
    for rel, share in (("mentor", 0.6), ("best_friend", 0.7)):
        for name in names:
            if rng.random() < share:
                relations[name][rel] = rng.choice([n for n in names if n != name])
    return {"people": {name: {"attributes": {a: values[a][i] for a in ATTRIBUTES},
                              "relations": {r: relations[name][r] for r in RELATIONS if r in relations[name]}}
                       for i, name in enumerate(names)}}


def _walk(rng: random.Random, world: dict, hops: int) -> tuple[str, list[str]] | None:
    """A start person and `hops` relations leading to a new person at every step, or None."""
    start = rng.choice(sorted(world["people"]))
    seen, person, chain = {start}, start, []
    for _ in range(hops):
        options = [r for r, other in world["people"][person]["relations"].items() if other not in seen]
        if not options:
            return None
        rel = rng.choice(options)
        chain.append(rel)
        person = world["people"][person]["relations"][rel]
        seen.add(person)
    return start, chain


def question(start: str, chain: list[str], attribute: str, template: str) -> str:
    """The prompt: relations are written outermost first ("the mentor of the manager of X")."""
    path = "".join(f"the {REL_WORDS[r]} of " for r in reversed(chain)) + start
    return " ".join([template.format(attr=ATTR_WORDS[attribute], chain=path), INSTRUCTION, ANSWER_FORMAT])


def skills_of(chain: list[str], attribute: str) -> list[str]:
    return sorted({f"hops_{len(chain) + 1}", *chain, attribute})


def make_item(rng: random.Random, item_id: str, difficulty: int) -> dict:
    hops, lo, hi = DIFFICULTY[difficulty]
    while True:  # retry until the walk exists and at least two distractors differ from the answer
        world = make_world(rng, rng.randint(lo, hi))
        walk = _walk(rng, world, hops)
        if walk is None:
            continue
        start, chain = walk
        attribute = rng.choice(ATTRIBUTES)
        item = {"id": item_id, "prompt": question(start, chain, attribute, rng.choice(QUESTIONS)),
                "answer": follow(world, start, chain, attribute), "skills": skills_of(chain, attribute),
                "difficulty": difficulty, "world": world}
        if len(distractors(item)) >= 2:
            return item


def generate(seed: int | str, n: int, namespace: str = "public", difficulty: int | None = None) -> list[dict]:
    """`n` items for `seed`. Each item draws from its own RNG keyed by (namespace, seed, index),
    so namespaces never share an item stream and item k is the same whatever `n` is. With no
    `difficulty`, levels mix 30/40/30 (1/2/3)."""
    return seeded_items("multi_hop", seed, n, namespace, difficulty, make_item)


# -- reading prompts, solving, grading ----------------------------------------------------------

_NAME = r"[A-Z][A-Za-z'-]+(?: [A-Z]\.)? [A-Z][A-Za-z'-]+"
_REL_ALT = "|".join(REL_WORDS.values())
MAX_HOPS = max(hops for hops, _, _ in DIFFICULTY.values())  # relations in a chain the skill tags can express
_QUESTION = re.compile(
    rf"(?:{'|'.join(q.split(' the ')[0] for q in QUESTIONS)}) the (?P<attr>{'|'.join(ATTR_WORDS.values())}) of "
    rf"(?P<chain>(?:the (?:{_REL_ALT}) of ){{1,{MAX_HOPS}}})(?P<start>{_NAME})")


def parse(prompt: str) -> tuple[str, list[str], str]:
    """(start person, relations in hop order, attribute) from a prompt in the family's wording
    (ValueError otherwise): exactly one question, with 1 to MAX_HOPS relations."""
    if not isinstance(prompt, str):
        raise ValueError("the prompt is not a string")
    found = [m for _, m in zip(range(2), _QUESTION.finditer(prompt))]
    if len(found) != 1:
        raise ValueError("not a multi_hop question" if not found else "more than one multi_hop question")
    m = found[0]
    words = {w: r for r, w in REL_WORDS.items()}
    chain = [words[w] for w in reversed(re.findall(rf"the ({_REL_ALT}) of ", m["chain"]))]
    attribute = {w: a for a, w in ATTR_WORDS.items()}[m["attr"]]
    return m["start"], chain, attribute


def check_world(world) -> None:
    """ValueError unless `world` is a people directory in the family's format (see WORLD)."""
    if not isinstance(world, dict) or not isinstance(world.get("people"), dict) or not world["people"]:
        raise ValueError('the world must be {"people": {"<Full Name>": {...}, ...}} with at least one person')
    keys = set()
    for name, record in world["people"].items():
        if not isinstance(name, str) or not name.strip():
            raise ValueError("every person needs a non-empty name")
        if _name_key(name) in keys:
            raise ValueError(f"two people share the name {name!r}")
        keys.add(_name_key(name))
        if not isinstance(record, dict) or not isinstance(record.get("attributes"), dict) \
                or not isinstance(record.get("relations"), dict):
            raise ValueError(f"{name!r} needs an `attributes` and a `relations` object")
        for field in ("attributes", "relations"):
            if not all(isinstance(k, str) and isinstance(v, str) for k, v in record[field].items()):
                raise ValueError(f"{name!r}: {field} must map names to strings")


def follow(world: dict, start: str, chain: list[str], attribute: str) -> str:
    """The attribute at the end of the chain (an error string if a link is missing)."""
    person = start
    for rel in chain:
        person = get_relation(world, person, rel)
        if person.startswith("error:"):
            return person
    return get_attribute(world, person, attribute)


def _read(row: dict) -> tuple[str, list[str], str, dict, list[dict]]:
    """(start, chain, attribute, world, the reference tool calls) of a row; ValueError when the
    family cannot read it: the prompt is not its question, or the world is missing, malformed
    or does not hold the chain and the attribute."""
    if not isinstance(row, dict):
        raise ValueError("an item is a dict")
    start, chain, attribute = parse(row["prompt"])
    world = row.get("world")
    check_world(world)
    calls, person = [], start
    for rel in chain:
        result = get_relation(world, person, rel)
        calls.append({"tool": "people_get_relation", "arguments": {"person": person, "relation": rel}, "result": result})
        if result.startswith("error:"):
            raise ValueError(f"the world does not hold the question's chain: {result}")
        person = result
    value = get_attribute(world, person, attribute)
    calls.append({"tool": "people_get_attribute", "arguments": {"person": person, "attribute": attribute}, "result": value})
    if value.startswith("error:") or not value.strip():
        raise ValueError(f"the world does not hold the asked attribute: {value}")
    return start, chain, attribute, world, calls


_strict = strict("multi_hop")


@_strict
def solve(row: dict) -> dict:
    """The reference solver: one `people_get_relation` call per hop, each naming the person the
    previous call returned, then `people_get_attribute`. It reads the question from the prompt
    and every fact through the tool functions over the item's world; ValueError when the family
    cannot read the item."""
    *_, calls = _read(row)
    return {"calls": calls, "reply": f"Answer: {calls[-1]['result']}"}


@_strict
def skills(row: dict) -> set[str]:
    """The item's skill tags, read from its prompt (hops, relations, attribute) by the family's
    own parser, the world checked to hold the chain (equal to the generator's `skills` on
    generated items); ValueError when the family cannot read the item (see READ_FORM)."""
    _, chain, attribute, _, _ = _read(row)
    return set(skills_of(chain, attribute))


@_strict
def distractors(row: dict) -> list[dict]:
    """Plausible wrong answers, each labelled by the mistake that produces it; only those whose
    value differs from the answer (and from each other) are kept."""
    start, chain, attribute, world, _ = _read(row)
    path = [start]
    for rel in chain:
        path.append(get_relation(world, path[-1], rel))
    answer = get_attribute(world, path[-1], attribute)
    candidates = [("wrong_hop", get_attribute(world, path[-2], attribute)),
                  ("start_person", get_attribute(world, start, attribute))]
    for rel in (chain[-1], *RELATIONS):  # one hop too far to someone new, the last relation first
        beyond = get_relation(world, path[-1], rel)
        if not beyond.startswith("error:") and beyond not in path:
            candidates.append(("extra_hop", get_attribute(world, beyond, attribute)))
            break
    for hop, rel in enumerate(chain):  # the first hop where another relation leads somewhere
        swapped = [follow(world, path[hop], [other, *chain[hop + 1:]], attribute) for other in RELATIONS if other != rel]
        swapped = [v for v in swapped if not v.startswith("error:") and normalise(v) != normalise(answer)]
        if swapped:
            candidates.append(("wrong_relation", swapped[0]))
            break
    seen, out = {normalise(answer)}, []
    for kind, value in candidates:
        if not value.startswith("error:") and normalise(value) not in seen:
            seen.add(normalise(value))
            out.append({"kind": kind, "reply": f"Answer: {value}"})
    return out


_ANSWER_LINE = re.compile(r"answer\s*[:=]\s*(.*)", re.IGNORECASE)


def normalise(text: str) -> str:
    """Casefold, collapse whitespace, drop surrounding quotes/backticks/asterisks and trailing
    punctuation, so `**"Lisbon".**` and `lisbon` compare equal."""
    text = " ".join(text.split()).casefold()
    previous = None
    while text != previous:
        previous = text
        text = text.strip(" \"'`*").rstrip(".,;:!?")
    return text


def extract_answer(reply: str) -> str | None:
    """Only text after the last `</think>` counts (reasoning drafts are never graded); the
    value is what follows `Answer:` on the last line that has one, normalised."""
    found = [m.group(1) for line in after_think(reply).splitlines() if (m := _ANSWER_LINE.search(line))]
    return normalise(found[-1]) if found else None


def check(reply: str, answer: str) -> bool:
    """True iff the last `Answer:` line (after any think block) names the answer. Comparison is
    case-insensitive, whitespace-collapsed, ignoring surrounding quotes, backticks and bold
    markers and trailing punctuation (see `normalise`); without an `Answer:` line it fails."""
    got = extract_answer(reply)
    return bool(got) and got == normalise(str(answer))
