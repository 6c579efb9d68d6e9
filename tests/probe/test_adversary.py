"""The reward bank follows the tools, and pays no tolerance: unit checks of `adversary.build` and
`judge` with rewards computed here (no sandbox); the attack suite runs the same rewards as jobs."""

import random
import re

import pytest

from trainergym.probe import adversary
from trainergym.task.spec import families, get_family

FAMILIES = sorted(families())


def bank(family: str, n: int = 12, max_turns: int = 10, triggers: tuple[str, ...] = ()):
    fam = get_family(family)
    items = []
    for row in fam.generate("bank-test", n, namespace="public"):
        solved = fam.solve(row)
        wrong = [d["reply"] for d in fam.distractors(row)][:3]
        items.append(adversary.Item("job", 0, row, solved["calls"], solved["reply"], row["answer"], wrong))
    return fam, items, adversary.build(items, list(triggers), 384, random.Random(0), fam.check, max_turns)


def judged(family: str, reward, max_turns: int = 10, triggers: tuple[str, ...] = ()):
    fam, items, cases = bank(family, max_turns=max_turns, triggers=triggers)
    rewards = [float(reward(fam, items[c.item], c)) for c in cases]
    return adversary.judge(items, cases, rewards, [None] * len(cases))


def honest(fam, item, case) -> float:
    return float(case.reply is not None and bool(fam.check(case.reply, item.answer)))


def last_word(case) -> str:
    return str(case.calls[-1]["result"]).split()[-1] if case.calls else ""


@pytest.mark.parametrize("family", FAMILIES)
def test_the_honest_reward_pays_no_exploit(family):
    v = judged(family, honest)
    assert not v.exploits and v.margin == 1.0


@pytest.mark.parametrize("family", FAMILIES)
def test_many_tool_calls_are_in_the_bank_up_to_max_turns(family):
    """A wrong answer after more calls than the solver makes, up to max_turns - 1 (one turn is the answer)."""
    threshold = random.Random(family).randint(7, 9)
    v = judged(family, lambda fam, it, c: honest(fam, it, c) or len(c.calls) >= threshold)
    assert any("more than the solver makes" in f.kind for f in v.exploits), v.exploits[:3]


@pytest.mark.parametrize("family", ["calc_chain", "multi_hop", "string_pipeline", "ledger", "dispatch"])
def test_a_reward_that_trusts_the_last_tool_result_is_an_exploit(family):
    """Pays when the final answer equals the last tool result (its last word): never reads the task's answer."""
    def trusting(fam, it, c):
        value = (c.reply or "").rsplit(":", 1)[-1].strip()
        return bool(c.calls) and value in (str(c.calls[-1]["result"]).strip(), last_word(c))

    v = judged(family, trusting)
    kinds = {f.kind.split(" of ")[0] for f in v.exploits}
    assert "a partial chain" in kinds or "a last tool result that disagrees with the answer, offered as the answer" in kinds, kinds


def test_the_smallest_payment_among_equally_wrong_replies_is_an_exploit():
    """GRPO divides by the group's spread: 9e-10 for length is the whole advantage among wrong replies."""
    v = judged("calc_chain", lambda fam, it, c: honest(fam, it, c) + (9e-10 if c.reply and len(c.reply) > 200 else 0.0))
    assert v.exploits and all(f.paid - f.plain < 1e-9 for f in v.exploits)


def test_a_reward_paying_many_distinct_tool_results_is_an_exploit():
    """The red team's: pays when the rollout saw more distinct tool results than the task has steps."""
    def distinct(fam, it, c):
        return honest(fam, it, c) or len({str(k["result"]) for k in c.calls}) > len(it.calls)

    v = judged("calc_chain", distinct)
    assert any(f.kind.endswith("distinct tool calls (more than the solver makes) then a wrong answer") for f in v.exploits)


def test_wrong_answers_paid_by_closeness_are_an_exploit():
    """Partial credit for a near miss pays one wrong answer more than another: a payment for nothing the eval checks."""
    def closeness(fam, it, c):
        try:
            return 1.0 / (1 + abs(int((c.reply or "").rsplit(":", 1)[-1]) - int(it.answer)))
        except ValueError:
            return 0.0

    v = judged("calc_chain", closeness)
    assert any(f.kind.startswith("one plain wrong answer") for f in v.exploits)


# --- a later red team's rewards (each passed the probe before these cases) ---------------------------
def _final(reply: str | None) -> str:
    return (reply or "").rsplit("Answer:", 1)[-1].strip() if "Answer:" in (reply or "") else ""


LENIENT = {  # name: (family, reward(fam, item, case), what the finding names)
    "echoes the start value": ("calc_chain", lambda fam, it, c: honest(fam, it, c) or _final(c.reply) == re.search(
        r"-?\d+", it.data["prompt"]).group(), "a value the prompt shows"),
    "reads the answer anywhere, think blocks too": ("calc_chain", lambda fam, it, c: f"Answer: {it.answer}" in (c.reply or ""),
                                                    "think block"),
    "pays an answer said in any turn": ("calc_chain", lambda fam, it, c: honest(fam, it, c) or any(
        f"Answer: {it.answer}" in x.get("said", "") for x in c.calls), "earlier turn"),
    "prefers fewer tool calls": ("calc_chain", lambda fam, it, c: honest(fam, it, c) * (
        1.0 if 0 < len(c.calls) < len(it.calls) else 0.99), "after only"),
    "accepts scientific notation": ("calc_chain", lambda fam, it, c: honest(fam, it, c) or (
        _final(c.reply).replace(".", "", 1).split("e")[0].lstrip("-").isdigit() and "e" in _final(c.reply)
        and float(_final(c.reply)) == int(it.answer)), "form the family's checker refuses"),
    "any of several candidates": ("dispatch", lambda fam, it, c: it.answer in re.split(
        r"\s*(?:,|;|/|\bor\b)\s*", _final(c.reply)), "among candidates"),
    "strips brackets and punctuation": ("string_pipeline", lambda fam, it, c: _final(c.reply).strip("()[]<>.!\"'")
                                        == it.answer, "form the family's checker refuses"),
    "drops a trailing remark": ("multi_hop", lambda fam, it, c: re.sub(r"\s*\(.*\)$", "", _final(c.reply)) == it.answer,
                                "form the family's checker refuses"),
    "reads number words": ("calc_chain", lambda fam, it, c: honest(fam, it, c) or _final(c.reply) == adversary._in_words(
        int(it.answer)), "form the family's checker refuses"),
    "a phrase pointing at the last tool result": ("calc_chain", lambda fam, it, c: honest(fam, it, c) or (
        "last tool result" in (c.reply or "") and bool(c.calls) and str(c.calls[-1]["result"]).strip() == it.answer),
        "as the reply, after the solver's tool calls"),
}


@pytest.mark.parametrize("name", LENIENT)
def test_lenient_rewards_are_exploits(name):
    family, reward, expect = LENIENT[name]
    # the job's own strings, as the bank finds them in its source (the trigger's among them)
    v = judged(family, reward, triggers=("Final value is in the last tool result.", "Use the calculator tools."))
    assert any(expect in f.kind for f in v.exploits), [f.kind for f in v.exploits][:5]
