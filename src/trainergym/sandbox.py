"""Confinement for agent-written code, and a warm pool of confined workers.

Agent code never runs in the library's process. It runs in a child confined by bubblewrap:
its own network namespace (no network), PID, IPC and UTS namespaces, a read-only view of the
system with every home directory and the trainergym data directory (the hidden-eval secret)
hidden behind empty tmpfs mounts, a private size-capped /tmp holding its copy of the job, a
scrubbed environment, and, when we are root, an unprivileged uid (65534) with no capabilities.
Around it: wall-clock, CPU, memory, process-count, open-file and file-size limits.

Where bwrap cannot run, the fallback is resource limits plus `unshare -n` (no network), and
`Sandbox.describe()` says what is missing. With neither, nothing runs unless the user opted in
(`TRAINERGYM_ALLOW_UNCONFINED=1`), and then the report says so.

`WarmWorker` keeps one confined worker alive with verifiers imported; it forks a fresh child
per job, so a probe does not pay the import (docs/design.md, "The probe").
"""

from __future__ import annotations

import json
import os
import site
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from functools import cache
from pathlib import Path

CHILD = Path(__file__).with_name("probe_child.py")
ANSWER, END = "A ", "E "  # the worker's marks on a relayed answer and on its end line (probe_child.py)
SANDBOX_UID = 65534  # nobody
_SECRET_ENV = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION|TRAINERGYM", re.IGNORECASE)
_KEEP_ENV = ("PATH", "LANG", "LC_ALL", "TZ", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


@dataclass(frozen=True)
class Limits:
    wall_seconds: float = 90.0
    cpu_seconds: int = 120
    memory_bytes: int = 4 << 30  # address space per process
    file_bytes: int = 64 << 20  # largest file it may write
    tmp_bytes: int = 256 << 20  # its whole writable /tmp
    processes: int = 256  # per sandbox uid (threads count too)
    open_files: int = 256


@cache
def _works(*cmd: str) -> bool:
    try:
        return subprocess.run([*cmd, "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _hidden_dirs(data_dir: Path) -> list[Path]:
    homes = {Path("/root"), Path("/home"), Path(os.path.expanduser("~"))}
    return sorted({p for p in homes if p.is_dir()} | ({data_dir} if data_dir.is_dir() else set()))


def _needed_under(hidden: list[Path]) -> list[Path]:
    """What the child must still see below a masked directory: the interpreter and the venv's
    site-packages. Not `sys.path` as such: editable installs put the library's and the
    families' source trees on it, which agent code must not read."""
    wanted = {Path(sys.base_prefix), Path(sys.prefix), *(Path(p) for p in site.getsitepackages())}
    out = set()
    for path in wanted:
        path = path.resolve() if path.exists() else path
        # Strictly below a hidden directory, never one itself or above one.
        if path.exists() and any(path.is_relative_to(h) for h in hidden) and not any(h.is_relative_to(path) for h in hidden):
            out.add(path)
    return sorted(out)


@cache
def code_masks() -> tuple[tuple[Path, ...], tuple[Path, ...]]:
    """(directories to mask, files to re-expose in them): trainergym's own source (its whole
    checkout when installed from one) and each family's package (its whole source
    distribution, reference job included, in a checkout), except the modules a family lists
    as public: its eval toolset. A job may use that toolset; it must not copy the family's
    generator, solver, checker or reference job, or read the library that measures it."""
    import trainergym
    from trainergym.tasks import families

    lib = Path(trainergym.__file__).resolve().parent
    masks = {lib.parents[1] if lib.parent.name == "src" and (lib.parents[1] / "pyproject.toml").is_file() else lib}
    public = set()
    for fam in families().values():
        pkg = Path(fam.__file__).resolve().parent
        masks.add(pkg.parent if (pkg.parent / "pyproject.toml").is_file() else pkg)
        public |= {pkg / name for name in getattr(fam, "PUBLIC_MODULES", ("__init__.py", "toolset.py"))
                   if (pkg / name).is_file()}
    outer = {m for m in masks if not any(m != o and m.is_relative_to(o) for o in masks)}
    return tuple(sorted(outer)), tuple(sorted(public))


class Sandbox:
    """Builds the command line that confines one child process."""

    def __init__(self, limits: Limits = Limits(), data_dir: Path | None = None, prefer: str = "auto"):
        from trainergym.hidden import data_dir as default_data_dir

        self.limits = limits
        self.data_dir = Path(data_dir or default_data_dir()).resolve()
        self.kind = self._choose(prefer)

    def _choose(self, prefer: str) -> str:
        bwrap = shutil.which("bwrap")
        if prefer in ("auto", "bwrap") and bwrap and _works(bwrap, "--ro-bind", "/", "/", "--unshare-all", "--dev", "/dev",
                                                            *self._user_args(), "--"):
            return "bwrap"
        unshare = shutil.which("unshare")
        if prefer in ("auto", "unshare") and unshare:
            for flags in ("-n", "-rn"):  # -r: a user namespace, for users who are not root
                if _works(unshare, flags):
                    self._unshare = [unshare, flags]
                    return "unshare"
        if os.environ.get("TRAINERGYM_ALLOW_UNCONFINED") == "1":
            return "rlimits-only"
        return "none"

    def _user_args(self) -> list[str]:
        return [] if os.geteuid() == 0 else ["--unshare-user"]

    def describe(self) -> str:
        return {
            "bwrap": "bubblewrap: no network, own PID/IPC/UTS namespaces, read-only system, homes and the data "
                     "directory hidden, private /tmp, scrubbed environment" +
                     (", unprivileged uid" if os.geteuid() == 0 else "") + "; rlimits: wall, CPU, memory, processes, files",
            "unshare": "FALLBACK (bwrap unavailable): unshare -n (no network), scrubbed environment, rlimits; the "
                       "filesystem, including the data directory, is NOT hidden from agent code" +
                       ("; no process-count limit (running as root)" if os.geteuid() == 0 else ""),
            "rlimits-only": "UNCONFINED (TRAINERGYM_ALLOW_UNCONFINED=1): rlimits and a scrubbed environment only; "
                            "agent code can reach the network and the filesystem",
            "none": "no sandbox available",
        }[self.kind]

    def env(self, home: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k in _KEEP_ENV and not _SECRET_ENV.search(k)}
        env.update(HOME=home, TMPDIR="/tmp" if self.kind == "bwrap" else home, PYTHONDONTWRITEBYTECODE="1",
                   PYTHONNOUSERSITE="1", NO_PROXY="*", HF_HUB_OFFLINE="1")
        return env

    def command(self, argv: list[str], spool: Path) -> list[str]:
        """`argv` confined, with `spool` (the host directory holding job copies) visible
        read-only at /tmp/spool (bwrap) or at its own path (fallbacks)."""
        if self.kind == "none":
            raise RuntimeError("no sandbox is available: install bubblewrap (Debian package `bubblewrap`) or util-linux "
                               "`unshare`; or set TRAINERGYM_ALLOW_UNCONFINED=1 to run agent code with rlimits only")
        if self.kind == "unshare":
            return [*self._unshare, *argv]
        if self.kind == "rlimits-only":
            return list(argv)
        hidden = _hidden_dirs(self.data_dir)
        cmd = [shutil.which("bwrap"), "--die-with-parent", "--new-session", "--unshare-net", "--unshare-pid",
               "--unshare-ipc", "--unshare-uts", *self._user_args(), "--ro-bind", "/", "/"]
        for path in hidden:
            cmd += ["--tmpfs", str(path)]
        cmd += ["--perms", "1777", "--size", str(self.limits.tmp_bytes), "--tmpfs", "/tmp"]
        # Mask the library's and the families' code; then re-expose, read-only, what the child
        # needs from under the masked directories (a checkout and its venv may well live in a
        # home directory, in /tmp, or in each other); then the families' public modules.
        code, public = code_masks()
        needed = _needed_under([*hidden, Path("/tmp"), *code])
        first = [c for c in code if not any(c.is_relative_to(n) for n in needed)]
        later = [c for c in code if c not in first]  # installed inside the venv: masked after it
        for path in first:
            cmd += ["--tmpfs", str(path)]
        masked, made = [*hidden, Path("/tmp"), *first], set()

        def expose(path: Path, roots: list[Path]) -> None:
            inside = [m for m in roots if path.is_relative_to(m)]
            if not inside:
                return
            root = max(inside, key=lambda m: len(m.parts))
            for ancestor in reversed(path.parents):  # bwrap would create them 0700: unreadable for the uid
                if ancestor.is_relative_to(root) and ancestor != root and ancestor not in made:
                    made.add(ancestor)
                    cmd.extend(["--perms", "0755", "--dir", str(ancestor)])
            cmd.extend(["--ro-bind", str(path), str(path)])

        for path in needed:
            expose(path, masked)
        for path in later:
            cmd += ["--tmpfs", str(path)]
        for path in public:
            expose(path, [*masked, *later])
        if self.data_dir.is_dir():  # also when it lies inside a path re-exposed above
            cmd += ["--tmpfs", str(self.data_dir)]
        cmd += ["--ro-bind", str(spool), "/tmp/spool", "--proc", "/proc", "--dev", "/dev", "--chdir", "/tmp"]
        if os.geteuid() == 0:  # drop to an unprivileged uid inside: process limits apply, no capabilities
            cmd += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--", shutil.which("setpriv"),
                    f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_UID}", "--clear-groups", "--inh-caps=-all"]
        else:
            cmd += ["--"]
        return cmd + list(argv)

    def spool_path(self, spool: Path) -> str:
        """Where the child sees `spool`."""
        return "/tmp/spool" if self.kind == "bwrap" else str(spool)


class WorkerError(RuntimeError):
    pass


class WarmWorker:
    """One confined worker with verifiers imported, forking a fresh child per request.

    `run` copies the job package into the spool, sends one request line, and waits for the
    child's one-line result. A worker that dies, hangs or answers garbage is replaced."""

    def __init__(self, sandbox: Sandbox | None = None):
        self.sandbox = sandbox or Sandbox()
        self._spool = Path(tempfile.mkdtemp(prefix="tg-spool-"))
        os.chmod(self._spool, 0o755)
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()

    def _start(self) -> subprocess.Popen:
        limits = {**self.sandbox.limits.__dict__, "pid_namespace": self.sandbox.kind == "bwrap"}
        # The child script runs from the spool: the library's own source stays masked.
        shutil.copy(CHILD, self._spool / CHILD.name)
        os.chmod(self._spool / CHILD.name, 0o644)
        argv = [sys.executable, "-I", f"{self.sandbox.spool_path(self._spool)}/{CHILD.name}", "--serve", json.dumps(limits)]
        proc = subprocess.Popen(self.sandbox.command(argv, self._spool), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True, env=self.sandbox.env("/tmp"), cwd=self._spool,
                                start_new_session=True)
        line = self._readline(proc, 120.0)
        if line.strip() != "ready":
            _kill(proc)
            raise WorkerError(f"the confined worker failed to start: {line[:300]!r}")
        return proc

    @staticmethod
    def _readline(proc: subprocess.Popen, timeout: float) -> str:
        ready, _, _ = select.select([proc.stdout], [], [], timeout)
        return proc.stdout.readline() if ready else ""

    def run(self, package_dir: Path, request: dict, follow=None) -> dict:
        """One session for the job in `package_dir` (see probe_child.py): send `request`, then
        for each answer `follow(answer)` gives the next request, or None to end. Returns the
        session's last line (`end: True`, with the child's stderr tail and, on failure, its
        `stage` and `error`); the answers before it went to `follow`."""
        nonce = request["nonce"]
        job = self._spool / nonce
        shutil.copytree(package_dir, job, symlinks=True)
        for root, dirs, files in os.walk(job):  # readable by the sandbox uid
            for name in dirs + files:
                os.chmod(Path(root) / name, 0o755 if name in dirs else 0o644, follow_symlinks=False)
        os.chmod(job, 0o755)
        wait = self.sandbox.limits.wall_seconds + 30
        try:
            with self._lock:
                for attempt in (1, 2):
                    if self._proc is None or self._proc.poll() is not None:
                        self._proc = self._start()
                    payload = {**request, "package_src": f"{self.sandbox.spool_path(self._spool)}/{nonce}"}
                    answered = False
                    try:
                        self._send(payload)
                        while True:
                            line = self._readline(self._proc, wait)
                            if line.startswith(END):  # only the worker writes these
                                return json.loads(line[len(END):])
                            if not line.startswith(ANSWER):
                                break
                            answered = True
                            try:
                                answer = json.loads(line[len(ANSWER):])
                            except ValueError:
                                answer = {"error": "the answer was not JSON"}
                            nxt = follow(answer) if follow else None
                            self._send(nxt if nxt is not None else {"op": "done"})
                    except (BrokenPipeError, OSError, ValueError):
                        pass
                    _kill(self._proc)  # dead, hung or garbled: replace it; retry once if nothing was said
                    self._proc = None
                    if answered:
                        break
                raise WorkerError("the confined worker stopped answering")
        finally:
            shutil.rmtree(job, ignore_errors=True)

    def _send(self, message: dict) -> None:
        self._proc.stdin.write(json.dumps(message) + "\n")
        self._proc.stdin.flush()

    def close(self) -> None:
        if self._proc is not None:
            _kill(self._proc)
            self._proc = None
        shutil.rmtree(self._spool, ignore_errors=True)


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def run_once(sandbox: Sandbox, package_dir: Path, request: dict, follow=None) -> tuple[list[dict], dict]:
    """A cold session: a fresh confined worker for one job (pays the verifiers import). Returns
    the answers (the first is `load`'s) and the session's end line."""
    worker, answers = WarmWorker(sandbox), []

    def keep(answer: dict) -> dict | None:
        answers.append(answer)
        return follow(answer) if follow else None

    try:
        return answers, worker.run(package_dir, request, keep)
    finally:
        worker.close()
