"""The agent's tools (trainergym.env.tools): the table and its OpenAI schemas, argument
validation with the messages the agent sees, and what each workspace tool returns or refuses.
`submit_job` is only specified here; the env runs it (tests/env/test_core.py)."""

import json

import pytest

from trainergym.env.tools import (TOOLS, EditFile, ListFiles, NoArgs, ReadFile, ToolOutcome, WriteFile,
                                  run_workspace_tool, validate_args)
from trainergym.env.workspace import Limits, Workspace, lay_out
from trainergym.task import baselines


@pytest.fixture
def ws(tmp_path, task):
    """A fresh episode workspace for calc_chain (read-only INSTRUCTIONS.md and eval_tools.json)."""
    return lay_out(tmp_path / "ws", task)


def run(ws, task, name, arguments):
    """What the env does with one call: validate, then execute (or the error string)."""
    args = validate_args(name, arguments)
    assert not isinstance(args, str), args
    return run_workspace_tool(ws, task, name, args)


# --- the table -------------------------------------------------------------------------------
def test_the_table_names_six_tools_in_order_with_their_argument_models():
    assert list(TOOLS) == ["read_file", "write_file", "edit_file", "list_files", "get_baseline_scores", "submit_job"]
    assert {name: spec.args for name, spec in TOOLS.items()} == {
        "read_file": ReadFile, "write_file": WriteFile, "edit_file": EditFile, "list_files": ListFiles,
        "get_baseline_scores": NoArgs, "submit_job": NoArgs}
    assert all(spec.name == name and spec.description.endswith(".") for name, spec in TOOLS.items())


@pytest.mark.parametrize("name, required, properties", [
    ("read_file", ["path"], ["path"]),
    ("write_file", ["path", "content"], ["path", "content"]),
    ("edit_file", ["path", "old_string", "new_string"], ["path", "old_string", "new_string"]),
    ("list_files", None, ["path"]),
    ("get_baseline_scores", None, []),
    ("submit_job", None, []),
])
def test_schemas_are_closed_openai_functions_without_pydantic_titles(name, required, properties):
    schema = TOOLS[name].schema
    assert schema["type"] == "function" and schema["function"]["name"] == name
    assert schema["function"]["description"] == TOOLS[name].description
    params = schema["function"]["parameters"]
    assert params["type"] == "object" and params["additionalProperties"] is False
    assert "title" not in params and list(params["properties"]) == properties
    assert params.get("required") == required
    for prop in params["properties"].values():
        assert "title" not in prop and prop["type"] == "string" and prop["description"]
    json.dumps(schema)  # sendable as is


def test_list_files_path_defaults_to_the_root_in_schema_and_model():
    assert TOOLS["list_files"].schema["function"]["parameters"]["properties"]["path"]["default"] == "."
    assert validate_args("list_files", {}) == ListFiles(path=".")


def test_schema_is_a_fresh_dict_each_time():
    first = TOOLS["read_file"].schema
    first["function"]["parameters"]["properties"].clear()
    assert TOOLS["read_file"].schema["function"]["parameters"]["properties"]


# --- argument validation ---------------------------------------------------------------------
def test_valid_arguments_parse_to_the_tools_model():
    assert validate_args("read_file", {"path": "job.toml"}) == ReadFile(path="job.toml")
    assert validate_args("edit_file", {"path": "a", "old_string": "x", "new_string": ""}) == \
        EditFile(path="a", old_string="x", new_string="")
    assert validate_args("submit_job", {}) == NoArgs()
    assert type(validate_args("get_baseline_scores", {})) is NoArgs


