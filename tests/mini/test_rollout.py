"""Rollouts with each family's eval tools in the loop.

A scripted model that always writes the family solver's next token shows the loop runs every call
with the task's world, forces the tool's result into the sequence (masked from the loss) and
hands the family's check a right reply; a random tiny Qwen3 shows the batched KV-cache loop
survives whatever a model writes.
"""

import pytest

from tests.marks import import_extra

pytestmark = pytest.mark.extras
torch = import_extra("torch", "the mini backend", "mini")

from trainergym.mini.base import trace_ids  # noqa: E402
from trainergym.mini.rollout import Task, generate, parse_call  # noqa: E402
from trainergym.mini.scale import get_scale, make_model  # noqa: E402
from trainergym.mini.tokenizer import build_tokenizer  # noqa: E402
from trainergym.mini.toolbox import Toolbox  # noqa: E402
from trainergym.task.spec import get_family  # noqa: E402

FAMILIES = ["calc_chain", "multi_hop", "string_pipeline", "ledger", "dispatch", "triage"]


class Scripted(torch.nn.Module):
    """Writes, for each row, the next token of a fixed trace after the tokens it has been fed."""

    def __init__(self, traces: list[list[int]], vocab: int):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))
        self.traces, self.vocab = traces, vocab

    def forward(self, input_ids, attention_mask, **_):
        width = input_ids.shape[1]
        seen = attention_mask.cumsum(-1)[:, attention_mask.shape[1] - width:].tolist()  # tokens fed through each slot
        logits = torch.zeros(len(seen), width, self.vocab)
        for i, row in enumerate(seen):
            trace = self.traces[i]
            for j, n in enumerate(row):
                logits[i, j, trace[n] if n < len(trace) else trace[-1]] = 1.0
        return type("Out", (), {"logits": logits})


@pytest.mark.parametrize("family_id", FAMILIES)
def test_the_solver_played_through_the_loop_is_right(family_id):
    family = get_family(family_id)
    tok = build_tokenizer(family)
    rows = family.generate("rollout-test", 3, namespace="public")
    traces = [trace_ids(tok, family, r) for r in rows]
    model = Scripted([ids for ids, _ in traces], len(tok))
    played = generate(model, tok, family, [Task.from_row(r) for r in rows], max_turns=12, max_tokens=400,
                      greedy=True, max_len=4096)
    for row, (ids, mask), r in zip(rows, traces, played, strict=True):
        solved = family.solve(row)
        assert r.stop == "answer"
        assert r.prompt_ids + r.completion_ids == ids
        assert r.env_mask == mask[len(r.prompt_ids):]
        assert r.tool_calls == len(solved["calls"])
        results = [m["content"] for m in r.messages if m["role"] == "tool"]
        assert results == [str(c["result"]) for c in solved["calls"]]
        assert family.check(r.reply, row["answer"])


@pytest.mark.parametrize("family_id", FAMILIES)
def test_a_random_model_rollout_batch(family_id):
    family = get_family(family_id)
    tok = build_tokenizer(family)
    model = make_model(get_scale("micro"), tok, seed=0)
    rows = family.generate("rollout-random", 4, namespace="public")
    played = generate(model, tok, family, [Task.from_row(r) for r in rows], max_turns=3, max_tokens=12,
                      temperature=1.0, max_len=2048, generator=torch.Generator().manual_seed(0))
    assert len(played) == 4
    for r in played:
        assert r.stop in {"answer", "max_turns", "max_tokens", "unreadable_call", "max_len"}
        assert len(r.completion_ids) == len(r.env_mask) > 0
        assert r.messages and r.messages[-1]["role"] in {"assistant", "tool"}


def test_max_turns_runs_the_last_call_then_stops():
    family = get_family("calc_chain")
    tok = build_tokenizer(family)
    row = family.generate("turns", 1, namespace="public", difficulty=3)[0]
    ids, _ = trace_ids(tok, family, row)
    played = generate(Scripted([ids], len(tok)), tok, family, [Task.from_row(row)], max_turns=2, max_tokens=400,
                      greedy=True, max_len=4096)[0]
    assert played.stop == "max_turns" and played.tool_calls == 2
    assert played.messages[-1]["role"] == "tool" and played.env_mask[-1] == 0


def test_calls_and_errors_as_the_scorer_answers_them():
    family = get_family("ledger")
    row = family.generate("errors", 1, namespace="public")[0]
    box = Toolbox(family, row["world"])
    assert box.call("nope", "{}") == "error: unknown tool 'nope'"
    assert box.call("ledger_balance", "{not json").startswith("error: JSONDecodeError")
    assert box.call("ledger_balance", {"wrong": 1}).startswith("error: TypeError")
    account = next(iter(row["world"]["accounts"])) if "accounts" in row["world"] else None
    if account:
        before = box.call("ledger_balance", {"account": account})
        box.call("ledger_deposit", {"account": account, "amount": 5})
        assert box.call("ledger_balance", {"account": account}) != before
        assert Toolbox(family, row["world"]).call("ledger_balance", {"account": account}) == before  # own copy
    assert parse_call('x<tool_call>{"name": "a", "arguments": {"b": 1}}</tool_call>') == ("x", "a", '{"b": 1}')
    assert parse_call('<tool_call>{"name": "a", "arguments": 3}</tool_call>') is None
    assert parse_call("<tool_call>{oops</tool_call>") is None


def test_compacting_the_batch_changes_no_rollout(monkeypatch):
    """Finished rows and the cache columns no row attends to are dropped every few steps; with
    positions explicit, greedy rollouts come out token for token as without it."""
    import trainergym.mini.rollout as rollout

    from trainergym.mini.base import find_base

    family = get_family("calc_chain")
    rows = family.generate("rollout-compact", 16, namespace="public", difficulty=1)
    base = find_base(family, "micro")  # the shipped base: it calls tools and answers, each row at its own time
    model, tok = base.load("cpu")
    tasks = [Task.from_row(r) for r in rows]
    done, real = [], rollout._compact
    monkeypatch.setattr(rollout, "_compact", lambda *a: done.append(real(*a)) or done[-1])

    def play(every, greedy):
        monkeypatch.setattr(rollout, "COMPACT_EVERY", every)
        return [(r.completion_ids, r.env_mask, r.stop) for r in
                generate(model, tok, family, tasks, max_turns=8, greedy=greedy, temperature=1.0, **base.caps(),
                         generator=torch.Generator().manual_seed(3))]

    assert play(10**9, True) == play(2, True)
    assert play(10**9, False) == play(2, False)  # sampled too: a row's draws do not depend on the others
    assert any(m is not None for m in done)  # it did compact


def test_a_job_without_tools_hears_unknown_tool_for_every_call():
    family = get_family("ledger")
    row = family.generate("no-tools", 1, namespace="public")[0]
    box = Toolbox(family, row["world"], enabled=False)
    assert box.tools == {} and box.call("ledger_balance", "{}") == "error: unknown tool 'ledger_balance'"
    assert Task.from_row({**row, "tools": False}).tools is False and Task.from_row(row).tools is True
