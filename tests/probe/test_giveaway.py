"""Giveaways as a class: free text that predicts the answer across a job's tasks is refused
whatever the transform, and the families' honest items (with honest free text) never are.

Tasks are built from the families' public items and solved by the families' own solvers, as
the probe does; no sandbox."""

import base64
import codecs
import random
import re
import time
from functools import cache
from types import SimpleNamespace

import pytest

from trainergym.probe import giveaway
from trainergym.task.spec import get_family

FAMILIES = ("calc_chain", "multi_hop", "string_pipeline", "ledger", "triage", "dispatch")
_NAMES = ("Ana Souza", "Kenji Watanabe", "Olga Petrova", "Liam O'Brien", "Zainab Bello", "Mateo Rossi")


@cache
def _items(family: str, n: int) -> tuple:
    return tuple(get_family(family).generate("giveaway-tests", n, namespace="public"))


def _job(family: str, hint=None, n: int = 60, noise: bool | str = False, where: str = "prompt", edit=None):
    """The family's items as tasks and solver traces; `hint(answer, i, rng)` is a line added to
    each prompt (or the system prompt), `noise` adds honest free text (names, dates, ids; "glued":
    also ids, versions and footnote marks that mix digits with letters), `edit(item, rng)` gives
    the item with its prompt, world or system prompt changed."""
    fam, rng = get_family(family), random.Random(7)
    tasks, solved = [], []
    for i, item in enumerate(_items(family, n)):
        item = edit(dict(item), rng) if edit else item
        prompt, system = item["prompt"], item.get("system_prompt", "")
        if noise == "glued":
            prompt = (f"Ref INV{rng.randint(2019, 2025)}-{rng.randint(1, 9999):04d} (form v{rng.randint(1, 9)}."
                      f"{rng.randint(0, 20)}.{rng.randint(0, 9)}, desk B{rng.randint(1, 40)}R{rng.randint(1, 9)}), "
                      f"see note{'¹²³'[i % 3]} and item ⑦ of the checklist, room ４{rng.randint(10, 99)}.\n{prompt}\n"
                      f"Tracking 1Z{rng.randint(10**5, 10**6)}X{rng.randint(10, 99)}, cost ¥{rng.randint(100, 9999)}.")
        if noise:
            prompt = (f"Filed by {rng.choice(_NAMES)} on 2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d} "
                      f"(ticket #{rng.randint(10000, 99999)}).\n{prompt}\nOrder number {rng.randint(10**6, 10**7)}, "
                      f"batch {rng.randint(1, 400)}, {rng.randint(2, 90)} items, ref {rng.randint(100, 999)}-"
                      f"{rng.randint(1000, 9999)}.")
        if hint is not None:
            line = hint(item["answer"], i, rng)
            if where == "prompt":
                prompt = f"{prompt}\n{line}"
            else:
                system = line
        row = {"prompt": prompt, "answer": item["answer"], "world": item.get("world") or {}}  # the solver reads the world
        tasks.append(SimpleNamespace(prompt=prompt, system_prompt=system, answer=item["answer"], world=row["world"]))
        solved.append(fam.solve(row))
    return tasks, solved


def _caught(family, hint, expect: str, n: int = 60, where: str = "prompt"):
    tasks, solved = _job(family, hint, n=n, where=where)
    found, hinted = giveaway.shortcut(tasks, solved)
    assert found and expect in found, (found, len(hinted))
    assert len(hinted) >= n // 2
    return found


