"""The mini tokenizer: its chat template renders what the rollout loop encodes, for every family, and
it survives save_pretrained / from_pretrained."""

import pytest

from tests.marks import import_extra

pytestmark = pytest.mark.extras
import_extra("transformers", "the mini backend", "mini")

from trainergym.mini.tokenizer import (  # noqa: E402
    IM_END, build_tokenizer, load_tokenizer, mine_phrases, render_call, render_prompt, render_response,
)
from trainergym.task.spec import get_family  # noqa: E402

FAMILIES = ["calc_chain", "multi_hop", "string_pipeline", "ledger", "dispatch", "triage"]


def _solved_messages(family):
    row = family.generate("tok-test", 1, namespace="public")[0]
    solved = family.solve(row)
    messages = [{"role": "user", "content": row["prompt"]}]
    text = render_prompt(row["prompt"])
    for i, c in enumerate(solved["calls"]):
        messages.append({"role": "assistant", "content": "", "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": c["tool"], "arguments": c["arguments"]}}]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": c["result"]})
        text += render_call(c["tool"], c["arguments"]) + render_response(c["result"])
    messages.append({"role": "assistant", "content": solved["reply"]})
    return messages, text + solved["reply"] + IM_END + "\n"


@pytest.mark.parametrize("family_id", FAMILIES)
def test_template_round_trip_and_save_load(family_id, tmp_path):
    family = get_family(family_id)
    tok = build_tokenizer(family)
    messages, text = _solved_messages(family)
    assert tok.apply_chat_template(messages, tokenize=False) == text
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert tok.decode(ids) == text
    assert tok.unk_token_id not in ids
    # multi-character tokens keep rollouts short: fewer tokens than characters
    assert len(ids) < 0.8 * len(text)
    tok.save_pretrained(tmp_path)
    again = load_tokenizer(tmp_path)
    assert again(text, add_special_tokens=False)["input_ids"] == ids
    assert again.apply_chat_template(messages, tokenize=False) == text
    assert again.eos_token == IM_END and again.pad_token_id != again.eos_token_id


def test_generation_prompt_and_string_arguments():
    tok = build_tokenizer(get_family("calc_chain"))
    msgs = [{"role": "user", "content": "hi"}]
    assert tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True) == render_prompt("hi")
    call = {"role": "assistant", "content": "", "tool_calls": [
        {"id": "x", "type": "function", "function": {"name": "calc_add", "arguments": '{"a": 1, "b": 2}'}}]}
    out = tok.apply_chat_template(msgs + [call, {"role": "tool", "content": "3"}], tokenize=False,
                                  add_generation_prompt=True)
    assert out.endswith(render_call("calc_add", {"a": 1, "b": 2}) + render_response("3"))  # no new header


def test_phrases_are_the_repeated_text_not_the_data():
    texts = [f"Start with {n}.\nStep 1: add {n + 1} to it." for n in range(100)]
    phrases = mine_phrases(texts)
    assert "Start with " in phrases and " to it." in phrases
    assert not any(ch.isdigit() for p in phrases for ch in p)
