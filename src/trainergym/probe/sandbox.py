"""Confinement for agent-written code, and a warm pool of confined workers.

Agent code never runs in the library's process. It runs in a child with its own network
namespace (no network), PID, IPC, UTS and mount namespaces: a read-only view of the system
with every home directory, the trainergym data directory (the hidden-eval secret) and the
library's own source hidden behind empty tmpfs mounts, a private size-capped /tmp holding its
copy of the job, a scrubbed environment, no capabilities and, when we are root, a uid of its
own from a private range. Around it: a cgroup of its own for memory and process totals where
the host lets us write one (`cgroup.py`), plus wall-clock, CPU, per-process memory,
open-file and file-size limits. When it ends, every process it started dies with it.

Modes (`TRAINERGYM_SANDBOX`): `bwrap` (bubblewrap builds the namespaces), `namespaces`
(util-linux `unshare` builds them and `confine.py` the mounts: for hosts without
bubblewrap), `auto` (the first that works; the default) and `none` (rlimits only, refused
unless `TRAINERGYM_ALLOW_UNCONFINED=1`). `Sandbox.describe()` says which mode ran and what it
guarantees; `trainergym doctor` lists them all.

`WarmWorker` keeps one confined worker alive with verifiers imported; it forks a fresh child
per job, so a probe does not pay the import (docs/design.md, "The probe"). The worker runs on the
interpreter of a `Stack` (`trainergym.job.stack_env`): prime-rl's own verifiers where it is built.
"""

from __future__ import annotations

import io
import json
import os
import random
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import weakref
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from trainergym.job import stack_env
from trainergym.job.stack_env import Stack
from trainergym.paths import LIBRARY
import trainergym.probe.seccomp as seccomp
from trainergym.probe.cgroup import Cgroup