@pytest.mark.parametrize("name, arguments, message", [
    ("nope", {}, "unknown tool 'nope'; available tools: read_file, write_file, edit_file, list_files, "
                 "get_baseline_scores, submit_job"),
    ("READ_FILE", {"path": "a"}, "unknown tool 'READ_FILE'; available tools: read_file, "),
    ("read_file", {}, "bad arguments for read_file: path: Field required"),
    ("read_file", {"path": 3}, "bad arguments for read_file: path: Input should be a valid string"),
    ("read_file", {"path": b"a"}, "bad arguments for read_file: path: Input should be a valid string"),
    ("read_file", {"path": "a", "bogus": 1}, "bad arguments for read_file: bogus: Extra inputs are not permitted"),
    ("read_file", [1], "bad arguments for read_file: arguments: Input should be a valid dictionary"),
    ("write_file", {"path": "a", "content": 5, "extra": True},
     "bad arguments for write_file: content: Input should be a valid string; extra: Extra inputs are not permitted"),
    ("list_files", {"path": None}, "bad arguments for list_files: path: Input should be a valid string"),
    ("submit_job", {"force": True}, "bad arguments for submit_job: force: Extra inputs are not permitted"),
])
def test_bad_arguments_are_a_message_naming_what_is_wrong(name, arguments, message):
    out = validate_args(name, arguments)
    assert isinstance(out, str) and out.startswith(message), out


@pytest.mark.parametrize("arguments, where, found", [
    ({"path": "a", "content": "x\ud800"}, "content", "U+D800 at character 1"),
    ({"path": {"a": ["ok", "\udfff"]}}, "path.a.1", "U+DFFF at character 0"),  # nested: a dotted path, before types
    ({"path": "a", "bogus": ("x", "ab\udc80")}, "bogus.1", "U+DC80 at character 2"),  # before unknown keys
])
def test_text_that_is_not_utf8_is_refused_before_validation_naming_the_argument(arguments, where, found):
    out = validate_args("write_file", arguments)
    assert out == (f"bad arguments for write_file: argument '{where}' holds text that is not valid UTF-8 "
                   f"(a lone surrogate {found}); send plain UTF-8 text")
    out.encode("utf-8")  # the message itself never holds the surrogate


def test_an_argument_name_that_is_not_utf8_is_refused():
    assert validate_args("read_file", {"pa\ud800th": "a"}) == (
        "bad arguments for read_file: an argument name holds text that is not valid UTF-8 (a lone surrogate U+D800 "
        "at character 2); send plain UTF-8 text")


def test_an_unknown_tool_is_named_before_its_arguments_are_looked_at():
    assert validate_args("rm_rf", {"path": "\ud800"}).startswith("unknown tool 'rm_rf'")


# --- the workspace tools -----------------------------------------------------------------------
def test_write_read_edit_and_list(ws, task):
    out = run(ws, task, "write_file", {"path": "./notes//a.md", "content": "héllo\nworld\n"})
    assert out == ToolOutcome(ok=True, content="wrote notes/a.md (13 bytes)")  # UTF-8 bytes, normalised path
    assert run(ws, task, "read_file", {"path": "notes/a.md"}) == ToolOutcome(ok=True, content="héllo\nworld\n")
    assert run(ws, task, "edit_file", {"path": "notes/a.md", "old_string": "world", "new_string": "there"}) == \
        ToolOutcome(ok=True, content="edited notes/a.md")
    assert (ws.root / "notes" / "a.md").read_text() == "héllo\nthere\n"
    listing = run(ws, task, "list_files", {})
    assert listing.ok and "notes/a.md  (13 bytes)" in listing.content
    assert "INSTRUCTIONS.md" in listing.content and "read-only" in listing.content
    assert run(ws, task, "list_files", {"path": "notes"}) == ToolOutcome(ok=True, content="notes/a.md  (13 bytes)")


@pytest.mark.parametrize("name, arguments, says", [
    ("read_file", {"path": "missing.md"}, "missing.md does not exist"),
    ("read_file", {"path": "../outside"}, "contains '..'"),
    ("read_file", {"path": "/etc/passwd"}, "is absolute"),
    ("write_file", {"path": "INSTRUCTIONS.md", "content": "mine now"}, "INSTRUCTIONS.md is read-only"),
    ("write_file", {"path": "eval_tools.json", "content": "[]"}, "eval_tools.json is read-only"),
    ("write_file", {"path": ".", "content": "x"}, "cannot write to the workspace root"),
    ("edit_file", {"path": "job.toml", "old_string": "", "new_string": "x"}, "old_string is empty"),
    ("edit_file", {"path": "job.toml", "old_string": "no such text", "new_string": "x"}, "old_string was not found"),
    ("list_files", {"path": "job.toml"}, "job.toml is not a directory"),
])
def test_refusals_are_observations_not_exceptions(ws, task, name, arguments, says):
    before = ws.files()
    out = run(ws, task, name, arguments)
    assert not out.ok and out.content.startswith("refused: ") and says in out.content, out
    assert ws.files() == before  # nothing changed


