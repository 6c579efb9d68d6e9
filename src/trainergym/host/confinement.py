"""How the train phase is confined: the job's code trains as someone who cannot touch what scores it.

Training runs agent code (the job's taskset and rewards, and whatever they start) next to the
GPUs. What the score depends on must be out of its reach: the scorer's install and the family
packages in it, prime-rl's environment (the scorer serves with its vLLM), the Hugging Face cache
that holds the base model (the scorer takes its tokenizer from there), the pre-score cache, and
the job's root, where the hidden eval is written once training is over. The trainer writes only
the job's `outputs/` and a `home/` of its own. Mechanisms (`TRAINERGYM_TRAINER_CONFINEMENT`):

- `setpriv`, as root (a pod): a uid of its own, drawn per job from a private range, with no
  groups, no capabilities and no_new_privs (a setuid binary gives nothing back). It owns `outputs/`
  and `home/`; everything else it meets belongs to root and is not writable by others (setup runs
  under umask 022; `prepare` checks the paths that matter, and that the uid can reach what it
  runs). After the phase every process of that uid is killed, wherever it moved: a new session
  escapes a process-group kill, not this; and what it left in the shared scratch directories
  (/tmp, /var/tmp, /dev/shm) is deleted, and every System V object it made (shared memory,
  semaphores, message queues: by creator, which the owner cannot change) removed. It needs only
  CAP_SETUID, which a container's root has; a pod cannot create namespaces, so its network stays open.
- `bwrap`: bubblewrap, an allow-list root (read-only: the system's programs and libraries, a
  few files of /etc, /sys, and what the runner shows it: the job's root and the host's shared
  directory; writable: `outputs/` and `home/`), the scorer's install, the pre-score cache and the
  data directory (the hidden-eval secret) behind empty tmpfs, a private /tmp, a /dev of its own
  holding only the harmless devices and the GPUs (no disks), no network but its own loopback
  (prime-rl's processes all run inside), a PID namespace of its own (every process in it dies
  with it), no capabilities. As root it also drops to a uid of its own inside, as setpriv does:
  root without capabilities still owns every root file. Not root, the trainer keeps the
  runner's uid, so outside the data directory it can read what the runner can.
- `none`: unconfined, for fake trainers and hosts nobody else uses; it needs
  `TRAINERGYM_ALLOW_UNCONFINED=1` when chosen by the environment.

`auto` (the default) takes bwrap where bubblewrap can make namespaces (as root: with a uid of its
own inside), else setpriv as root. With neither, jobs fail before setup.
"""

from __future__ import annotations

import functools
import glob
import os
import random
import re
import shutil
import stat
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

# A private range (the probe's sandboxes draw from 1_800_000_000): such a uid owns no file but the
# job's outputs, and killing "every process of the uid" kills this job's trainer and nothing else.
TRAIN_UID_RANGE = range(1_900_000_000, 1_901_000_000)
MODES = ("auto", "setpriv", "bwrap", "none")
# The trainer's environment is built from these, never copied whole: a pod's bearer token and any
# API key stay with the runner.
_KEEP_ENV = {"PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH",
             "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES"}
_KEEP_PREFIXES = ("NCCL_",)


class ConfinementError(RuntimeError):
    """The trainer cannot be confined here, or cannot reach what it must run."""