CHILD = Path(__file__).with_name("child.py")
START_SECONDS = 120.0  # for a confined worker to import verifiers and say it is ready
# A session's time limits, unless its request sets them (child.py's defaults): seconds the job may
# wait on nothing (asleep, blocked) per CPU second it may use, and seconds on the clock in all per
# such second (a host that starves it).
WALL_FACTOR, CAP_FACTOR = 3.0, 4.0
CONFINE = Path(__file__).with_name("confine.py")
SCRIPT = "main.py"  # the child's name in the spool: nothing in it says "probe" to agent code
ANSWER, END = "A ", "E "  # the worker's marks on a relayed answer and on its end line (child.py)
MODES = ("auto", "bwrap", "namespaces", "none")
# As root, each sandbox runs as a uid of its own drawn from this range, which owns no file and
# shares no per-uid limit with any other sandbox (a collision between two live sandboxes of
# the host is a 1-in-a-million event per pair).
UID_RANGE = range(1_800_000_000, 1_801_000_000)
_SECRET_ENV = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION|TRAINERGYM", re.IGNORECASE)
_KEEP_ENV = ("PATH", "LANG", "LC_ALL", "TZ", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


@dataclass(frozen=True)
class Limits:
    """What a confined child may use: wall-clock and CPU seconds, memory per process and in total
    (cgroup), the largest file, its /tmp, processes and open files."""

    wall_seconds: float = 90.0
    cpu_seconds: int = 120
    memory_bytes: int = 4 << 30  # address space per process
    memory_total_bytes: int = 4 << 30  # all its processes together (cgroup)
    file_bytes: int = 64 << 20  # largest file it may write
    tmp_bytes: int = 256 << 20  # its whole writable /tmp
    processes: int = 256  # all its processes and threads together (cgroup, else its own uid)
    open_files: int = 256


_WORKS: dict[tuple[str, ...], bool] = {}


def _works(*cmd: str) -> bool:
    """Whether `cmd true` succeeds here: remembered for the process, unless it ran out of time (a
    loaded host; asked again next time, not taken for a host that cannot)."""
    if cmd in _WORKS:
        return _WORKS[cmd]
    try:
        ok = subprocess.run([*cmd, "true"], capture_output=True, timeout=30).returncode == 0
    except subprocess.TimeoutExpired:
        return False
    except OSError:
        ok = False
    _WORKS[cmd] = ok
    return ok


def public_packages(fam) -> dict[Path, tuple[str, ...]]:
    """The package directories job code for `fam` may import from, each with the file names it
    may import: the family's own PUBLIC_MODULES, and those of each package it names in
    PUBLIC_DEPENDENCIES (the family kit, which its public toolset imports)."""
    import importlib

    out = {Path(fam.__file__).resolve().parent: tuple(getattr(fam, "PUBLIC_MODULES", ("__init__.py", "toolset.py")))}
    for name in getattr(fam, "PUBLIC_DEPENDENCIES", ()):
        dep = importlib.import_module(name)
        out[Path(dep.__file__).resolve().parent] = tuple(dep.PUBLIC_MODULES)
    return out


@cache
def code_masks(site_dirs: tuple[str, ...] = ()) -> tuple[tuple[Path, ...], tuple[Path, ...]]:
    """(directories to mask, files to re-expose in them): trainergym's own source (its whole
    checkout when installed from one) and each family's package and public dependency (their
    whole source distributions, reference job included, in a checkout; and their copies in
    `site_dirs`, the site-packages of the stack agent code runs in), except the modules
    they list as public: the family's eval toolset and what it imports. A job may use that
    toolset; it must not copy the family's generator, solver, checker or reference job, or
    read the library that measures it."""
    from trainergym.task.spec import families

    lib = LIBRARY
    masks = {lib.parents[1] if lib.parent.name == "src" and (lib.parents[1] / "pyproject.toml").is_file() else lib}
    public = set()
    for fam in families().values():
        for pkg, names in public_packages(fam).items():
            masks.add(pkg.parent if (pkg.parent / "pyproject.toml").is_file() else pkg)
            public |= {pkg / name for name in names if (pkg / name).is_file()}
            for copy in (Path(d) / pkg.name for d in site_dirs):
                if copy.is_dir() and copy.resolve() != pkg:
                    masks.add(copy.resolve())
                    public |= {copy.resolve() / name for name in names if (copy / name).is_file()}
    outer = {m for m in masks if not any(m != o and m.is_relative_to(o) for o in masks)}
    return tuple(sorted(outer)), tuple(sorted(public))


def requested_mode() -> str:
    """The mode `TRAINERGYM_SANDBOX` asks for (auto when unset)."""
    mode = os.environ.get("TRAINERGYM_SANDBOX", "auto").strip().lower() or "auto"
    if mode not in MODES:
        raise ValueError(f"TRAINERGYM_SANDBOX={mode!r} is not a sandbox mode: use one of {', '.join(MODES)}")
    return mode


# What of the host's system a sandbox shows, read-only, beside the interpreter, its site-packages,
# the families' public modules and the job: the programs and libraries, and the files of /etc the
# dynamic loader reads. Nothing else of the host is there (no other checkout, home or service).
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
SYSTEM_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime")
_DEVICES = ("null", "zero", "full", "random", "urandom")
_FD_LINKS = (("fd", ""), ("stdin", "/0"), ("stdout", "/1"), ("stderr", "/2"))
_NAMESPACES = ["--mount", "--net", "--pid", "--ipc", "--uts", "--fork", "--kill-child"]


def _unshare() -> list[str] | None:
    """The `unshare` command line of the namespaces mode, if the kernel lets us use it."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return None
    cmd = [unshare, *_NAMESPACES, *([] if os.geteuid() == 0 else ["--user", "--map-root-user"])]
    return cmd if _works(*cmd) else None


class SandboxUnavailable(RuntimeError):
    """No sandbox mode works on this host (a failure of the host's, never of a job)."""


class Sandbox:
    """Builds the command line that confines one child process, in one mode."""

    def __init__(self, limits: Limits = Limits(), data_dir: Path | None = None, mode: str | None = None,
                 runtime: Stack | None = None):
        from trainergym.paths import data_dir as default_data_dir

        self.limits = limits
        self.runtime = runtime or stack_env.library()  # the interpreter the confined child runs on
        self.data_dir = Path(data_dir or default_data_dir()).resolve()
        self.requested = mode or requested_mode()
        self.kind, self.why_not = self._choose(self.requested)
        # As root: a uid of its own (so no per-uid limit is shared); not root: our own uid,
        # mapped to root of a user namespace whose capabilities are dropped before agent code runs.
        self.uid = random.choice(UID_RANGE) if os.geteuid() == 0 else None
        # The seccomp filter every confined session loads (hex of libseccomp's BPF), or "" with why not.
        self.seccomp, self.no_seccomp = "", ""
        if self.kind in ("bwrap", "namespaces"):
            try:
                self.seccomp = seccomp.program().hex()
            except seccomp.Unavailable as e:
                self.no_seccomp = str(e)

    def _choose(self, mode: str) -> tuple[str, str]:
        """(kind, why a requested mode is unavailable)."""
        reasons = []
        if mode in ("auto", "bwrap"):
            bwrap = shutil.which("bwrap")
            if bwrap and _works(bwrap, "--ro-bind", "/", "/", "--unshare-all", "--dev", "/dev", *self._user_args(), "--"):
                return "bwrap", ""
            reasons.append("bubblewrap is " + ("not installed" if bwrap is None else "installed but cannot create namespaces here"))
        if mode in ("auto", "namespaces"):
            if _unshare():
                return "namespaces", ""
            reasons.append("util-linux `unshare` cannot create " + ("user and " if os.geteuid() else "") +
                           "mount, network and PID namespaces here")
        if mode == "none":
            if os.environ.get("TRAINERGYM_ALLOW_UNCONFINED") == "1":
                return "rlimits-only", ""
            reasons.append("TRAINERGYM_SANDBOX=none runs agent code unconfined and needs TRAINERGYM_ALLOW_UNCONFINED=1")
        return "unavailable", "; ".join(reasons)

    @staticmethod
    def _user_args() -> list[str]:
        return [] if os.geteuid() == 0 else ["--unshare-user"]

    def describe(self) -> str:
        """Which mode runs and what it guarantees (or why nothing can run)."""
        who = f"its own uid {self.uid}" if self.uid is not None else "no capabilities (user namespace)"
        refused = ("a seccomp filter refusing namespaces, mounts, ptrace, keyrings, bpf, perf, modules and reboot"
                   if self.seccomp else f"NO seccomp filter ({self.no_seccomp})")
        confined = ("no network, own PID/IPC/UTS/mount namespaces, an allow-list root (read-only: the system's "
                    "programs and libraries, the interpreter and its site-packages with the library's code masked, the "
                    f"families' public modules; nothing else of the host), private /tmp, scrubbed environment, {who}, "
                    f"{refused}; every process killed at the end")
        return {
            "bwrap": f"bubblewrap: {confined}",
            "namespaces": f"namespaces (unshare + confine.py, no bubblewrap): {confined}",
            "rlimits-only": "UNCONFINED (TRAINERGYM_SANDBOX=none, TRAINERGYM_ALLOW_UNCONFINED=1): rlimits and a scrubbed "
                            "environment only; agent code can reach the network and the filesystem",
            "unavailable": f"no sandbox for TRAINERGYM_SANDBOX={self.requested}: {self.why_not}",
        }[self.kind]

    def env(self, home: str) -> dict[str, str]:
        """The child's environment: the few harmless variables of ours (never a secret-looking one),
        `HOME` and `TMPDIR`, no bytecode or user site, no proxy, Hugging Face offline."""
        env = {k: v for k, v in os.environ.items() if k in _KEEP_ENV and not _SECRET_ENV.search(k)}
        env.update(HOME=home, TMPDIR="/tmp" if self.kind in ("bwrap", "namespaces") else home,
                   PYTHONDONTWRITEBYTECODE="1", PYTHONNOUSERSITE="1", NO_PROXY="*", HF_HUB_OFFLINE="1")
        return env

    def mounts(self, spool: Path) -> list[tuple]:
        """The mount steps, in order, on an empty root (`("root",)`: nothing of the host is there
        unless a step shows it): ("bind", source, target) shows a path read-only; ("symlink",
        points to, link); ("tmpfs", path, mode, size) an empty (or, for /tmp, writable) tmpfs,
        which also hides what a shown directory holds below it (the library's code in a
        site-packages, the data directory)."""
        steps: list[tuple] = [("root",)]
        for path in (*SYSTEM, *SYSTEM_FILES):
            if os.path.islink(path):
                steps.append(("symlink", os.readlink(path), path))
            elif os.path.exists(path):
                steps.append(("bind", path, path))
        system = [Path(p).resolve() for p in SYSTEM if os.path.exists(p)]
        # /tmp before what is shown in it: a checkout, its venv or the data directory may live in /tmp.
        steps.append(("tmpfs", "/tmp", "1777", self.limits.tmp_bytes))
        # The interpreter, its prefix and site-packages (and, in the namespaces mode, ours: confine.py
        # runs on it before it execs the child), each once: nothing of a checkout or home they sit in.
        wanted = {Path(p) for p in self.runtime.paths}
        if self.kind == "namespaces":
            wanted |= {Path(sys.prefix), Path(sys.base_prefix)}
        wanted = {p.resolve() for p in wanted if p.exists()}
        shown = sorted(p for p in wanted if not any(p != q and p.is_relative_to(q) for q in wanted)
                       and not any(p.is_relative_to(s) for s in system))
        steps += [("bind", str(p), str(p)) for p in shown]
        code, public = code_masks(self.runtime.paths[2:])
        inside = [*system, *shown]
        steps += [("tmpfs", str(m), "0755", 1 << 20) for m in code if any(m.is_relative_to(p) for p in inside)]
        if any(self.data_dir.is_relative_to(p) for p in inside):
            steps.append(("tmpfs", str(self.data_dir), "0755", 1 << 20))
        steps += [("bind", str(f), str(f)) for f in public]  # the families' eval toolsets, by file
        steps.append(("bind", str(spool), "/tmp/spool"))
        # A /dev of its own: the harmless devices, no terminals (the host's pty pool is shared).
        steps.append(("tmpfs", "/dev", "0755", 1 << 20))
        steps += [("bind", f"/dev/{name}", f"/dev/{name}") for name in _DEVICES]
        steps += [("symlink", f"/proc/self/fd{tail}", f"/dev/{name}") for name, tail in _FD_LINKS]
        steps.append(("tmpfs", "/dev/shm", "1777", 16 << 20))
        return steps

    def command(self, argv: list[str], spool: Path, cgroup: Cgroup | None = None) -> list[str]:
        """`argv` confined, with `spool` (the host directory holding job copies) visible
        read-only at /tmp/spool (the unconfined mode: at its own path). The first process joins
        `cgroup` before agent code runs."""
        if self.kind == "unavailable":
            raise SandboxUnavailable(f"{self.describe()}. Install bubblewrap (Debian package `bubblewrap`), or allow "
                                     "unprivileged user namespaces; `trainergym doctor` shows what this host supports")
        if self.kind == "rlimits-only":
            return list(argv)
        steps = self.mounts(spool)
        # Join the sandbox's cgroup first, from the host's view (inside, /sys is read-only): a
        # shell that writes its own pid and execs the confining command, whose every descendant
        # then stays in the cgroup.
        join = ["/bin/sh", "-c", 'for f; do [ "$f" = -- ] && break; echo $$ > "$f"; done; while [ "$1" != -- ]; do shift; '
                'done; shift; exec "$@"', "sh", *(cgroup.procs_files if cgroup else []), "--"]
        if self.kind == "namespaces":
            plan = {"steps": steps, "writable": ["/tmp", "/dev/shm"], "chdir": "/tmp", "uid": self.uid}
            return [*join, *_unshare(), sys.executable, "-I", str(CONFINE), json.dumps(plan), "--", *argv]
        # bubblewrap starts from an empty root: what the steps bind is all there is.
        cmd = [*join, shutil.which("bwrap"), "--die-with-parent", "--new-session", "--unshare-net", "--unshare-pid",
               "--unshare-ipc", "--unshare-uts", *self._user_args()]
        made: set[Path] = set()
        mounted: dict[Path, str] = {Path("/"): "tmpfs"}  # so far: directories below a tmpfs must be made
        for kind, path, *rest in steps[1:]:
            if kind == "tmpfs":
                cmd += ["--perms", rest[0], *(["--size", str(rest[1])] if rest[0] == "1777" else []), "--tmpfs", path]
                mounted[Path(path)] = "tmpfs"
                continue
            if kind == "symlink":
                cmd += ["--symlink", path, rest[0]]
                continue
            if path.startswith("/dev/"):
                cmd += ["--dev-bind", path, rest[0]]
                continue
            target = Path(rest[0])
            under = max((m for m in mounted if target.is_relative_to(m) and m != target), key=lambda m: len(m.parts))
            for ancestor in reversed(target.parents):  # bwrap would create them 0700: unreadable for the uid
                if mounted[under] == "tmpfs" and ancestor.is_relative_to(under) and ancestor != under and ancestor not in made:
                    made.add(ancestor)
                    cmd += ["--perms", "0755", "--dir", str(ancestor)]
            cmd += ["--ro-bind", path, str(target)]
            mounted[target] = "bind"
        cmd += ["--proc", "/proc", "--chdir", "/tmp"]
        if self.uid is not None:  # drop to the sandbox's own uid inside: no capabilities
            cmd += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--", shutil.which("setpriv"),
                    f"--reuid={self.uid}", f"--regid={self.uid}", "--clear-groups", "--inh-caps=-all",
                    "--bounding-set=-all", "--no-new-privs"]
        else:
            cmd += ["--"]
        return cmd + list(argv)

    def spool_path(self, spool: Path) -> str:
        """Where the child sees `spool`."""
        return "/tmp/spool" if self.kind in ("bwrap", "namespaces") else str(spool)


_spawner: ThreadPoolExecutor | None = None  # the process's one spawning thread, made on first need
_spawner_lock = threading.Lock()


def _spawn(*args, **kwargs) -> subprocess.Popen:
    """`subprocess.Popen(*args, **kwargs)`, from one long-lived thread of this process: bubblewrap's
    --die-with-parent follows the thread that forked it, and a worker must outlive the
    (short-lived) thread that happens to start it."""
    global _spawner
    with _spawner_lock:
        if _spawner is None:
            _spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tg-sandbox-spawner")
        spawner = _spawner
    return spawner.submit(subprocess.Popen, *args, **kwargs).result()


def _plan_out_of_sight(cmd: list[str]) -> tuple[list[str], tuple[int, ...]]:
    """bubblewrap's options (the whole mount plan: what is hidden, where the data directory is)
    moved from its command line, which every process in the sandbox can read in /proc, into an
    anonymous file it reads them from (`--args FD`); the worker closes the descriptor before any
    job runs. Returns the command and the descriptors to pass."""
    bwrap = shutil.which("bwrap")
    if bwrap not in cmd:
        return cmd, ()
    start = cmd.index(bwrap) + 1
    end = cmd.index("--", start)
    fd = os.memfd_create("trainergym-sandbox-plan", 0)
    os.write(fd, b"".join(arg.encode() + b"\0" for arg in cmd[start:end]))
    os.lseek(fd, 0, os.SEEK_SET)
    return [*cmd[:start], "--args", str(fd), *cmd[end:]], (fd,)


def _forget_after_fork() -> None:
    """In a forked child (a vector env's worker process, say) the spawning thread is gone:
    make another on first need."""
    global _spawner, _spawner_lock
    _spawner, _spawner_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)


