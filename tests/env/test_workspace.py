import os

import pytest

from trainergym.env.workspace import Limits, Workspace, WorkspaceError, lay_out


@pytest.fixture
def ws(tmp_path):
    return Workspace(tmp_path / "ws", readonly={"INSTRUCTIONS.md"}, limits=Limits(max_file_bytes=1000, max_files=5, max_total_bytes=2500))


def test_write_read_edit_list(ws):
    ws.write("taskset/__init__.py", "x = 1\n")
    assert ws.read("taskset/__init__.py") == "x = 1\n"
    ws.edit("taskset/__init__.py", "x = 1", "x = 2")
    assert ws.read("./taskset//__init__.py") == "x = 2\n"
    assert "taskset/__init__.py" in ws.listing()
    assert ws.files() == {"taskset/__init__.py": 6}


@pytest.mark.parametrize("path", ["../x", "a/../../x", "/etc/passwd", "~/x", "\\abs", "C:/x", "", "a\x00b", "a/" * 20 + "x"])
def test_escapes_are_refused(ws, path):
    with pytest.raises(WorkspaceError):
        ws.write(path, "x")
    with pytest.raises(WorkspaceError):
        ws.read(path)


def test_symlinks_are_refused_anywhere_on_the_path(ws, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("s")
    os.symlink(outside, ws.root / "link")
    os.symlink(outside / "secret", ws.root / "file_link")
    for path in ("link/secret", "link/new", "file_link"):
        with pytest.raises(WorkspaceError, match="symlink"):
            ws.write(path, "pwned")
        with pytest.raises(WorkspaceError, match="symlink"):
            ws.read(path)
    assert (outside / "secret").read_text() == "s" and not (outside / "new").exists()
    assert "secret" not in ws.listing()


def test_special_files_are_refused(ws):
    os.mkfifo(ws.root / "fifo")
    with pytest.raises(WorkspaceError, match="special"):
        ws.read("fifo")
    with pytest.raises(WorkspaceError, match="special"):
        ws.write("fifo", "x")


def test_caps_are_enforced_with_reasons(ws):
    with pytest.raises(WorkspaceError, match="limit is 1000 bytes per file"):
        ws.write("big", "x" * 1001)
    for i in range(2):
        ws.write(f"f{i}", "x" * 1000)
    with pytest.raises(WorkspaceError, match="would hold"):
        ws.write("f2", "x" * 600)
    ws.write("f0", "small")  # overwriting frees the old bytes
    for i in range(2, 5):
        ws.write(f"f{i}", "x")
    with pytest.raises(WorkspaceError, match="files"):
        ws.write("f5", "x")


def test_read_only_and_edit_rules(ws):
    (ws.root / "INSTRUCTIONS.md").write_text("given")
    with pytest.raises(WorkspaceError, match="read-only"):
        ws.write("INSTRUCTIONS.md", "mine")
    with pytest.raises(WorkspaceError, match="read-only"):
        ws.edit("INSTRUCTIONS.md", "given", "mine")
    ws.write("a.txt", "one two one")
    with pytest.raises(WorkspaceError, match="2 times"):
        ws.edit("a.txt", "one", "three")
    with pytest.raises(WorkspaceError, match="not found"):
        ws.edit("a.txt", "four", "x")
    with pytest.raises(WorkspaceError, match="does not exist"):
        ws.read("missing.txt")


def test_file_cannot_become_a_directory(ws):
    ws.write("a", "x")
    with pytest.raises(WorkspaceError, match="is a file"):
        ws.write("a/b", "x")


def test_layout_has_instructions_template_and_eval_tools(tmp_path, task):
    ws = lay_out(tmp_path / "w", task)
    text = ws.read("INSTRUCTIONS.md")
    assert "answer: str" in text and "calc_chain.toolset" in text and "75%" in text
    assert "calc_add" in ws.read("eval_tools.json")
    assert "[prime_rl]" in ws.read("job.toml")
    with pytest.raises(WorkspaceError):
        ws.write("eval_tools.json", "[]")


def test_pycache_and_dot_directories_count_against_the_caps_and_are_listed(ws):
    ws.write("taskset/__pycache__/a.cpython-312.pyc", "x" * 1000)
    ws.write(".hidden/b", "x" * 1000)
    listing = ws.listing()
    assert "taskset/__pycache__/a.cpython-312.pyc  (1000 bytes)" in listing and ".hidden/b  (1000 bytes)" in listing
    assert "__pycache__" in ws.listing("taskset") and ".hidden/b" in ws.listing(".hidden")
    assert ws.files() == {".hidden/b": 1000, "taskset/__pycache__/a.cpython-312.pyc": 1000}
    with pytest.raises(WorkspaceError, match="would hold 3000 bytes"):
        ws.write("taskset/__pycache__/c.pyc", "x" * 1000)
    # files that arrived some other way count too
    (ws.root / "__pycache__").mkdir()
    (ws.root / "__pycache__" / "planted.pyc").write_bytes(b"\x00" * 400)
    with pytest.raises(WorkspaceError, match="would hold 2501 bytes"):
        ws.write("c.txt", "x" * 101)
    ws.write("c.txt", "x" * 99)
    ws.write(".git/d", "x")
    with pytest.raises(WorkspaceError, match="5 files"):
        ws.write("__pycache__/e.pyc", "")
    assert len(ws.files()) == 5 and sum(ws.files().values()) == 2500


@pytest.mark.parametrize("path", ["bad\ud800.py", "taskset/\udcff.py", "\udfff"])
def test_paths_that_are_not_utf8_are_refused(ws, path):
    with pytest.raises(WorkspaceError, match="^path holds text that is not valid UTF-8"):
        ws.write(path, "x")
    with pytest.raises(WorkspaceError, match="^path holds text that is not valid UTF-8"):
        ws.read(path)
    with pytest.raises(WorkspaceError, match="^path holds text that is not valid UTF-8"):
        ws.listing(path)
    assert ws.files() == {}


def test_content_that_is_not_utf8_is_refused_naming_the_argument(ws):
    with pytest.raises(WorkspaceError, match="^content holds text that is not valid UTF-8 .*U\\+D800 at character 2"):
        ws.write("a.py", "x=\ud800")
    ws.write("a.py", "x = 1\n")
    with pytest.raises(WorkspaceError, match="^new_string holds text"):
        ws.edit("a.py", "1", "\udcff")
    with pytest.raises(WorkspaceError, match="^old_string holds text"):
        ws.edit("a.py", "\ud800", "2")
    assert ws.read("a.py") == "x = 1\n"


def test_encoding_problem_finds_names_and_bundled_contents_that_are_not_utf8(ws):
    ws.write("job.toml", "[job]\n")
    ws.write("taskset/ok.py", "é = 1\n")
    assert ws.encoding_problem() is None
    (ws.root / "taskset" / "__pycache__").mkdir()
    (ws.root / "taskset" / "__pycache__" / "ok.pyc").write_bytes(b"\xff\xfe")  # never bundled
    (ws.root / "notes.bin").write_bytes(b"\xff")  # not bundled either
    assert ws.encoding_problem() is None
    (ws.root / "taskset" / "data.txt").write_bytes(b"ok \xff")
    assert ws.encoding_problem() == "taskset/data.txt is not valid UTF-8 text (byte 3); rewrite it with write_file"
    (ws.root / "taskset" / "data.txt").unlink()
    fd = os.open(os.path.join(os.fsencode(ws.root), b"taskset", b"\xff.py"), os.O_WRONLY | os.O_CREAT, 0o644)
    os.close(fd)
    problem = ws.encoding_problem()
    assert problem == "the file name 'taskset/\\xff.py' is not valid UTF-8, so the job cannot be bundled"
    problem.encode("utf-8")  # the message itself is showable
    assert "taskset/\\xff.py  (0 bytes)" in ws.listing()
    ws.listing().encode("utf-8")
