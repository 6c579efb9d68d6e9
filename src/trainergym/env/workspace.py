"""The per-episode workspace: a directory the agent edits only through confined file tools.

Paths are relative and are resolved component by component: `..`, absolute paths, symlinks
(anywhere on the path) and special files are refused, as are writes to the read-only
template files. File size, file count and total bytes are capped, counted over every regular
file under the root (`__pycache__/` and dot-directories included: nothing escapes the caps, and
`list_files` shows all of it). Text must be encodable as UTF-8: a path or content holding a lone
surrogate is refused, and `encoding_problem` finds file names or bundled contents that are not
UTF-8 (for `submit_job` to refuse before it spends an attempt). Every refusal raises
`WorkspaceError` with a message the agent can act on; the tools turn it into an observation.
"""

from __future__ import annotations

import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from trainergym.paths import PACKAGE_DATA


class WorkspaceError(Exception):
    """A refused file operation; the message is shown to the agent."""


def utf8_problem(text: str) -> str | None:
    """None if `text` encodes as UTF-8, else where it does not (never the raw character, which
    could not be shown either)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        return f"a lone surrogate U+{ord(text[e.start]):04X} at character {e.start}"
    return None


def _check_text(what: str, text: str) -> None:
    problem = utf8_problem(text)
    if problem:
        raise WorkspaceError(f"{what} holds text that is not valid UTF-8 ({problem}); send plain UTF-8 text")


def _shown(rel: str) -> str:
    """A file name as the agent may see it: bytes that are not UTF-8 appear as \\xNN escapes."""
    return rel.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


@dataclass(frozen=True)
class Limits:
    """The workspace's caps: bytes per file, number of files, total bytes, path length and path
    depth."""

    max_file_bytes: int = 256 * 1024
    max_files: int = 200
    max_total_bytes: int = 4 * 1024 * 1024
    max_path_chars: int = 200
    max_depth: int = 8


class Workspace:
    """A directory the agent edits only through confined operations (`read`, `write`, `edit`,
    `listing`); every refusal raises `WorkspaceError`. Paths in `readonly` cannot be written."""

    def __init__(self, root: Path, readonly: set[str] | None = None, limits: Limits = Limits()):
        self.root = Path(root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self.readonly = set(readonly or ())
        self.limits = limits

    # --- path confinement -------------------------------------------------------------
    def _rel(self, path: str) -> PurePosixPath:
        if not isinstance(path, str) or not path.strip():
            raise WorkspaceError("path must be a non-empty relative path such as 'taskset/__init__.py'")
        if "\x00" in path:
            raise WorkspaceError("path contains a NUL byte")
        _check_text("path", path)
        if len(path) > self.limits.max_path_chars:
            raise WorkspaceError(f"path is longer than {self.limits.max_path_chars} characters")
        if path.startswith(("/", "\\", "~")) or (len(path) > 1 and path[1] == ":"):
            raise WorkspaceError(f"{path!r} is absolute; use a path relative to the workspace root")
        rel = PurePosixPath(path.replace("\\", "/"))
        parts = [p for p in rel.parts if p != "."]
        if ".." in parts:
            raise WorkspaceError(f"{path!r} contains '..'; paths must stay inside the workspace")
        if len(parts) > self.limits.max_depth:
            raise WorkspaceError(f"{path!r} is nested deeper than {self.limits.max_depth} levels")
        return PurePosixPath(*parts) if parts else PurePosixPath(".")

    def resolve(self, path: str) -> tuple[str, Path]:
        """(normalised relative path, absolute path), refusing symlinks on the way."""
        rel = self._rel(path)
        current = self.root
        for depth, part in enumerate(rel.parts, 1):
            current = current / part
            try:
                mode = os.lstat(current).st_mode
            except FileNotFoundError:
                break  # nothing below a missing directory exists either
            if stat.S_ISLNK(mode):
                raise WorkspaceError(f"{path!r} goes through a symlink; symlinks are not allowed")
            if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
                raise WorkspaceError(f"{path!r} is a special file; only regular files and directories are allowed")
            if stat.S_ISREG(mode) and depth < len(rel.parts):
                raise WorkspaceError(f"{PurePosixPath(*rel.parts[:depth])} is a file, so it cannot contain {rel}")
        return str(rel), self.root.joinpath(*rel.parts)

    # --- operations --------------------------------------------------------------------
    def read(self, path: str, max_chars: int = 64_000) -> str:
        """The file's text (bytes that are not UTF-8 replaced), cut at `max_chars` with a note of
        how much was left out. Raises WorkspaceError for a missing file or a directory."""
        rel, target = self.resolve(path)
        if not target.exists():
            raise WorkspaceError(f"{rel} does not exist (list_files shows what does)")
        if target.is_dir():
            raise WorkspaceError(f"{rel} is a directory; use list_files")
        data = target.read_bytes()
        text = data.decode("utf-8", errors="replace")
        if len(text) > max_chars:
            return text[:max_chars] + f"\n[... truncated: {len(text) - max_chars} more characters]"
        return text

    def write(self, path: str, content: str, what: str = "content") -> str:
        """Create or replace the file with `content` as UTF-8, making parent directories, within the
        caps and never through a symlink; returns its normalised relative path. Refuses the root,
        read-only files, directories and text that is not UTF-8 (naming it as `what`)."""
        if not isinstance(content, str):
            raise WorkspaceError("content must be a string")
        _check_text(what, content)
        rel, target = self.resolve(path)
        if rel == ".":
            raise WorkspaceError("cannot write to the workspace root; name a file")
        if rel in self.readonly:
            raise WorkspaceError(f"{rel} is read-only (it is given by the task)")
        data = content.encode("utf-8")
        if len(data) > self.limits.max_file_bytes:
            raise WorkspaceError(f"{rel} would be {len(data)} bytes; the limit is {self.limits.max_file_bytes} bytes per file")
        if target.is_dir():
            raise WorkspaceError(f"{rel} is a directory")
        files = self.files()
        old = files.get(rel, 0)
        if rel not in files and len(files) >= self.limits.max_files:
            raise WorkspaceError(f"the workspace already holds {len(files)} files (the limit); delete or reuse one")
        total = sum(files.values()) - old + len(data)
        if total > self.limits.max_total_bytes:
            raise WorkspaceError(f"the workspace would hold {total} bytes; the limit is {self.limits.max_total_bytes}")
        target.parent.mkdir(parents=True, exist_ok=True)
        # O_NOFOLLOW: even a symlink planted between the check and the write is not followed.
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return rel

    def edit(self, path: str, old: str, new: str) -> str:
        """Replace the one occurrence of `old` in the file with `new`, as `write` writes; returns
        the relative path. Refuses an empty `old`, or one that occurs zero or several times."""
        if not isinstance(old, str) or not isinstance(new, str):
            raise WorkspaceError("old_string and new_string must be strings")
        if not old:
            raise WorkspaceError("old_string is empty; give the exact text to replace")
        _check_text("old_string", old)
        _check_text("new_string", new)
        text = self.read(path, max_chars=10**9)
        count = text.count(old)
        if count == 0:
            raise WorkspaceError(f"old_string was not found in {path}; read the file and copy the text exactly")
        if count > 1:
            raise WorkspaceError(f"old_string occurs {count} times in {path}; include more context so it matches once")
        return self.write(path, text.replace(old, new, 1), what="the edited content")

    def files(self, strict: bool = True) -> dict[str, int]:
        """Every regular file under the root (relative path -> size), never following symlinks
        and skipping no directory (`__pycache__` and dot-directories count like any other).
        A directory that cannot be read is an error (not a hole in the accounting) unless
        `strict` is False."""
        out: dict[str, int] = {}

        def unreadable(err: OSError) -> None:
            if strict:
                raise WorkspaceError(f"cannot read {_shown(str(err.filename))}: {err.strerror}")

        for dirpath, dirnames, filenames in os.walk(self.root, followlinks=False, onerror=unreadable):
            dirnames.sort()
            for name in sorted(filenames):
                full = Path(dirpath) / name
                try:
                    st = os.lstat(full)
                except FileNotFoundError:  # removed while we walked
                    continue
                if stat.S_ISREG(st.st_mode):
                    out[full.relative_to(self.root).as_posix()] = st.st_size
        return out

    def encoding_problem(self) -> str | None:
        """None if every file name in the workspace is UTF-8 and every file a job bundle takes
        (job.toml and taskset/, minus `__pycache__`) holds UTF-8 text; else one line saying
        which file is not."""
        from trainergym.job.bundle import BUNDLED

        for rel in self.files():
            if utf8_problem(rel):
                return f"the file name '{_shown(rel)}' is not valid UTF-8, so the job cannot be bundled"
        for rel in self.files():
            bundled = rel == BUNDLED[0] or rel.startswith(BUNDLED[1])
            if not bundled or "__pycache__" in rel.split("/"):
                continue
            try:
                (self.root / rel).read_bytes().decode("utf-8")
            except UnicodeDecodeError as e:
                return f"{rel} is not valid UTF-8 text (byte {e.start}); rewrite it with write_file"
            except OSError as e:
                return f"{rel} cannot be read: {e.strerror or e}"
        return None

    def listing(self, path: str = ".") -> str:
        """Every file under the directory `path`, one per line with its size (and read-only mark); a
        note when there is none."""
        rel, target = self.resolve(path)
        if not target.is_dir():
            raise WorkspaceError(f"{rel} is not a directory")
        prefix = "" if rel == "." else rel + "/"
        rows = [f"{_shown(name)}  ({size} bytes{', read-only' if name in self.readonly else ''})"
                for name, size in self.files().items() if name.startswith(prefix)]
        return "\n".join(rows) if rows else f"(no files under {rel})"

    def snapshot(self, dest: Path) -> None:
        """Copy the workspace (regular files only) to `dest`, as much of it as can be read."""
        for rel in self.files(strict=False):
            out = Path(dest) / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(self.root / rel, out, follow_symlinks=False)


TEMPLATES = PACKAGE_DATA
READ_ONLY = ("INSTRUCTIONS.md", "eval_tools.json")


def lay_out(root: Path, task, limits: Limits = Limits()) -> Workspace:
    """A fresh workspace for `task` (a TaskSpec): instructions, job.toml template, eval tools."""
    import json

    from trainergym.task.hidden import HIDDEN_EVAL_SIZE
    from trainergym.task.spec import get_family
    from trainergym.job.stack import PRIME_RL_VERIFIERS_VERSION, VERIFIERS_VERSION

    b = task.bounds
    module, _, cls = task.eval_toolset.partition(":")
    text = (TEMPLATES / "INSTRUCTIONS.md").read_text().format(
        teach=task.teach, eval_n=HIDDEN_EVAL_SIZE, verifiers_version=VERIFIERS_VERSION,
        trainer_verifiers=PRIME_RL_VERIFIERS_VERSION, toolset_module=module, toolset_class=cls, answer_format=task.answer_format, base_models=", ".join(b.base_models),
        max_steps=b.max_steps, seq_len=b.seq_len, batch_size=b.batch_size, group_size=b.group_size,
        max_tokens=b.max_tokens, max_turns=b.max_turns, gpu_count=b.gpu_count, gpu=b.gpu, gpu_hours=b.gpu_hours,
        attempts=task.max_submit_attempts, max_turns_episode=task.max_turns,
        max_items=f"{b.max_items:,}", world_field="" if task.world is None else " and world",
        read_form=getattr(get_family(task.family), "READ_FORM", "the family's own wording, as in the dev examples."),
        world_note="" if task.world is None else (
            "- The eval tools answer from a per-task **world**: your TaskData needs a `world: dict` field "
            f"holding it. {task.world}\n"),
    )
    ws = Workspace(root, readonly=set(READ_ONLY), limits=limits)
    for name, content in (("INSTRUCTIONS.md", text), ("eval_tools.json", json.dumps(task.eval_tools, indent=2)),
                          ("job.toml", (TEMPLATES / "job.toml").read_text())):
        (ws.root / name).write_text(content)
    return ws
