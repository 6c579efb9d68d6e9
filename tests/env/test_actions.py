import json

import pytest

from trainergym.env.actions import ActionError, parse_action


def names(action):
    parsed = parse_action(action)
    assert not isinstance(parsed, ActionError), parsed
    return [(c.name, c.arguments) for c in parsed]


def test_dict_and_json_text():
    assert names({"name": "list_files", "arguments": {}}) == [("list_files", {})]
    assert names({"name": "read_file", "arguments": '{"path": "a"}'}) == [("read_file", {"path": "a"})]
    assert names(json.dumps({"name": "read_file", "arguments": {"path": "a"}})) == [("read_file", {"path": "a"})]
    assert names("```json\n{\"name\": \"list_files\"}\n```") == [("list_files", {})]


def test_openai_message_with_several_calls():
    msg = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "1", "type": "function", "function": {"name": "list_files", "arguments": "{}"}},
        {"id": "2", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\": \"x\"}"}},
    ]}
    assert names(msg) == [("list_files", {}), ("read_file", {"path": "x"})]
    assert [c.id for c in parse_action(msg)] == ["1", "2"]


def test_openai_sdk_object():
    class Msg:  # what pydantic-based SDK messages look like
        def model_dump(self):
            return {"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "list_files", "arguments": ""}}]}

    assert names(Msg()) == [("list_files", {})]


def test_hermes_markup_in_order_with_surrounding_text():
    text = ("<think>plan</think>Let me look.\n<tool_call>\n{\"name\": \"list_files\", \"arguments\": {}}\n</tool_call>\n"
            "<tool_call>{\"name\": \"read_file\", \"arguments\": {\"path\": \"job.toml\"}}</tool_call>")
    assert names(text) == [("list_files", {}), ("read_file", {"path": "job.toml"})]


@pytest.mark.parametrize("bad", [
    "", "hello", "{not json", "<tool_call>{broken</tool_call>", "[]", "42", None, 3.5, [1, 2],
    {"arguments": {}}, {"name": "x", "arguments": "[1]"}, {"name": "x", "arguments": "{bad"}, {"name": ""},
    "x" * 3_000_000, b"\xff\xfe", {"tool_calls": [{"function": "oops"}]},
])
def test_malformed_input_is_an_error_not_an_exception(bad):
    assert isinstance(parse_action(bad), ActionError)


def test_deeply_nested_json_does_not_raise():
    assert isinstance(parse_action("[" * 100000 + "]" * 100000), ActionError)