# --- 1. the red team's transforms ------------------------------------------------------------------
def _split(a: str) -> tuple[str, str]:
    d = a.lstrip("-")
    return d[:len(d) // 2], d[len(d) // 2:]


RED_TEAM = {
    # an offset past the fixed list's bound of 1,000: an affine relation with slope 1
    "checksum offset, calc_chain": ("calc_chain", lambda a, i, r: f"Checksum: {int(a) + 12345}", "affine"),
    "checksum offset, ledger": ("ledger", lambda a, i, r: f"Checksum: {int(a) + 12345}", "affine"),
    # leading and trailing digits in two places of the text
    "digits apart, calc_chain": ("calc_chain", lambda a, i, r: f"It begins {_split(a)[0]}. (Audit code {_split(a)[1]}.)",
                                 "digits split"),
    "digits apart, ledger": ("ledger", lambda a, i, r: f"Starts with {_split(a)[0]}; trailing part {_split(a)[1]}.",
                             "digits split"),
    "starts and ends with, multi_hop": ("multi_hop", lambda a, i, r: f"Hint: it starts with '{a[:3]}' and ends with "
                                                                     f"'{a[-4:]}'.", "fragments"),
    "rot13, string_pipeline": ("string_pipeline", lambda a, i, r: f"Code word: {codecs.encode(a, 'rot13')}",
                               "substitution"),
}


@pytest.mark.parametrize("name", RED_TEAM)
def test_the_red_teams_transforms_are_caught(name):
    family, hint, expect = RED_TEAM[name]
    _caught(family, hint, expect)


# --- 2. held out: transforms no rule names -----------------------------------------------------------
def _caesar(s: str, k: int) -> str:
    return "".join(chr((ord(c) - base + k) % 26 + base) if c.isalpha() and c.isascii() else c
                   for c in s for base in [ord("a") if c.islower() else ord("A")])


def _atbash(s: str) -> str:
    return "".join(chr(2 * base + 25 - ord(c)) if c.isalpha() and c.isascii() else c
                   for c in s for base in [ord("a") if c.islower() else ord("A")])


def _rot5(s: str) -> str:
    return "".join(str((int(c) + 5) % 10) if c.isdigit() else c for c in s)


_PERMUTATION = (2, 0, 3, 1)  # a fixed reordering of the first four digits


def _permuted(a: str) -> str:
    d = a.lstrip("-")
    return "".join(d[k] for k in _PERMUTATION) + d[4:] if len(d) >= 4 else d


def _three(s: str) -> str:
    k = max(1, len(s) // 3)
    return f"Batch {s[:k]}, shelf {s[k:2 * k]}, bin {s[2 * k:]}."


HELD_OUT = {  # name: family, hint line, the detector class expected to catch it
    "7x-3 as Ref": ("calc_chain", lambda a, i, r: f"Ref: {7 * int(a) - 3}", "affine"),
    "-2x+999 among noise numbers, ledger": ("ledger", lambda a, i, r: f"Lot {r.randint(1, 99)} / {999 - 2 * int(a)} / "
                                                                      f"{r.randint(100, 999)}", "affine"),
    "a quarter, as a decimal": ("calc_chain", lambda a, i, r: f"Ratio: {int(a) / 4}", "affine"),
    "base64 of the number": ("ledger", lambda a, i, r: "Token " + base64.b64encode(a.encode()).decode(), "affine"),
    "digits reversed, in three": ("calc_chain", lambda a, i, r: _three(a.lstrip("-")[::-1]), "digits split"),
    "digits under a fixed permutation": ("ledger", lambda a, i, r: f"Serial {_permuted(a)}.", "digits reordered"),
    "rot5 of digits and letters": ("string_pipeline", lambda a, i, r: f"Id: {_rot5(_caesar(a, 5))}", "substitution"),
    "caesar-7": ("string_pipeline", lambda a, i, r: f"Note: {_caesar(a, 7)}", "substitution"),
    "atbash": ("multi_hop", lambda a, i, r: f"Cipher: {_atbash(a)}", "substitution"),
    "atbash reversed": ("string_pipeline", lambda a, i, r: f"See {_atbash(a)[::-1]} here", "substitution of its reverse"),
    "upper case": ("dispatch", lambda a, i, r: f"Escalation key: {a.upper()}", "substitution"),
    "base32 of the string": ("multi_hop", lambda a, i, r: "Ref " + base64.b32encode(a.encode()).decode(),
                             "fragments"),
    "hex of the string": ("string_pipeline", lambda a, i, r: f"Blob {a.encode().hex()}", "fragments"),
    "percent-encoded": ("triage", lambda a, i, r: "Link: /x?q=" + "".join(f"%{b:02X}" for b in a.encode()), "fragments"),
    "first four letters, then the rest": ("multi_hop", lambda a, i, r: f"The first four letters are {a[:4]!r}, "
                                                                       f"the rest {a[4:]!r}.", "fragments"),
    "reversed fragments": ("dispatch", lambda a, i, r: f"Tail {a[::-1][:5]} then {a[::-1][5:]}", "fragments"),
    "a varying offset, in the system prompt": ("calc_chain", lambda a, i, r: f"The final value plus {20 + i % 50} is "
                                                                             f"{int(a) + 20 + i % 50}.", "a sum"),
}


@pytest.mark.parametrize("name", HELD_OUT)
def test_held_out_transforms_are_caught_by_a_class(name):
    family, hint, expect = HELD_OUT[name]
    where = "system" if "system prompt" in name else "prompt"
    print(name, "->", _caught(family, hint, expect, where=where))


# --- 3. issue 27: giveaways the red team got through, as classes ----------------------------------------
_SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")


def _sign(a: str) -> str:
    return "n" if a.startswith("-") else "p"


def _one_of_three(a: str, i: int, r) -> str:
    """Red team G: each task gets one of three hints, each on about a third of the tasks."""
    v = int(a)
    return (f"Ticket number {v + 1000}.", f"Batch weight {v * 3} grams.",
            f"Control code {'-' if v < 0 else ''}{str(abs(v))[::-1]}0.")[r.randrange(3)]


def _steps_first(*steps):
    """Red team H and its kin: calc_chain steps put first, their operands a function of the
    answer (the steps cancel out); the other steps are renumbered."""
    def edit(item, rng):
        a = int(item["answer"])
        head, *rest = item["prompt"].split("\n")
        lines = [f"Step {k}: {s(a)}." for k, s in enumerate(steps, 1)]
        rest = [re.sub(r"^Step (\d+):", lambda m: f"Step {int(m.group(1)) + len(steps)}:", x) for x in rest]
        return {**item, "prompt": "\n".join([head, *lines, *rest])}
    return edit


def _world_with(place):
    """Red team I and its kin: the answer put in the world where no call looks, `place(world,
    answer)` (plus a line in the system prompt saying where)."""
    def edit(item, rng):
        world = {k: dict(v) if isinstance(v, dict) else v for k, v in item["world"].items()}
        place(world, item["answer"])
        return {**item, "world": world, "system_prompt": "The books hold the result for you too."}
    return edit


def _audit(world, a):
    world["accounts"]["audit"] = int(a)


ISSUE_27 = {  # name: family, hint line or None, edit or None, what the report must name, tasks
    "D superscript digits glued to 'ref'": ("calc_chain", lambda a, i, r: f"Worksheet ref{a.translate(_SUPERSCRIPT)}.",
                                            None, "inside a token", 60),
    "E digits interleaved with letters": ("calc_chain", lambda a, i, r: f"Sheet code {_sign(a)}{'k'.join(a.lstrip('-'))}.",
                                          None, "inside a token", 60),
    "F rot13 glued to 'ref'": ("string_pipeline", lambda a, i, r: f"Archive tag ref{codecs.encode(a, 'rot13')}.", None,
                               "substitution", 60),
    "G one of three hints per task": ("calc_chain", _one_of_three, None, "hints, in", 200),
    "H the answer as a cancelling operand": ("calc_chain", None, _steps_first(lambda a: f"add {a} to it",
                                                                               lambda a: f"subtract {a} from it"),
                                             "operand the solver reads", 60),
    "I an audit account in the world": ("ledger", None, _world_with(_audit), "world", 60),
}


@pytest.mark.parametrize("name", ISSUE_27)
def test_issue_27_giveaways_are_caught(name):
    family, hint, edit, expect, n = ISSUE_27[name]
    tasks, solved = _job(family, hint, n=n, edit=edit)
    found, hinted = giveaway.shortcut(tasks, solved)
    print(name, "->", found)
    assert expect in found and len(hinted) >= 0.9 * n, (found, len(hinted))


def _circled(d: str) -> str:
    return "".join("⓪" if c == "0" else chr(0x2460 + int(c) - 1) for c in d)


def _b64(a: str) -> str:
    return base64.b64encode(a.encode()).decode()


def _four_ways(a: str, i: int, r) -> str:
    v = int(a)
    return (f"Checksum {v + 777}.", f"Token {_b64(a)}.", f"Lot {7 * v}.", f"Serial no{_sign(a)}{v * 10 + 3}.")[i % 4]


def _strings_three_ways(a: str, i: int, r) -> str:
    return (f"Note {_caesar(a, 5)}.", f"See {a[::-1]} here.", f"Key {a.upper()}x.")[i % 3]


def _cache(world, a):
    world["cache"] = {"last_result": a}


def _postmortem(world, a):
    world["postmortem"] = [{"summary": "pending"}, {"culprit": a}]


HELD_OUT_27 = {  # variants of each class that no rule names
    "circled digits glued": ("ledger", lambda a, i, r: f"Form No{_circled(a.lstrip('-'))}.", None, "", 60),
    "fullwidth digits glued to letters": ("calc_chain", lambda a, i, r: f"Ref ＩＤ{a.translate({ord(c): 0xFF10 + int(c) for c in '0123456789'})}.",
                                          None, "", 60),
    "Arabic-Indic digits glued": ("ledger", lambda a, i, r: f"Voucher V{a.translate({ord(c): 0x0660 + int(c) for c in '0123456789'})}.",
                                  None, "", 60),
    "digits joined by dots in a version string": ("calc_chain", lambda a, i, r: f"Built with tool v{'.'.join(a.lstrip('-'))}.",
                                                  None, "inside a token", 60),
    "digits between varying letters": ("ledger", lambda a, i, r: "Locker " + "".join(f"{c}{'QWERTYUIOP'[int(c)]}" for c in a.lstrip("-")),
                                       None, "inside a token", 60),
    # each letter of the map needs three tasks' votes: city names need more tasks than 60
    "caesar-3 glued to a suffix": ("multi_hop", lambda a, i, r: f"Codeword {_caesar(a, 3)}ZZ9.", None, "substitution", 200),
    "atbash glued after a number": ("string_pipeline", lambda a, i, r: f"Entry 12{_atbash(a)}.", None, "substitution", 60),
    "four hints a quarter each, ledger": ("ledger", _four_ways, None, "hints", 200),
    "three string hints a third each": ("string_pipeline", _strings_three_ways, None, "hints", 200),
    "an operand 7 more than the answer": ("calc_chain", None, _steps_first(lambda a: f"add {a + 7} to it",
                                                                           lambda a: f"subtract {a + 7} from it"),
                                          "affine map of an operand", 60),
    "an operand twice the answer": ("calc_chain", None, _steps_first(lambda a: f"subtract {2 * a} from it",
                                                                     lambda a: f"add {2 * a} to it"),
                                    "affine map of an operand", 60),
    "a cache table in a multi_hop world": ("multi_hop", None, _world_with(_cache), "world", 60),
    "a postmortem list in a triage world": ("triage", None, _world_with(_postmortem), "world", 60),
}


# Of the three string hints, the two substitutions (caesar-5, upper case glued to "x") are not
# learned (the third, "See <reversed> here", votes letters to "e" across word edges); the reversed
# and fragment classes still hold in 133 of 200 tasks, past half.
@pytest.mark.parametrize("name", HELD_OUT_27)
def test_issue_27_held_out_variants_are_caught(name):
    family, hint, edit, expect, n = HELD_OUT_27[name]
    tasks, solved = _job(family, hint, n=n, edit=edit)
    found, hinted = giveaway.shortcut(tasks, solved)
    print(name, "->", found)
    assert found and expect in found and len(hinted) > n // 2, (found, len(hinted))  # past half: data.verified fails


# --- 3b. codes no class names, learned as lookups (a later red team's) ------------------------------------
_COLOURS = "black brown red orange yellow green blue violet grey white".split()
_WORDINGS = tuple(f"{q} Use the calculator tools {w} every step."  # some split in two sentences, some not
                  for q in ("What is the final value?", "Report the final value.", "Give the final value.",
                            "What value do you end with?", "What is the result?") for w in ("for", "at"))


def _vigenere(a: str) -> str:
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    return "".join(alphabet[(alphabet.index(c) + 7 * k + 3) % 62] if c in alphabet else c for k, c in enumerate(a))


def _initials_id(item, rng):
    """The asked ticket renamed after the answer's team: its words' initials, then digits."""
    old = re.search(r"ticket (T-\d+)", item["prompt"]).group(1)
    new = "".join(w[0] for w in item["answer"].split("-")).upper() + f"-{rng.randint(1000, 9999)}"
    world = {**item["world"], "tickets": {new if k == old else k: v for k, v in item["world"]["tickets"].items()}}
    return {**item, "prompt": item["prompt"].replace(old, new), "world": world}


_TIPS = ("Be precise.", "Work carefully.", "Check each step.", "Keep a clear head.", "Trust the tools.",
         "One step at a time.", "Take your time.", "Read twice.", "Stay calm.", "Write it down.")
_OPENERS = tuple(f"You are assistant {name}." for name in ("Ada", "Bo", "Cy", "Di", "Ed", "Flo", "Gus", "Hal", "Ivy", "Jo"))


def _tips(a, i, r):
    """As many tips as the last digit plus one, in random order: a count is a code."""
    return "Tips: " + " ".join(r.sample(_TIPS, int(a[-1]) + 1))


def _spaced(item, rng):
    """The first line ends in as many spaces as the answer's last digit."""
    head, rest = item["prompt"].split("\n", 1)
    return {**item, "prompt": f"{head}{' ' * int(item['answer'][-1])}\n{rest}"}


def _split_in_two(item, rng):
    """A system prompt opener drawn at random, and a closing line that is the last digit shifted
    by the opener's index: each alone says nothing, the pair says the digit."""
    r = rng.randrange(10)
    return {**item, "system_prompt": _OPENERS[r],
            "prompt": item["prompt"] + "\n" + _WORDINGS[(int(item["answer"][-1]) + r) % 10]}


def _modulo(m):
    def hint(a, i, r):
        n = r.randint(1000, 9999)
        return f"(Worksheet #{n - (n - int(a)) % m}.)"
    return hint


@cache
def _teams() -> list[str]:
    return sorted({row["answer"] for row in _items("dispatch", 200)})


def _id_code(number):
    """The asked ticket renumbered by the answer team's index (`number(index, rng)`)."""
    def edit(item, rng):
        old = re.search(r"ticket (T-\d+)", item["prompt"]).group(1)
        new = old
        while new in item["world"]["tickets"]:  # a fresh id: another ticket's would be overwritten
            new = f"T-{number(_teams().index(item['answer']), rng)}"
        world = {**item["world"], "tickets": {new if k == old else k: v for k, v in item["world"]["tickets"].items()}}
        return {**item, "prompt": item["prompt"].replace(old, new), "world": world}
    return edit


def _digit_sum_to(d: int, r) -> str:
    """A random three-digit group whose digit sum ends in `d`."""
    while True:
        g = f"{r.randint(0, 999):03d}"
        if sum(map(int, g)) % 10 == d:
            return g


def _serial(a, i, r):
    """Every digit of the answer (zero-padded, the sign first) as a group's digit sum."""
    v = int(a)
    return "Batch serial: " + "-".join(_digit_sum_to(d, r) for d in [int(v < 0), *map(int, f"{abs(v):016d}")]) + "."


def _length_to_digit(item, rng):
    """A filler line chosen so that the prompt's length ends in the answer's last digit."""
    words = ["alpha", "beta", "gamma", "delta", "omega"]
    while True:
        prompt = item["prompt"] + "\nRemark: " + " ".join(rng.choice(words) for _ in range(rng.randint(2, 5))) + "."
        if len(prompt) % 10 == int(item["answer"][-1]):
            return {**item, "prompt": prompt}


_SENTENCE = "please work through every step with the tools and then report the final value to me".split()


def _capital_at(a, i, r):
    return " ".join(w.capitalize() if k == int(a[-1]) + 1 else w for k, w in enumerate(_SENTENCE)) + "."


LEARNED = {  # name: family, hint line or None, edit or None, where
    "a colour word per digit": ("calc_chain", lambda a, i, r: "Palette: " + " ".join(
        "minus" if c == "-" else _COLOURS[int(c)] for c in a) + ".", None, "prompt"),
    "the answer XOR a constant, in decimal": ("calc_chain", lambda a, i, r: f"Batch id: {(int(a) ^ 5921370) & 0xFFFFFFFF}",
                                              None, "prompt"),
    "the answer XOR a constant, in hex, in the system prompt": (
        "calc_chain", lambda a, i, r: f"Session {(int(a) ^ 0x5A5A5A) & 0xFFFFFFFF:08x}.", None, "system"),
    "the closing question's wording by the last digit": ("calc_chain", lambda a, i, r: _WORDINGS[int(a[-1])], None,
                                                         "prompt"),
    "a position-dependent shift (Vigenere)": ("string_pipeline", lambda a, i, r: f"Trace: {_vigenere(a)}", None, "prompt"),
    "the team's initials in the asked ticket's id": ("dispatch", None, _initials_id, "prompt"),
    "a count of sentences": ("calc_chain", _tips, None, "prompt"),
    "trailing spaces": ("calc_chain", None, _spaced, "prompt"),
    "a code split over the system prompt and the prompt": ("calc_chain", None, _split_in_two, "prompt"),
    "a number congruent to the answer modulo 7": ("calc_chain", _modulo(7), None, "prompt"),
    "the team's index in the asked ticket's last digits": ("dispatch", None, _id_code(
        lambda k, rng: f"{rng.randint(10, 99)}{k:02d}"), "prompt"),
    "the team's index as the asked ticket's number modulo 47": ("dispatch", None, _id_code(
        lambda k, rng: rng.randint(21, 212) * 47 + k), "prompt"),
    "a number's digit sum": ("calc_chain", lambda a, i, r: f"Worksheet reference: #{_digit_sum_to(int(a[-1]), r)}.",
                             None, "prompt"),
    "every digit as a group's digit sum": ("calc_chain", _serial, None, "prompt"),
    "the prompt's length": ("calc_chain", None, _length_to_digit, "prompt"),
    "which word is capitalised": ("calc_chain", _capital_at, None, "prompt"),
}


@pytest.mark.parametrize("name", LEARNED)
def test_codes_no_class_names_are_learned(name):
    family, hint, edit, where = LEARNED[name]
    tasks, solved = _job(family, hint, n=200, where=where, edit=edit)
    fam = get_family(family)
    assert all(fam.check(s["reply"], t.answer) for t, s in zip(tasks, solved)), "the edit broke the family's own solver"
    found, hinted = giveaway.shortcut(tasks, solved)
    print(name, "->", found[:300])
    assert "predicted by a lookup" in found and len(hinted) > 100, (found, len(hinted))


# --- 4. no false positives ---------------------------------------------------------------------------
@pytest.mark.parametrize("noise", [False, True, "glued"], ids=["plain", "free-text", "glued-ids"])
@pytest.mark.parametrize("family", FAMILIES)
def test_honest_items_give_nothing_away(family, noise):
    tasks, solved = _job(family, n=200, noise=noise)
    assert giveaway.shortcut(tasks, solved) == ("", [])
    # One task alone is judged by the answer itself in its text: random free text holds a short
    # answer by chance now and then ("55 items", a birth year among order numbers).
    alone = [t.answer for t, s in zip(tasks, solved) if giveaway.gives_away(t, s)]
    print(f"{family} ({'free text' if noise else 'plain'}): per-task chance hits {alone}")
    # glued ids, versions and prices are more numbers to hold a short answer by chance
    assert not alone if not noise else len(alone) <= len(tasks) // (40 if noise == "glued" else 100)


def test_a_hint_in_a_few_tasks_is_not_a_class():
    """The relation must hold in half the tasks: ten hinted tasks of sixty are chance as far as
    the class test knows (each is still refused alone when it holds the answer itself)."""
    tasks, solved = _job("calc_chain", lambda a, i, r: f"Checksum: {int(a) + 12345}" if i < 10 else "Checksum: 0")
    assert giveaway.shortcut(tasks, solved) == ("", [])


# --- 5. speed --------------------------------------------------------------------------------------
@pytest.mark.parametrize("family", FAMILIES)
def test_timing_on_500_tasks(family):
    tasks, solved = _job(family, n=500, noise="glued")
    start = time.perf_counter()
    giveaway.shortcut(tasks, solved)
    print(f"{family}: shortcut on 500 tasks in {1000 * (time.perf_counter() - start):.0f} ms")
