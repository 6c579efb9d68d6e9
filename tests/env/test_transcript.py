from trainergym.env import transcript

RECORDS = [
    {"event": "reset", "observation": "TASK t: do it", "seed": 4, "task": "t"},
    {"event": "step", "turn": 1, "action": {"name": "write_file", "arguments": {"path": "a.py", "content": "x = 1\ny = 2\n"}},
     "observation": "wrote a.py", "reward": 0.0, "terminated": False, "truncated": False, "info": {}},
    {"event": "step", "turn": 2, "observation": "[list_files] a.py\n\n[read_file] x = 1", "reward": 0.0,
     "terminated": False, "truncated": False, "info": {},
     "action": {"role": "assistant", "content": "Looking.", "tool_calls": [
         {"id": "c1", "type": "function", "function": {"name": "list_files", "arguments": "{}"}},
         {"id": "c2", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.py"}'}}]}},
    {"event": "step", "turn": 3, "action": "I am thinking, no call.", "observation": "error: no tool call",
     "reward": 0.0, "terminated": False, "truncated": False, "info": {}},
    {"event": "step", "turn": 4, "action": {"role": "assistant", "unparsed_tool_calls": ["<tool_call>{"]},
     "observation": "error: the tool call could not be parsed", "reward": 0.0, "terminated": False,
     "truncated": False, "info": {}},
    {"event": "end", "reason": "budget spent", "reward": -0.1, "cancelled_jobs": ["job-1"]},
]


def test_every_action_form_and_the_end():
    text = transcript.render(RECORDS)
    assert text.startswith("=== task t, seed 4 ===\n  TASK t: do it\n")
    assert 'call write_file path="a.py"\n  content:\n    x = 1\n    y = 2\n' in text  # multi-line: a block
    assert "agent:\n  Looking.\ncall list_files\ncall read_file path=\"a.py\"\n" in text
    assert "agent:\n  I am thinking, no call.\n" in text
    assert "agent (a call that did not parse):\n  <tool_call>{" in text
    assert text.endswith("=== ended early (budget spent): reward -0.100 ===\ncancelled job(s): job-1\n")


def test_load_reads_a_run_directory_or_its_file_and_max_chars_clips(tmp_path):
    import json

    (tmp_path / "trajectory.jsonl").write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    assert transcript.load(tmp_path) == transcript.load(tmp_path / "trajectory.jsonl") == RECORDS
    clipped = transcript.render(RECORDS, max_chars=5)
    assert "  TASK ... (8 more characters)" in clipped
