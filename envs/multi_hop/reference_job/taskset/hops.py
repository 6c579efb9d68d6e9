"""Training data and reward for multi_hop.

The generator is written here rather than taken from the family so the job controls its own
mix: more 3- and 4-look-up chains than the eval has, every relation and attribute represented,
and name and value pools of its own so the model learns to read names off tool results rather
than memorise them. Worlds use the eval's format because the eval toolset reads them.
"""

import random
import re

import verifiers.v1 as vf
from trainergym_kit.answers import last_match
from trainergym_multi_hop.toolset import MultiHopToolset

SYSTEM = (
    "You answer questions about people in a directory that only the people tools can read. "
    "Follow the relations one call at a time, starting from the named person and passing the "
    "full name each call returns to the next call; then look up the attribute. Never guess. "
    "Finish with a line `Answer: <value>`."
)
RELATIONS = ("manager", "mentor", "sibling", "neighbor", "best_friend")
ATTRIBUTES = {"city": "home city", "employer": "employer", "birth_year": "birth year", "pet": "pet", "hobby": "hobby"}
POOLS = {
    "city": ["Aveiro", "Trondheim", "Turku", "Leuven", "York", "Limerick", "Linz", "Lille", "Rennes", "Genoa", "Parma",
             "Gdansk", "Olomouc", "Malaga", "Leiden", "Odense", "Leipzig", "Split", "Bilbao", "Sligo", "Bern", "Tartu"],
    "employer": ["Amberline Works", "Birchwood Bakery", "Clearwater Labs", "Driftwood Games", "Emberforge Steel",
                 "Fairhaven Clinic", "Goldcrest Books", "Highland Rail", "Indigo Textiles", "Juniper Solar",
                 "Kingfisher Travel", "Larkspur Hotels", "Meridian Maps", "Nightjar Security", "Oakmont Builders",
                 "Pebblebrook Dairy"],
    "birth_year": [str(y) for y in range(1948, 2006)],
    "pet": ["dachshund", "black cat", "budgie", "lop rabbit", "gerbil", "koi", "box turtle", "axolotl", "lovebird",
            "chameleon", "labrador", "poodle", "ragdoll cat", "rat", "tarantula", "pony"],
    "hobby": ["go", "bouldering", "glassblowing", "stargazing", "rowing", "origami", "brewing", "surfing", "quilting",
              "fishing", "skiing", "juggling", "painting", "running", "singing", "dancing"],
}
FIRST = ["Alma", "Boris", "Chiara", "Emil", "Freya", "Goran", "Hanna", "Ivo", "Jana", "Karl", "Lena", "Milo", "Nora",
         "Otto", "Petra", "Rafael", "Sofia", "Timo", "Uma", "Viktor", "Wilma", "Yusuf", "Zofia", "Anton", "Britt"]
LAST = ["Adler", "Berg", "Carvalho", "Dahl", "Esposito", "Falk", "Grieg", "Horvat", "Iglesias", "Jovanovic", "Krause",
        "Lund", "Marino", "Nagy", "Ortega", "Pohl", "Ricci", "Strand", "Torres", "Ulrich", "Vidal", "Wolf", "Ziegler"]
NAMES = [f"{f} {i}. {l}" for f in FIRST for i in "ABCDEFGHJKLMNPRSTW" for l in LAST]  # middle initials, as in the eval
QUESTIONS = ["What is the {attr} of {chain}?", "Find the {attr} of {chain}.", "Look up the {attr} of {chain}.",
             "Tell me the {attr} of {chain}.", "Give the {attr} of {chain}.", "Report the {attr} of {chain}."]
LEVELS = {1: (1, 8, 10), 2: (2, 9, 12), 3: (3, 11, 14)}  # relations, fewest people, most people


