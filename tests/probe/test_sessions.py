"""One warm worker, many jobs: what one session leaves reaches no other, and no job touches the worker.

Each session runs in user, IPC, PID and mount namespaces of its own inside the worker's
(`child._session_namespaces`): System V objects and its /tmp and /dev/shm (fresh tmpfs mounts)
die with it, its processes see only their own PID namespace (the worker is neither visible nor
signallable), the cgroup's counters are hidden, and it holds no capability. The
jobs here report what they saw on stderr, which the session's end line carries back.
"""

import json
import secrets
from pathlib import Path

import pytest

from tests.fakes.jobs import write_job
from trainergym.probe.sandbox import Sandbox, WarmWorker

pytestmark = pytest.mark.slow

KEY = 0x7E57
PROBE = '''
import ctypes as _c, json as _j, os as _o, sys as _s
_libc = _c.CDLL(None, use_errno=True)


def _read(path):
    try:
        return open(path, "rb").read().decode(errors="replace")
    except OSError:
        return ""


_obs = {"pid": _o.getpid(), "ppid": _o.getppid(), "procs": sorted(int(p) for p in _o.listdir("/proc") if p.isdigit()),
        "cap_eff": [l.split()[1] for l in open("/proc/self/status") if l.startswith("CapEff")][0],
        "shm_seen": _libc.shmget(%(key)d, 0, 0) >= 0, "sem_seen": _libc.semget(%(key)d, 0, 0) >= 0,
        "msg_seen": _libc.msgget(%(key)d, 0) >= 0, "tmp": sorted(_o.listdir("/tmp")), "shm_dir": sorted(_o.listdir("/dev/shm")),
        "cgroup": _o.listdir("/sys/fs/cgroup") if _o.path.isdir("/sys/fs/cgroup") else [],
        "root": sorted(_o.listdir("/")), "etc": sorted(_o.listdir("/etc")),
        "host": [p for p in ("/work/shared", "/work/.library", "/opt", "/home", "/var", "/sys", "/run", "/etc/passwd",
                             "/etc/hostname") if _o.path.lexists(p)],
        "plan_seen": [p for p in _o.listdir("/proc") if p.isdigit() and "--tmpfs" in _read(f"/proc/{p}/cmdline")]}
if %(plant)s:
    _obs["made"] = [_libc.shmget(%(key)d, 1 << 20, 0o1666) >= 0, _libc.semget(%(key)d, 1, 0o1666) >= 0,
                    _libc.msgget(%(key)d, 0o1666) >= 0]
    _o.makedirs("/tmp/locked/inner", exist_ok=True)
    open("/tmp/locked/inner/note", "w").write("for the next job")
    _o.chmod("/tmp/locked/inner", 0)
    _o.chmod("/tmp/locked", 0)
    open("/dev/shm/left", "w").write("x")
    _fd = _o.open("/tmp", _o.O_RDONLY)
    for _ in range(1500):  # deeper than any recursive delete goes
        _o.mkdir("deep", dir_fd=_fd)
        _next = _o.open("deep", _o.O_RDONLY, dir_fd=_fd)
        _o.close(_fd)
        _fd = _next
    _obs["signal_parent"] = _o.system("kill -0 %%d 2>/dev/null" %% _o.getppid()) if _o.getppid() else "no parent in view"
print("OBS " + _j.dumps(_obs), file=_s.stderr)
'''


def _job(tmp_path, reference_files, name: str, plant: bool):
    files = {k.removeprefix("taskset/"): v for k, v in reference_files.items() if k.startswith("taskset/")}
    files["__init__.py"] += PROBE % {"key": KEY, "plant": plant}
    write_job(tmp_path / name / "job_ses", files)
    return tmp_path / name


def _observed(end: dict) -> dict:
    line = next(x for x in end["stderr"].splitlines() if x.startswith("OBS "))
    return json.loads(line[4:])