def test_edit_refuses_an_ambiguous_match_and_a_read_only_file(ws, task):
    run(ws, task, "write_file", {"path": "twice.txt", "content": "ab ab"})
    out = run(ws, task, "edit_file", {"path": "twice.txt", "old_string": "ab", "new_string": "x"})
    assert out == ToolOutcome(ok=False, content="refused: old_string occurs 2 times in twice.txt; include more "
                                                "context so it matches once")
    given = (ws.root / "INSTRUCTIONS.md").read_text()
    out = run(ws, task, "edit_file", {"path": "INSTRUCTIONS.md", "old_string": given, "new_string": "obey me"})
    assert out == ToolOutcome(ok=False, content="refused: INSTRUCTIONS.md is read-only (it is given by the task)")
    assert (ws.root / "INSTRUCTIONS.md").read_text() == given and (ws.root / "twice.txt").read_text() == "ab ab"


def test_the_workspace_caps_are_refused_through_the_tool(tmp_path, task):
    small = Workspace(tmp_path / "small", limits=Limits(max_file_bytes=10))
    out = run(small, task, "write_file", {"path": "big.txt", "content": "x" * 11})
    assert out == ToolOutcome(ok=False, content="refused: big.txt would be 11 bytes; the limit is 10 bytes per file")
    assert not (small.root / "big.txt").exists()


def test_a_disk_error_is_a_refusal_and_the_episode_goes_on(ws, task, monkeypatch):
    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Workspace, "write", full)
    assert run(ws, task, "write_file", {"path": "a", "content": "x"}) == \
        ToolOutcome(ok=False, content="refused: OSError: No space left on device")
    monkeypatch.setattr(Workspace, "read", lambda *a, **k: (_ for _ in ()).throw(PermissionError("no strerror")))
    assert run(ws, task, "read_file", {"path": "a"}) == \
        ToolOutcome(ok=False, content="refused: PermissionError: no strerror")


def test_a_unicode_error_past_validation_is_a_refusal(ws, task, monkeypatch):
    def bad(*args, **kwargs):
        raise UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed")

    monkeypatch.setattr(Workspace, "listing", bad)
    assert run(ws, task, "list_files", {}) == \
        ToolOutcome(ok=False, content="refused: text that is not valid UTF-8 (surrogates not allowed)")


def test_other_exceptions_are_not_swallowed(ws, task, monkeypatch):
    monkeypatch.setattr(Workspace, "read", lambda *a, **k: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        run(ws, task, "read_file", {"path": "job.toml"})


def test_get_baseline_scores_gives_the_best_and_every_row_with_provenance(ws, task):
    out = run(ws, task, "get_baseline_scores", {})
    assert out.ok
    data = json.loads(out.content)
    rows = baselines.for_family("calc_chain")
    assert data["family"] == "calc_chain"
    assert (data["best_pre"], data["best_model"]) == (0.742, "Qwen/Qwen3-1.7B")
    assert data["best_pre"] == max(b.score for b in rows)
    assert [s["model"] for s in data["scores"]] == [b.model for b in rows]
    reported = next(s for s in data["scores"] if s["source"] == "reported")
    surrogate = next(s for s in data["scores"] if s["source"] == "surrogate")
    assert reported["ci95"] == list(baselines.best_pre("calc_chain").ci95)
    assert "ci95" not in surrogate and "date" not in surrogate  # None fields are left out


def test_get_baseline_scores_for_a_family_without_baselines(ws, task):
    nobody = task.model_copy(update={"family": "no_such_family"})
    out = run(ws, nobody, "get_baseline_scores", {})
    assert out.ok and json.loads(out.content) == {"family": "no_such_family", "best_pre": None, "best_model": None,
                                                  "scores": []}


def test_submit_job_is_not_run_here(ws, task):
    with pytest.raises(ValueError, match="submit_job is not a workspace tool"):
        run(ws, task, "submit_job", {})
    with pytest.raises(ValueError, match="made_up is not a workspace tool"):
        run_workspace_tool(ws, task, "made_up", NoArgs())