class WorkerError(RuntimeError):
    """The confined worker failed to start, or stopped answering. `infra`: the host's failure
    (a worker that would not start, or went silent past every limit the job has), not the job's
    (a worker that died under it)."""

    def __init__(self, message: str, infra: bool = False):
        super().__init__(message)
        self.infra = infra


def _remove_spool(spool: Path, owner: int) -> None:
    if os.getpid() == owner:  # a forked child's copy of the worker leaves its parent's spool alone
        shutil.rmtree(spool, ignore_errors=True)


class WarmWorker:
    """One confined worker with verifiers imported, forking a fresh child per request.

    `run` copies the job package into the spool and holds one session with a fresh child: it
    sends the request, relays each answer to `follow` and its reply back, and returns the
    session's end line. A worker that dies, hangs or answers garbage is replaced."""

    def __init__(self, sandbox: Sandbox | None = None):
        self.sandbox = sandbox or Sandbox()
        self._spool = Path(tempfile.mkdtemp(prefix="tg-spool-"))
        os.chmod(self._spool, 0o755)
        weakref.finalize(self, _remove_spool, self._spool, os.getpid())  # at collection or exit: close() may never run
        self._proc: subprocess.Popen | None = None
        self._cgroup: Cgroup | None = None
        self._baseline = 0  # processes in the cgroup once the worker is ready
        self._lock = threading.Lock()
        self._owner = os.getpid()  # a forked child's copy of this object must not touch the worker

    def start(self) -> None:
        """Start the confined worker now, if it is not running (a first probe does this while the
        library reads the job); a failure to start is left for `run` to meet and report."""
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                try:
                    self._proc = self._start()
                except (WorkerError, RuntimeError, OSError):
                    self._proc = None

    def _start(self) -> subprocess.Popen:
        confined = self.sandbox.kind in ("bwrap", "namespaces")
        limits = {**self.sandbox.limits.__dict__, "pid_namespace": confined, "seccomp": self.sandbox.seccomp}
        if confined and self._cgroup is None:  # None where the host gives us no cgroup to write
            self._cgroup = Cgroup.create(self.sandbox.limits.memory_total_bytes, self.sandbox.limits.processes)
        # The child script runs from the spool: the library's own source stays masked.
        shutil.copy(CHILD, self._spool / SCRIPT)
        os.chmod(self._spool / SCRIPT, 0o644)
        argv = [self.sandbox.runtime.python, "-I", f"{self.sandbox.spool_path(self._spool)}/{SCRIPT}", "--serve",
                json.dumps(limits)]
        cmd, plan = _plan_out_of_sight(self.sandbox.command(argv, self._spool, self._cgroup))
        try:
            proc = _spawn(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                          env=self.sandbox.env("/tmp"), cwd=self._spool, start_new_session=True, pass_fds=plan)
        finally:
            for fd in plan:
                os.close(fd)
        # Lines end at "\n" alone: universal newlines would split a line at a "\r" agent code put in it.
        proc.stdout = io.TextIOWrapper(proc.stdout.detach(), encoding="utf-8", errors="replace", newline="\n")
        line = self._readline(proc, START_SECONDS)
        self._baseline = len(self._cgroup.pids()) if self._cgroup else 0
        (self._spool / SCRIPT).unlink(missing_ok=True)  # loaded: agent code need not find the probe's script
        if line is None or line.strip() != "ready":
            self._end(proc)
            why = f"not ready within {START_SECONDS:.0f} s" if line is None else repr(line[:300])
            raise WorkerError(f"the confined worker failed to start: {why}", infra=True)
        return proc

    @staticmethod
    def _readline(proc: subprocess.Popen, timeout: float) -> str | None:
        """The next line ("" at EOF), or None when none came within `timeout` seconds."""
        ready, _, _ = select.select([proc.stdout], [], [], timeout)
        return proc.stdout.readline() if ready else None

    def run(self, package_dir: Path, request: dict, follow=None) -> dict:
        """One session for the job in `package_dir` (see `child.py`): send `request`, then
        for each answer `follow(text)` (the answer's JSON text, as the worker relayed it) gives
        the next request, or None to end. Returns the session's last line (`end: True`, with
        the child's stderr tail and, on failure, its `stage` and `error`); the answers before it
        went to `follow`."""
        nonce = request["nonce"]
        job = self._spool / nonce
        shutil.copytree(package_dir, job, symlinks=True)
        for root, dirs, files in os.walk(job):  # readable by the sandbox uid
            for name in dirs + files:
                os.chmod(Path(root) / name, 0o755 if name in dirs else 0o644, follow_symlinks=False)
        os.chmod(job, 0o755)
        # The worker ends a session whose job holds the floor past its limit on the clock (child.py's
        # `cap`, by default CAP_FACTOR x `wall`); beyond that and some slack, the worker is stuck.
        wall = float(request.get("wall") or WALL_FACTOR * float(request.get("timeout") or self.sandbox.limits.cpu_seconds))
        wait = float(request.get("cap") or CAP_FACTOR * wall) + 30
        try:
            with self._lock:
                for attempt in (1, 2):
                    if self._proc is None or self._proc.poll() is not None:
                        self._proc = self._start()
                    payload = {**request, "package_src": f"{self.sandbox.spool_path(self._spool)}/{nonce}"}
                    answered = silent = False
                    try:
                        self._send(payload)
                        while True:
                            line = self._readline(self._proc, wait)
                            if line is None:
                                silent = True
                                break
                            if line.startswith(END):  # only the worker writes these
                                end = {**json.loads(line[len(END):]), "accounting": self.accounting}
                                # left something running, or behind in scratch space or IPC: a fresh sandbox next
                                if end.get("stray") or end.get("residue") or self._grown():
                                    self._end(self._proc)
                                    self._proc = None
                                return end
                            if not line.startswith(ANSWER):
                                break
                            answered = True
                            nxt = follow(line[len(ANSWER):].rstrip("\n")) if follow else None
                            self._send(nxt if nxt is not None else {"op": "done"})
                    except (BrokenPipeError, OSError, ValueError):
                        pass
                    self._end(self._proc)  # dead, hung or garbled: replace it; retry once if nothing was said
                    self._proc = None
                    if answered:
                        break
                raise WorkerError("the confined worker stopped answering" +
                                  (f" for {wait:.0f} s" if silent else ""), infra=silent)
        finally:
            shutil.rmtree(job, ignore_errors=True)

    def _send(self, message: dict) -> None:
        self._proc.stdin.write(json.dumps(message) + "\n")
        self._proc.stdin.flush()

    def _grown(self) -> bool:
        """Whether the sandbox holds more processes than when its worker became ready."""
        return self._cgroup is not None and len(self._cgroup.pids()) > self._baseline

    @property
    def accounting(self) -> str:
        """How the sandbox's totals are held: its own cgroup, else its own uid's rlimits."""
        if self._cgroup is not None:
            return (f"{self._cgroup.describe()}: {self.sandbox.limits.memory_total_bytes >> 20} MiB and "
                    f"{self.sandbox.limits.processes} processes for all its processes together")
        if self.sandbox.uid is not None:
            return (f"no writable cgroup: {self.sandbox.limits.processes} processes for its own uid, memory capped per "
                    "process only")
        return "no writable cgroup and no uid of its own: process and memory caps per process only"

    def _end(self, proc: subprocess.Popen) -> None:
        """Kill the worker and every process of its sandbox (daemons included)."""
        _kill(proc)
        if self._cgroup is not None:
            self._cgroup.remove()
            self._cgroup = None

    def close(self) -> None:
        """Kill the worker and every process of its sandbox, and delete its spool (in the process
        that made it only: a forked child's copy leaves its parent's worker alone)."""
        if os.getpid() != self._owner:
            return
        if self._proc is not None:
            self._end(self._proc)
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
    the answers, parsed (the first is `load`'s), and the session's end line; `follow` is given
    each answer's text, as in `WarmWorker.run`."""
    worker, answers = WarmWorker(sandbox), []

    def keep(text: str) -> dict | None:
        try:
            answers.append(json.loads(text))
        except ValueError:
            answers.append({"error": "the answer was not JSON"})
        return follow(text) if follow else None

    try:
        return answers, worker.run(package_dir, request, keep)
    finally:
        worker.close()