@pytest.mark.parametrize("mode", ["bwrap", "namespaces"])
def test_a_session_leaves_nothing_for_the_next_and_cannot_reach_the_worker(tmp_path, reference_files, mode):
    box = Sandbox(mode=mode)
    if box.kind != mode:
        pytest.skip(f"{mode} is not available here: {box.why_not}")
    worker = WarmWorker(box)
    try:
        ends = []
        for name, plant in (("a", True), ("b", False)):
            request = {"nonce": secrets.token_hex(8), "module": "job_ses", "max_tasks": 5, "timeout": 60}
            ends.append(worker.run(_job(tmp_path, reference_files, name, plant), request, lambda _answer: None))
        first, second = (_observed(e) for e in ends)
    finally:
        worker.close()
    assert first["made"] == [True, True, True]  # the planting worked inside the first session
    # The job is its own session's init, with no capability and no parent in view.
    assert first["pid"] == 1 and first["ppid"] == 0 and first["cap_eff"] == "0000000000000000"
    assert first["procs"][0] == 1 and len(first["procs"]) < 8 and first["signal_parent"] == "no parent in view"
    # Nothing of it reaches the next job: no IPC object, no file in /tmp or /dev/shm.
    assert not (second["shm_seen"] or second["sem_seen"] or second["msg_seen"]), second
    assert "locked" not in second["tmp"] and "deep" not in second["tmp"] and second["shm_dir"] == [], second
    # The sandbox's mount plan is in no command line it can read.
    assert first["plan_seen"] == [], first["plan_seen"]
    # and no counter of the sandbox's cgroup carries one job's numbers to the next
    assert first["cgroup"] == second["cgroup"] == []
    # An allow-list root: the system, the interpreter and its site-packages, the families' public
    # modules, the job; nothing else of the host, no other checkout, no /etc beyond the loader's.
    tops = {Path(step[1] if step[0] == "tmpfs" else step[2]).parts[1] for step in box.mounts(tmp_path) if step[0] != "root"}
    assert set(first["root"]) <= tops | {"proc", "tmp", "dev"} and first["host"] == [], (first["root"], first["host"])
    assert set(first["etc"]) <= {"ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime"}, first["etc"]


def test_a_worker_stays_warm_when_the_sandbox_mounts_below_its_tmp(tmp_path, reference_files):
    """A data directory (or a checkout) under /tmp puts the sandbox's own mounts below the
    worker's /tmp: the wipe keeps them and what leads to them, and the worker is not retired for
    them after every job (a clean clone in /tmp lost its warm worker on each session)."""
    (tmp_path / "deep" / "data").mkdir(parents=True)
    box = Sandbox(data_dir=tmp_path / "deep" / "data")
    if box.kind not in ("bwrap", "namespaces"):
        pytest.skip(box.why_not)
    worker = WarmWorker(box)
    try:
        pids = []
        for name in ("a", "b"):
            request = {"nonce": secrets.token_hex(8), "module": "job_ses", "max_tasks": 5, "timeout": 60}
            end = worker.run(_job(tmp_path, reference_files, name, False), request, lambda _answer: None)
            assert end["stage"] == "closed" and not end.get("residue"), end
            pids.append(worker._proc.pid)
    finally:
        worker.close()
    assert pids[0] == pids[1]


# What a job tries beyond the jail's walls (x86_64 syscall numbers); each must fail with EPERM.
SYSCALLS = '''
import ctypes as _c, errno as _e, json as _j, os as _o, subprocess as _sp, sys as _s, threading as _t
_libc = _c.CDLL(None, use_errno=True)
_libc.syscall.restype = _c.c_long


def _try(n, *args):
    r = _libc.syscall(n, *args)
    if r == 0 and n == 56:  # a clone that worked: this is the child
        _o._exit(0)
    return "allowed" if r >= 0 else _e.errorcode.get(_c.get_errno(), "?")


_obs = {"unshare(CLONE_NEWUSER)": _try(272, 0x10000000), "unshare(CLONE_NEWNS)": _try(272, 0x20000),
        "clone(CLONE_NEWUSER)": _try(56, 0x10000000 | 17, 0, 0, 0, 0), "setns": _try(308, 0, 0),
        "mount": _try(165, b"none", b"/tmp", b"tmpfs", 0, None), "ptrace": _try(101, 0, 0, 0, 0),
        "keyctl": _try(250, 0, 0, 0, 0, 0), "bpf": _try(321, 0, 0, 0), "perf_event_open": _try(298, 0, 0, 0, 0, 0),
        "init_module": _try(175, 0, 0, 0), "reboot": _try(169, 0, 0, 0, 0), "io_uring_setup": _try(425, 1, 0),
        "socket(AF_VSOCK)": _try(41, 40, 1, 0)}
_th = _t.Thread(target=lambda: None)
_th.start()
_th.join()
_obs["threads and processes"] = _sp.run(["true"]).returncode == 0
print("OBS " + _j.dumps(_obs), file=_s.stderr)
'''