def _works(*argv: str) -> bool:
    try:
        return subprocess.run(argv, capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _uid_mapped(uid: int) -> bool:
    """Whether `uid` exists in our user namespace (a remapped container may have only 65536)."""
    try:
        lines = Path("/proc/self/uid_map").read_text().splitlines()
    except OSError:
        return True
    for line in lines:
        inside, _, count = (int(x) for x in line.split())
        if inside <= uid < inside + count:
            return True
    return False


def _drop(uid: int) -> list[str]:
    return [shutil.which("setpriv") or "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
            "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]


SCRATCH = (Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"))  # where any uid may leave files behind
_GPU_DEVICES = ("/dev/nvidia*", "/dev/dri")
# What of the host a bubblewrap trainer sees, read-only, beside what the runner shows it (the job's
# root, the host's shared directory, what its command names): the programs and libraries; the files
# of /etc that the loader, name lookup ("localhost") and TLS read; /sys (NCCL and NVML read the
# GPUs' topology there). Its /proc, /dev and /tmp are its own. No other checkout, home, runs/ or
# /etc/passwd is there. `TRAINERGYM_TRAINER_SHOW` (paths, colon-separated) adds to it, read-only,
# for a host whose trainer needs more.
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/sys")
SYSTEM_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/alternatives",
                "/etc/hosts", "/etc/host.conf", "/etc/nsswitch.conf", "/etc/gai.conf", "/etc/ssl",
                "/etc/ca-certificates")


class _Root:
    """bubblewrap arguments that build a root from nothing: empty scratch directories, then each
    path shown (read-only, or writable) at its own place, the directories leading to it made 0755
    (bubblewrap would make them 0700, closed to the trainer's uid), the host's links kept as links."""

    def __init__(self):
        self.args = ["--perms", "0755", "--dir", "/var"]
        disk = [p for p in SCRATCH if p.parent != Path("/dev")]  # /dev/shm comes with the trainer's own /dev
        for path in disk:
            self.args += ["--perms", "1777", "--tmpfs", str(path)]
        self.made: set[Path] = {Path("/"), Path("/var"), *disk}
        self.binds: list[Path] = []

    def show(self, path: Path | str, writable: bool = False) -> None:
        path = Path(path)
        if str(path) in (*SYSTEM, *SYSTEM_FILES) and os.path.islink(path):
            self.args += ["--symlink", os.readlink(path), str(path)]
            return
        if not path.exists() or any(path == b or (path.is_relative_to(b) and not writable) for b in self.binds):
            return
        for ancestor in reversed(path.parents):  # what a bind already holds exists; the rest is made
            if ancestor not in self.made and not any(ancestor.is_relative_to(b) for b in self.binds):
                self.args += ["--perms", "0755", "--dir", str(ancestor)]
                self.made.add(ancestor)
        self.args += ["--bind" if writable else "--ro-bind", str(path), str(path)]
        self.binds.append(path)


def _bwrap_base(shown: list[Path] = (), writable: list[Path] = ()) -> list[str]:
    # As root, bubblewrap keeps every capability unless told (one could remount / read-write).
    caps = ["--cap-drop", "ALL"] if os.geteuid() == 0 else []
    gpus = [arg for pattern in _GPU_DEVICES for dev in sorted(glob.glob(pattern)) for arg in ("--dev-bind", dev, dev)]
    root = _Root()
    extra = [Path(p) for p in os.environ.get("TRAINERGYM_TRAINER_SHOW", "").split(":") if p.startswith("/")]
    for path in (*SYSTEM, *SYSTEM_FILES, *sorted({*map(Path, shown), *extra}, key=lambda p: len(p.parts))):
        root.show(path)
    for path in writable:
        root.show(path, writable=True)
    return [shutil.which("bwrap") or "bwrap", "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc",
            "--unshare-net", *caps, *root.args, "--dev", "/dev", "--tmpfs", "/dev/shm", *gpus, "--proc", "/proc"]


@functools.cache
def _setpriv_works() -> str:
    """"" when setpriv can drop to a uid of the range here, else why not."""
    if os.geteuid() != 0:
        return "not root"
    if shutil.which("setpriv") is None:
        return "util-linux setpriv is not installed"
    if not _uid_mapped(TRAIN_UID_RANGE[-1]):
        return f"uids {TRAIN_UID_RANGE.start}-{TRAIN_UID_RANGE.stop - 1} are not mapped in this user namespace"
    return "" if _works(*_drop(TRAIN_UID_RANGE[0]), "/bin/true") else "setpriv cannot change uid here"


@functools.cache
def _bwrap_works() -> str:
    if shutil.which("bwrap") is None:
        return "bubblewrap is not installed"
    return "" if _works(*_bwrap_base(), "--", "/bin/true") else "bubblewrap cannot create namespaces here"


def _searchable(path: Path, uid: int) -> Path | None:
    """The first directory on the way to `path` (as given and resolved) that `uid` may not
    traverse, or `path` itself when it may not read it; None when it can."""
    for candidate in dict.fromkeys([path, path.resolve()]):
        for ancestor in reversed(candidate.parents):
            st = os.stat(ancestor)
            if st.st_uid != uid and not st.st_mode & stat.S_IXOTH:
                return ancestor
        st = os.stat(candidate)
        if st.st_uid != uid and not st.st_mode & (stat.S_IROTH | stat.S_IXOTH):
            return candidate
    return None


def _interpreter(path: Path) -> Path | None:
    """The interpreter a script's `#!` line names (a venv's entry points point at its python)."""
    try:
        with open(path, "rb") as f:
            head = f.read(256)
    except OSError:
        return None
    match = re.match(rb"#!\s*(/\S+)", head)
    return Path(match.group(1).decode(errors="replace")) if match else None


@dataclass
class Confinement:
    """One train phase's confinement: `kind` is setpriv, bwrap, none, or unavailable (`why_not`
    says why); `uid` is the trainer's own uid (setpriv; bwrap as root)."""

    kind: str
    why_not: str = ""
    uid: int | None = None

    @classmethod
    def choose(cls, mode: str | None = None, environ: Mapping[str, str] = os.environ) -> Confinement:
        """The confinement `mode` asks for (default `TRAINERGYM_TRAINER_CONFINEMENT`, else auto):
        the first that works here, or `unavailable` with the reasons."""
        mode = mode or environ.get("TRAINERGYM_TRAINER_CONFINEMENT", "auto")
        if mode not in MODES:
            return cls("unavailable", f"TRAINERGYM_TRAINER_CONFINEMENT={mode!r} is not one of {', '.join(MODES)}")
        reasons = []
        if mode in ("auto", "bwrap"):
            why = _bwrap_works()
            if not why:  # as root, root's files are its own: a uid of its own inside too
                return cls("bwrap", uid=None if _setpriv_works() else random.choice(TRAIN_UID_RANGE))
            reasons.append(f"bwrap: {why}")
        if mode in ("auto", "setpriv"):
            why = _setpriv_works()
            if not why:
                return cls("setpriv", uid=random.choice(TRAIN_UID_RANGE))
            reasons.append(f"setpriv: {why}")
        if mode == "none":
            if environ.get("TRAINERGYM_ALLOW_UNCONFINED") == "1":
                return cls("none")
            reasons.append("TRAINERGYM_TRAINER_CONFINEMENT=none trains agent code unconfined and needs "
                           "TRAINERGYM_ALLOW_UNCONFINED=1")
        return cls("unavailable", "; ".join(reasons))

    @classmethod
    def unconfined(cls) -> Confinement:
        """No confinement, chosen in code (fake trainers in tests)."""
        return cls("none")

    def describe(self) -> str:
        """Which mechanism confines the trainer and what it guarantees, as the result records it."""
        return {
            "setpriv": f"setpriv: its own uid {self.uid} (no groups, no capabilities, no new privileges), owning only "
                       "the job's outputs and home; the installs, caches and the job's root are root's and not "
                       "writable by others; every process of the uid killed after training",
            "bwrap": "bubblewrap: an allow-list root (read-only: the system, the job's root and the host's shared "
                     "directory; writable: the job's outputs and home), the scorer, its cache and the data directory "
                     "hidden, no network, no disks, no capabilities, its own PID namespace (every process killed with "
                     "it); " +
                     (f"its own uid {self.uid}" if self.uid is not None else "the runner's own uid"),
            "none": "UNCONFINED: the trainer can write whatever the runner can, the scorer's install included",
            "unavailable": f"no confinement for the trainer: {self.why_not}",
        }[self.kind]

    def env(self, home: Path, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
        """The trainer's environment: the few variables it needs from ours (no token, no key), and
        its home, temporary and cache directories in `home`."""
        env = {k: v for k, v in environ.items() if k in _KEEP_ENV or k.startswith(_KEEP_PREFIXES)}
        # USER and LOGNAME: its uid has no /etc/passwd entry (torch's compile cache asks getpass for a name).
        env.update(HOME=str(home), USER="trainer", LOGNAME="trainer", TMPDIR=str(home / "tmp"),
                   XDG_CACHE_HOME=str(home / ".cache"),
                   HF_HOME=str(home / ".cache" / "huggingface"), PYTHONNOUSERSITE="1")
        return env

    def prepare(self, writable: list[Path], run: list[Path], protected: list[Path]) -> None:
        """Make the trainer's `writable` directories (and `home/tmp` beneath the last); under
        setpriv give them to its uid and check that it can reach every path in `run` (and the
        interpreter a script names) and write none of `protected`. Raises ConfinementError."""
        if self.kind == "unavailable":
            raise ConfinementError(self.describe())
        for path in writable:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
        (writable[-1] / "tmp").mkdir(mode=0o700, exist_ok=True)
        if self.uid is None:
            return
        for path in [*writable, writable[-1] / "tmp"]:
            os.chown(path, self.uid, self.uid)
        self.check_reach([*run, *filter(None, (_interpreter(p) for p in run if p.is_file()))])
        for path in protected:
            if path.exists():
                st = os.stat(path)
                if st.st_uid == self.uid or st.st_mode & stat.S_IWOTH:
                    raise ConfinementError(f"{path} is writable by the trainer's uid")

    def check_reach(self, paths: list[Path]) -> None:
        """Raise ConfinementError unless the trainer's own uid (if it has one) can traverse to each
        existing path of `paths` and read it: the runner asks before setup, so a work directory
        behind a closed one fails at once, not after an install."""
        if self.uid is None:
            return
        for target in paths:
            blocked = _searchable(target, self.uid) if target.exists() else None
            if blocked is not None:
                raise ConfinementError(f"the trainer's uid cannot reach {target}: {blocked} is closed to others "
                                       "(put the host's directories where every user may traverse them)")

    def command(self, argv: list[str], writable: list[Path], shown: list[Path], hidden: list[Path]) -> list[str]:
        """`argv` confined. Under bwrap, `hidden` directories and /tmp are emptied (then the
        `shown` paths beneath one put back, read-only) and only `writable` may be written."""
        if self.kind == "setpriv":
            return [*_drop(self.uid), *argv]
        if self.kind == "bwrap":
            # An allow-list root: the system's files, what the runner shows, what the trainer writes;
            # then the hidden directories emptied where a shown one holds them.
            cmd = _bwrap_base(shown, writable)
            if self.uid is not None:  # setpriv needs these two to drop to the uid, and drops them
                cmd += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
            for path in hidden:
                if path.is_dir() and any(path.is_relative_to(p) for p in shown):
                    cmd += ["--tmpfs", str(path)]
            return [*cmd, "--", *(_drop(self.uid) if self.uid is not None else []), *argv]
        if self.kind == "none":
            return list(argv)
        raise ConfinementError(self.describe())

    def reap(self, wait: float = 10.0) -> None:
        """Kill every process left of the trainer (every process of its uid; bubblewrap's also die
        with its PID namespace), then delete what its uid left in the shared scratch directories.
        Raises ConfinementError if a process outlives `wait` seconds."""
        if self.uid is None:
            return
        deadline = time.monotonic() + wait
        while True:
            # kill(-1) from the uid itself reaches every process it owns, in one sweep the kernel
            # does not let a fork race (procps' kill misreads -1; the shell's builtin does not).
            subprocess.run([*_drop(self.uid), "/bin/sh", "-c", "kill -KILL -1"], capture_output=True, timeout=30)
            if not self.alive():
                self._sweep_scratch()
                self._sweep_ipc()
                return
            if time.monotonic() > deadline:
                raise ConfinementError(f"processes of the trainer's uid {self.uid} survived: {self.alive()}")
            time.sleep(0.1)

    def _sweep_scratch(self) -> None:
        """Delete the uid's files and directories in /tmp, /var/tmp and /dev/shm: nothing of one
        job waits there for the next (never following a link it planted)."""
        for scratch in SCRATCH:
            try:
                entries = list(os.scandir(scratch))
            except OSError:
                continue
            for entry in entries:
                try:
                    if entry.stat(follow_symlinks=False).st_uid != self.uid:
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        shutil.rmtree(entry.path, ignore_errors=True)
                    else:
                        os.unlink(entry.path)
                except OSError:
                    pass

    def _sweep_ipc(self) -> None:
        """Remove every System V object the uid made or owns (`/proc/sysvipc`; `ipcrm`, util-linux
        like setpriv): a segment or semaphore left with open permissions would reach the next job's
        trainer. By creator too: the owner may hand an object to any uid (IPC_SET), never its creator.
        bubblewrap's IPC namespace dies with it; setpriv (a pod) shares the host's."""
        for kind, flag in (("shm", "-m"), ("sem", "-s"), ("msg", "-q")):
            try:
                header, *rows = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()
            except OSError:
                continue
            names = header.split()
            for row in rows:
                obj = dict(zip(names, row.split()))
                if str(self.uid) in (obj.get("uid"), obj.get("cuid")):
                    ident = obj.get("shmid") or obj.get("semid") or obj.get("msqid")
                    subprocess.run(["ipcrm", flag, ident], capture_output=True, timeout=30)

    def alive(self) -> list[int]:
        """The pids of live (not zombie) processes whose real uid is the trainer's."""
        if self.uid is None:
            return []
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                fields = dict(line.split(":", 1) for line in (entry / "status").read_text().splitlines() if ":" in line)
            except OSError:
                continue
            zombie = fields.get("State", "").strip().startswith("Z")
            if int(fields.get("Uid", "-1").split()[0]) == self.uid and not zombie:
                found.append(int(entry.name))
        return found
