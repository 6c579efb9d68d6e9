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

RELATIONS = ("manager", "mentor", "sibling", "neighbor", "best_friend")
ATTRIBUTES = ("city", "employer", "birth_year", "pet", "hobby")
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

# How relations and attributes are worded in prompts; `tag_text` parses these.
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


# -- the tools' logic, shared by the Toolset and the reference solver ---------------------------

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
    items = []
    for i in range(n):
        rng = random.Random(f"multi_hop:{namespace}:{seed}:{i}")
        level = difficulty or rng.choices((1, 2, 3), weights=(3, 4, 3))[0]
        items.append(make_item(rng, f"{namespace}-{seed}-{i}", level))
    return items


# -- reading prompts, solving, grading ----------------------------------------------------------

_NAME = r"[A-Z][A-Za-z'-]+(?: [A-Z]\.)? [A-Z][A-Za-z'-]+"
_REL_ALT = "|".join(REL_WORDS.values())
_QUESTION = re.compile(
    rf"(?:{'|'.join(q.split(' the ')[0] for q in QUESTIONS)}) the (?P<attr>{'|'.join(ATTR_WORDS.values())}) of "
    rf"(?P<chain>(?:the (?:{_REL_ALT}) of )+)(?P<start>{_NAME})")


def parse(prompt: str) -> tuple[str, list[str], str]:
    """(start person, relations in hop order, attribute) from a prompt in the family's wording."""
    m = _QUESTION.search(prompt)
    if not m:
        raise ValueError("not a multi_hop question")
    words = {w: r for r, w in REL_WORDS.items()}
    chain = [words[w] for w in reversed(re.findall(rf"the ({_REL_ALT}) of ", m["chain"]))]
    attribute = {w: a for a, w in ATTR_WORDS.items()}[m["attr"]]
    return m["start"], chain, attribute


def follow(world: dict, start: str, chain: list[str], attribute: str) -> str:
    """The attribute at the end of the chain (an error string if a link is missing)."""
    person = start
    for rel in chain:
        person = get_relation(world, person, rel)
        if person.startswith("error:"):
            return person
    return get_attribute(world, person, attribute)


def solve(row: dict) -> dict:
    """The reference solver: one `people_get_relation` call per hop, each naming the person the
    previous call returned, then `people_get_attribute`. It reads the question from the prompt
    and every fact through the tool functions over the item's world."""
    start, chain, attribute = parse(row["prompt"])
    world, calls, person = row["world"], [], start
    for rel in chain:
        result = get_relation(world, person, rel)
        calls.append({"tool": "people_get_relation", "arguments": {"person": person, "relation": rel}, "result": result})
        person = result
    value = get_attribute(world, person, attribute)
    calls.append({"tool": "people_get_attribute", "arguments": {"person": person, "attribute": attribute}, "result": value})
    return {"calls": calls, "reply": f"Answer: {value}"}


def distractors(row: dict) -> list[dict]:
    """Plausible wrong answers, each labelled by the mistake that produces it; only those whose
    value differs from the answer (and from each other) are kept."""
    start, chain, attribute = parse(row["prompt"])
    world = row["world"]
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
    reply = (reply or "").rsplit("</think>", 1)[-1]
    found = [m.group(1) for line in reply.splitlines() if (m := _ANSWER_LINE.search(line))]
    return normalise(found[-1]) if found else None


def check(reply: str, answer: str) -> bool:
    """True iff the last `Answer:` line (after any think block) names the answer. Comparison is
    case-insensitive, whitespace-collapsed, ignoring surrounding quotes, backticks and bold
    markers and trailing punctuation (see `normalise`); without an `Answer:` line it fails."""
    got = extract_answer(reply)
    return bool(got) and got == normalise(str(answer))


# Keyword fallbacks for prompts a job author wrote in their own words.
_REL_PATTERNS = {
    "manager": r"\b(manager|boss|supervisor|reports to)",
    "mentor": r"\bmentor",
    "sibling": r"\b(sibling|brother|sister)",
    "neighbor": r"\bneighbou?r",
    "best_friend": r"\b(best[ _-]?friend|closest friend)",
}
_ATTR_PATTERNS = {
    "city": r"\b(city|cities|lives? in|hometown|town)\b",
    "employer": r"\b(employer|works? (for|at)|company)",
    "birth_year": r"\b(birth[ _]?year|born|year of birth)",
    "pet": r"\bpets?\b",
    "hobby": r"\b(hobby|hobbies|pastime)",
}


def tag_text(text: str) -> set[str]:
    """Skill tags read off any task prompt: exact for the family's own wording (parsed),
    keyword heuristics otherwise (hops = relation mentions + 1, capped at 4)."""
    try:
        _, chain, attribute = parse(text)
        return set(skills_of(chain, attribute))
    except ValueError:
        pass
    lower = text.lower()
    tags, mentions = set(), 0
    for rel, pattern in _REL_PATTERNS.items():
        hits = re.findall(pattern, lower)
        if hits:
            tags.add(rel)
            mentions += len(hits)
    tags |= {attr for attr, pattern in _ATTR_PATTERNS.items() if re.search(pattern, lower)}
    if mentions:
        tags.add(f"hops_{min(4, mentions + 1)}")
    return tags