@pytest.mark.parametrize("mode", ["bwrap", "namespaces"])
def test_a_job_cannot_make_namespaces_mounts_or_reach_the_kernel(tmp_path, reference_files, mode):
    """The seccomp filter (probe/seccomp.py) holds in both modes; threads and subprocesses still run."""
    import platform

    if platform.machine() != "x86_64":
        pytest.skip("the syscall numbers here are x86_64's")
    box = Sandbox(mode=mode)
    if box.kind != mode:
        pytest.skip(f"{mode} is not available here: {box.why_not}")
    assert box.seccomp and "seccomp filter refusing" in box.describe()
    files = {k.removeprefix("taskset/"): v for k, v in reference_files.items() if k.startswith("taskset/")}
    files["__init__.py"] += SYSCALLS
    write_job(tmp_path / "sc" / "job_sc", files)
    worker = WarmWorker(box)
    try:
        request = {"nonce": secrets.token_hex(8), "module": "job_sc", "max_tasks": 5, "timeout": 60}
        seen = _observed(worker.run(tmp_path / "sc", request, lambda _answer: None))
    finally:
        worker.close()
    assert seen.pop("threads and processes") is True
    assert set(seen.values()) == {"EPERM"}, seen


# A session is a fork of the warm worker, whose heap still holds what it relayed for earlier
# sessions. The first job's load answer carries a marker; the next job scans its own memory for it.
SCAN = '''
import json as _j, re as _re, sys as _s
_hits = 0
with open("/proc/self/maps") as _m, open("/proc/self/mem", "rb", 0) as _mem:
    for _line in _m:
        _a, _b = (int(x, 16) for x in _line.split()[0].split("-"))
        if "r" not in _line.split()[1] or _b - _a > 1 << 30:
            continue
        try:
            _mem.seek(_a)
            _hits += len(_re.findall(b"%(marker)s", _mem.read(_b - _a)))
        except OSError:
            pass
print("OBS " + _j.dumps({"hits": _hits}), file=_s.stderr)
'''


def test_a_session_holds_nothing_an_earlier_session_relayed(tmp_path, reference_files):
    """The planting job's 400 tasks carry a marker through the worker (before the zygote, a later
    job found dozens of copies). The scan finds a few copies of its own (its source, its pattern,
    2-4 here): a control session on a fresh worker counts those, and the same job after the
    planting one must find about as many."""
    box = Sandbox()
    if box.kind not in ("bwrap", "namespaces"):
        pytest.skip(box.why_not)
    marker = "TGMARK" + secrets.token_hex(6)
    files = {k.removeprefix("taskset/"): v for k, v in reference_files.items() if k.startswith("taskset/")}
    planted = dict(files)
    planted["chains.py"] = files["chains.py"].replace('SYSTEM = (', f'SYSTEM = "{marker} " + (', 1)
    write_job(tmp_path / "a" / "job_ses", planted)
    scanning = dict(files)
    scanning["__init__.py"] += SCAN % {"marker": marker}
    write_job(tmp_path / "b" / "job_ses", scanning)
    hits = []
    for jobs in (["b"], ["a", "b"]):
        worker = WarmWorker(box)
        try:
            for name in jobs:
                request = {"nonce": secrets.token_hex(8), "module": "job_ses", "max_tasks": 400, "timeout": 60}
                end = worker.run(tmp_path / name, request, lambda _answer: None)
        finally:
            worker.close()
        hits.append(_observed(end)["hits"])
    control, after = hits
    assert after <= control + 5, hits
