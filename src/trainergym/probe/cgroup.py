"""Per-sandbox resource accounting with a cgroup of its own.

rlimits count per process (memory) or per uid (processes), so six children of 1.5 GiB each
pass a 4 GiB cap and sandboxes sharing a uid eat each other's process allowance. A cgroup
counts every process of one sandbox together. We create one below our own cgroup (so a
container's limits still hold above it) in whichever hierarchy we can write: cgroup v2 (the
unified hierarchy, controllers enabled for our subtree) or v1 (separate `memory` and `pids`
hierarchies, as on many container hosts). The sandbox's first process joins it before it
drops privileges; `kill()` ends every process in it and `remove()` deletes it.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")


def _own(controller: str | None) -> str | None:
    """Our cgroup path in the hierarchy of `controller` (None: the unified v2 one)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, names, path = line.split(":", 2)
        if (controller is None and names == "") or (controller and controller in names.split(",")):
            return path
    return None


def _writable(path: Path) -> bool:
    return path.is_dir() and os.access(path, os.W_OK)


def _sweep_stale(parent: Path) -> None:
    """Remove our cgroups that a killed process left behind: empty, and older than a minute (a
    cgroup just made may not be joined yet; one with a process in it cannot be removed)."""
    for d in parent.glob("trainergym-*"):
        try:
            if time.time() - d.stat().st_mtime > 60:
                d.rmdir()
        except OSError:
            pass


class Cgroup:
    """One sandbox's cgroup(s): memory (all its processes together) and process count."""

    def __init__(self, dirs: dict[str, Path], version: int):
        self.dirs, self.version = dirs, version  # controller ("memory", "pids"; "all" on v2) -> directory

    @classmethod
    def create(cls, memory_bytes: int, processes: int) -> Cgroup | None:
        """A new cgroup with these limits, or None where the host gives us none we can write."""
        name = f"trainergym-{uuid.uuid4().hex[:12]}"
        return cls._v2(name, memory_bytes, processes) or cls._v1(name, memory_bytes, processes)

    @classmethod
    def _v2(cls, name: str, memory_bytes: int, processes: int) -> Cgroup | None:
        own = _own(None)
        if own is None or not (ROOT / "cgroup.controllers").is_file():
            return None
        parent = ROOT / own.lstrip("/")
        try:
            if not {"memory", "pids"} <= set((parent / "cgroup.controllers").read_text().split()):
                return None
            enabled = set((parent / "cgroup.subtree_control").read_text().split())
            if not {"memory", "pids"} <= enabled:  # fails while processes sit in `parent` itself
                (parent / "cgroup.subtree_control").write_text("+memory +pids")
            _sweep_stale(parent)
            path = parent / name
            path.mkdir()
            (path / "memory.max").write_text(str(memory_bytes))
            if (path / "memory.swap.max").exists():
                (path / "memory.swap.max").write_text("0")
            (path / "pids.max").write_text(str(processes))
        except OSError:
            return None
        return cls({"all": path}, 2)

    @classmethod
    def _v1(cls, name: str, memory_bytes: int, processes: int) -> Cgroup | None:
        dirs = {}
        try:
            for controller in ("memory", "pids"):
                own = _own(controller)
                parent = ROOT / controller / (own or "/").lstrip("/")
                if not _writable(parent):
                    parent = ROOT / controller
                if own is None or not _writable(parent):
                    raise OSError(f"the {controller} cgroup is not writable")
                _sweep_stale(parent)
                dirs[controller] = parent / name
                dirs[controller].mkdir()
            (dirs["memory"] / "memory.limit_in_bytes").write_text(str(memory_bytes))
            swap = dirs["memory"] / "memory.memsw.limit_in_bytes"
            if swap.exists():
                swap.write_text(str(memory_bytes))
            (dirs["pids"] / "pids.max").write_text(str(processes))
        except OSError:
            cls(dirs, 1).remove()
            return None
        return cls(dirs, 1)

    @property
    def procs_files(self) -> list[str]:
        """The files a process writes its pid to, to join."""
        return [str(d / "cgroup.procs") for d in self.dirs.values()]

    def pids(self) -> set[int]:
        """The pids in the cgroup now (none once it is gone)."""
        out = set()
        for d in self.dirs.values():
            try:
                out |= {int(p) for p in (d / "cgroup.procs").read_text().split()}
            except (OSError, ValueError):
                pass
        return out

    def oom_kills(self) -> int:
        """How many times the memory cap was hit (v1: allocations refused; v2: OOM kills)."""
        try:
            if self.version == 2:
                events = dict(line.split() for line in (self.dirs["all"] / "memory.events").read_text().splitlines())
                return int(events.get("oom_kill", 0))
            return int((self.dirs["memory"] / "memory.failcnt").read_text())
        except (OSError, ValueError, KeyError):
            return 0

    def kill(self, timeout: float = 5.0) -> None:
        """SIGKILL every process in it, daemons included, until none is left."""
        deadline = time.monotonic() + timeout
        while (left := self.pids()) and time.monotonic() < deadline:
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            time.sleep(0.02)

    def remove(self) -> None:
        """Kill every process in it, then delete its directories (waiting briefly for the killed to
        leave)."""
        self.kill()
        for d in self.dirs.values():
            for _ in range(50):  # a killed process leaves the cgroup once reaped
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)

    def describe(self) -> str:
        """`cgroup v1` or `cgroup v2`."""
        return f"cgroup v{self.version}"