def make_world(rng: random.Random, size: int) -> dict:
    names = rng.sample(NAMES, size)
    values = {a: rng.sample(POOLS[a], size) for a in ATTRIBUTES}
    rel = {n: {} for n in names}
    for i, n in enumerate(names[2:], 2):
        if rng.random() < 0.85:
            rel[n]["manager"] = rng.choice(names[:i])
    for kind, share in (("sibling", 0.5), ("neighbor", 0.7)):
        pool = rng.sample(names, int(size * share) // 2 * 2)
        for a, b in zip(pool[::2], pool[1::2]):
            rel[a][kind], rel[b][kind] = b, a
    for kind, share in (("mentor", 0.6), ("best_friend", 0.7)):
        for n in names:
            if rng.random() < share:
                rel[n][kind] = rng.choice([m for m in names if m != n])
    return {"people": {n: {"attributes": {a: values[a][i] for a in ATTRIBUTES}, "relations": rel[n]}
                       for i, n in enumerate(names)}}


def make_question(rng: random.Random, level: int) -> tuple[str, dict, str]:
    hops, lo, hi = LEVELS[level]
    while True:
        world = make_world(rng, rng.randint(lo, hi))
        person = start = rng.choice(sorted(world["people"]))
        seen, chain = {start}, []
        for _ in range(hops):
            options = [r for r, other in world["people"][person]["relations"].items() if other not in seen]
            if not options:
                break
            chain.append(rng.choice(options))
            person = world["people"][person]["relations"][chain[-1]]
            seen.add(person)
        if len(chain) == hops:
            break
    attr = rng.choice(list(ATTRIBUTES))
    path = "".join(f"the {r.replace('_', ' ')} of " for r in reversed(chain)) + start
    prompt = rng.choice(QUESTIONS).format(attr=ATTRIBUTES[attr], chain=path) + \
        " The facts are only in the people directory: look them up with the people tools."
    return prompt, world, world["people"][person]["attributes"][attr]


def recompute(prompt: str, world: dict) -> str | None:
    """Walk the question's chain through the world: the gold check of `validate`."""
    words = "|".join(ATTRIBUTES.values())
    m = re.search(rf"the ({words}) of ((?:the [a-z ]+? of )+)([A-Z]\w+ [A-Z]\. [A-Z]\w+)", prompt)
    if not m:
        return None
    person = m.group(3)
    for rel in reversed(re.findall(r"the ([a-z ]+?) of ", m.group(2))):
        person = world["people"].get(person, {}).get("relations", {}).get(rel.replace(" ", "_"))
        if person is None:
            return None
    attr = {v: k for k, v in ATTRIBUTES.items()}[m.group(1)]
    return world["people"][person]["attributes"][attr]


def normalise(text: str) -> str:
    text = " ".join(text.split()).casefold()
    return text.strip(" \"'`*").rstrip(".,;:!?").strip(" \"'`*")


ANSWER = re.compile(r"answer\s*[:=]\s*(.*)", re.IGNORECASE)


def final_answer(reply: str | None) -> str | None:
    """The value on the last `Answer:` line after any thinking, normalised; None if absent."""
    found = last_match(ANSWER, reply)
    return (normalise(found) or None) if found is not None else None


class HopData(vf.TaskData):
    answer: str
    world: dict = {}
    level: int = 1


class HopTaskConfig(vf.TaskConfig):
    tools: vf.ToolsetConfig = vf.ToolsetConfig()


class HopTask(vf.Task[HopData, vf.State, HopTaskConfig]):
    @classmethod
    def toolsets(cls, config: HopTaskConfig) -> list[vf.Toolset]:
        return [MultiHopToolset(config.tools)]

    @vf.reward(weight=1.0)
    async def exact_answer(self, trace: vf.Trace) -> float:
        return float(final_answer(trace.last_reply) == normalise(self.data.answer))

    @vf.metric
    async def tool_calls(self, trace: vf.Trace) -> float:
        return float(len(trace.tool_messages))

    async def validate(self, runtime) -> bool:
        return recompute(self.data.prompt_text, self.data.world) == self.data.answer


class HopsConfig(vf.TasksetConfig):
    seed: int = 11
    num_tasks: int = 2000
    task: HopTaskConfig = HopTaskConfig()


class PeopleHopsTaskset(vf.Taskset[HopTask, HopsConfig]):
    def load(self) -> list[HopTask]:
        rng = random.Random(self.config.seed)
        tasks = []
        for _ in range(self.config.num_tasks):
            level = rng.choices((1, 2, 3), weights=(2, 4, 4))[0]
            prompt, world, answer = make_question(rng, level)
            data = HopData(prompt=prompt, system_prompt=SYSTEM, answer=answer, world=world, level=level)
            tasks.append(HopTask(data, self.config.task))
        return tasks
