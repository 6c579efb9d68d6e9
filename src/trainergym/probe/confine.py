"""Confinement without bubblewrap: kernel namespaces and mounts, set up by this script.

Run as `unshare --mount --net --pid --ipc --uts --fork --kill-child [--user --map-root-user]
python -I confine.py PLAN -- ARGV...`. Inside the new namespaces, still privileged there, it:

1. makes every mount private, then builds a new root on an empty tmpfs and replays the plan's
   mount steps into it, as bubblewrap would: read-only binds of what a job needs (the system's
   programs and libraries, the interpreter and its site-packages, the families' public modules),
   empty tmpfs over what must stay hidden inside those (the library's code, the data directory),
   a size-capped private /tmp and the job spool, then pivots into it and lets the host's go;
2. remounts every mount read-only but /tmp and /dev/shm, and mounts a /proc of the new PID
   namespace;
3. drops to the plan's unprivileged uid (as host root) or, in a user namespace, empties the
   capability bounding set, sets no_new_privs, and runs ARGV in a child.

It stays behind as the PID namespace's init: when ARGV exits, it exits, and the kernel kills
every process left in the namespace, daemons included. Standard library only; it runs before
any agent code, from the library (never from the spool).
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}  # glibc has no wrapper for pivot_root
MS_NOATIME, MS_NODIRATIME, MS_RELATIME, MS_STRICTATIME = 1024, 2048, 1 << 21, 1 << 24
_KEPT = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC, "noatime": MS_NOATIME,
         "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME}  # flags a read-only remount must keep
PR_SET_NO_NEW_PRIVS, PR_CAPBSET_DROP = 38, 24
_libc = ctypes.CDLL(None, use_errno=True)


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = (lambda s: s.encode() if s is not None else None)
    if _libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {target}: {os.strerror(err)}")


def _mountpoint(path: str, is_dir: bool) -> None:
    """Create `path` (a directory, or an empty file) and its parents, readable by the sandbox uid."""
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        _mountpoint(parent, True)
    if os.path.lexists(path):
        return
    if is_dir:
        os.mkdir(path, 0o755)
    else:
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))


def _mounts() -> list[tuple[str, set[str]]]:
    """(mount point, per-mount options) of every mount, outermost first."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            out.append((fields[4].encode().decode("unicode_escape"), set(fields[5].split(","))))
    return out


def setup(plan: dict) -> None:
    """Steps 1 and 2 above: make every mount private, build the new root from `plan["steps"]`
    (root, tmpfs, bind, symlink), pivot into it, remount all but `plan["writable"]` read-only,
    mount /proc and enter `plan["chdir"]`. Raises OSError when a mount fails, or when a writable
    mount cannot be made read-only."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    # Open what will be bound before anything is mounted over it (the spool and the job may well
    # live in the host's /tmp): a bind from /proc/self/fd/N reaches the original whatever covers it.
    fds = {step[1]: os.open(step[1], os.O_PATH) for step in plan["steps"] if step[0] == "bind"}
    base = "/tmp"  # a scratch mount point every host has, covered in this namespace only
    _mount("tmpfs", base, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
    new = os.path.join(base, "root")
    os.mkdir(new, 0o755)
    _mount("tmpfs", new, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
    writable = set()
    for kind, *args in plan["steps"]:
        if kind == "root":
            continue
        path, rest = args[0], args[1:]
        if kind == "tmpfs":  # rest: [mode, size bytes]
            at = new + path
            if not os.path.exists(at):
                _mountpoint(at, True)
            if os.path.isdir(at):
                _mount("tmpfs", at, "tmpfs", MS_NOSUID | MS_NODEV, f"mode={rest[0]},size={rest[1]}")
                writable.add(path)
        elif kind == "bind":  # rest: [target] (default: the same path)
            at = new + (rest[0] if rest else path)
            _mountpoint(at, os.path.isdir(f"/proc/self/fd/{fds[path]}"))
            _mount(f"/proc/self/fd/{fds[path]}", at, None, MS_BIND | MS_REC)
        elif kind == "symlink":  # path: where it points; rest: [the link]
            _mountpoint(os.path.dirname(new + rest[0]), True)
            os.symlink(path, new + rest[0])
    for fd in fds.values():
        os.close(fd)
    _mountpoint(new + "/proc", True)
    # pivot_root(".", "."): the new root goes under the old, which is then let go.
    os.chdir(new)
    if _libc.syscall(SYS_PIVOT_ROOT[os.uname().machine], b".", b".") != 0:
        raise OSError(ctypes.get_errno(), f"pivot_root: {os.strerror(ctypes.get_errno())}")
    if _libc.umount2(b".", MNT_DETACH) != 0:
        raise OSError(ctypes.get_errno(), f"umount the host's root: {os.strerror(ctypes.get_errno())}")
    os.chdir("/")
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    keep_rw = {p for p in writable if p in plan.get("writable", [])}
    for point, opts in reversed(_mounts()):
        if point in keep_rw or point == "/proc" or point.startswith("/proc/") or "ro" in opts:
            continue
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY | sum(v for k, v in _KEPT.items() if k in opts)
        try:
            _mount(None, point, None, flags)
        except OSError:
            if os.path.ismount(point):  # a mount we cannot make read-only must not stay writable
                raise
    os.chdir(plan.get("chdir", "/"))


def drop(plan: dict) -> None:
    """No way back to privilege: another uid (as host root), else no capabilities at all."""
    uid = plan.get("uid")
    if uid is not None:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)  # clears every capability
    else:
        for cap in range(64):
            _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)  # an exec can then grant none, even to root
    if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")


def main(argv: list[str]) -> int:
    """Set up, then run ARGV in a child that first `drop`s privilege, and reap every process until
    it exits. Returns its exit code (negative: the signal that killed it); 125 when the setup failed
    (the child exits 126 when `drop` or the exec fails)."""
    plan, argv = json.loads(argv[1]), argv[argv.index("--") + 1:]
    try:
        setup(plan)
    except OSError as e:
        print(f"confine: {e}", file=sys.stderr)
        return 125
    pid = os.fork()
    if pid == 0:
        try:
            drop(plan)
            os.execve(argv[0], argv, dict(os.environ))
        except OSError as e:
            print(f"confine: {e}", file=sys.stderr)
        os._exit(126)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):  # as init: pass them on
        signal.signal(sig, lambda s, _f: os.kill(pid, s))
    while True:  # reap every orphan; leave (killing the namespace) when ARGV does
        try:
            done, status = os.wait()
        except ChildProcessError:
            return 0
        if done == pid:
            return os.waitstatus_to_exitcode(status) if status else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
