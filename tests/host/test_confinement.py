"""The train phase confined (trainergym.host.confinement), exercised for real by a trainer that
attacks what scores it: the scorer's install, a family package, the kit, the scorer venv's
startup hooks (a .pth, sitecustomize), the pre-score cache, the job's root where the hidden eval
will be written, the host's shared directory and the hidden-eval secret; and that leaves a
process behind, in a session of its own, to read the hidden eval when it arrives. Every attempt
fails, nothing of it outlives training, and the job scores exactly what a harmless job scores,
with the real scorer running from its own install and checking its hashes.

Mechanisms: setpriv (as root, as on a pod: a uid of its own) and bubblewrap (what a host that is
not root gets; here as root, its capabilities dropped). Each runs where this host allows it and
is skipped, saying why, where it does not."""

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.fakes.gpu_host import ATTACK_TRAIN, FAKE_TRAIN, build_scorer_install
from tests.fakes.openai_server import FakeOpenAI
from tests.host.test_scorer import calc_echo
from trainergym.host.confinement import Confinement, ConfinementError
from trainergym.host.runner import Commands, Runner
from trainergym.paths import data_dir
from trainergym.task import hidden

pytestmark = pytest.mark.slow  # the second tier (docs/testing.md)

BASE = "Qwen/Qwen3-1.7B"
ITEMS = [ex.model_dump() for ex in hidden.hidden_eval("calc_chain", 6)]
REFUSED = {"EACCES", "EPERM", "EROFS", "ENOENT"}  # ENOENT: hidden from it (an empty tmpfs in its place)


def _system_python() -> str | None:
    """An interpreter any uid may run (this venv's may live under a home only root may enter)."""
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3"):
        real = Path(candidate).resolve()
        if real.exists() and all(os.stat(p).st_mode & stat.S_IXOTH for p in [*real.parents, real]):
            return candidate
    return None


def policy(body):
    """The base model answers wrong; the trained one plays the tools right on about half the
    items (by a hash of the prompt), so a scorer tampered into paying everything would show."""
    user = next(m["content"] for m in body["messages"] if m["role"] == "user")
    if body["model"] == BASE or hashlib.sha256(user.encode()).digest()[0] % 2:
        return {"content": "Answer: -1"}
    return calc_echo(body)


@pytest.fixture(scope="module")
def host():
    """A directory every uid may traverse (pytest's are root's alone) with the bundle, the fake
    trainer and the host's shared directories; a fake model server for the real scorer."""
    top = Path(tempfile.mkdtemp(prefix="tg-trust-", dir="/tmp"))
    top.chmod(0o755)
    (top / "bundle" / "package").mkdir(parents=True)
    (top / "bundle" / "rl.toml").write_text("max_steps = 3\n")  # the fake trainer publishes step 3
    (top / "train.py").write_text(FAKE_TRAIN)
    with FakeOpenAI(policy) as fake:
        yield {"top": top, "url": fake.url}
    shutil.rmtree(top, ignore_errors=True)


def make_runner(host, name, train, confinement):
    commands = Commands(setup=["true"], train=train, score=[*Commands().score, "--base-url", host["url"]])
    return Runner(host["top"] / "bundle", host["top"] / name, lambda: ITEMS, "calc_chain", BASE, gpu_count=2,
                  commands=commands, host=host["top"] / "host", install="the test's scorer install",
                  confinement=confinement, heartbeat_seconds=0.1)


@pytest.fixture(scope="module")
def clean(host):
    """A harmless job's result, scored by the real scorer from a scorer install built as setup
    builds one (which also fills the pre-score cache the attacker then goes for)."""
    runner = make_runner(host, "clean", [sys.executable, str(host["top"] / "train.py"), "ok", "{run_dir}"],
                         Confinement.unconfined())
    build_scorer_install(runner.scorer_dir)
    result = runner.run()
    assert result.status == "succeeded", result.log_tail
    assert result.pre == 0.0 and 0.0 < result.post < 1.0
    return result


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("mode", ["setpriv", "bwrap"])
def test_a_confined_trainer_cannot_touch_what_scores_it(host, clean, mode):
    confinement = Confinement.choose(mode)
    if confinement.kind != mode:
        pytest.skip(f"{mode} cannot confine a trainer here: {confinement.why_not}")
    python = _system_python()
    if python is None:
        pytest.skip("no interpreter here that every uid may run")
    secret = data_dir() / "trust-canary"  # the data directory holds the hidden-eval secret
    secret.write_text("the hidden seed")
    attack = host["top"] / "attack.py"
    train = [python, str(attack), "{run_dir}", "{host}"]
    runner = make_runner(host, f"attacked-{mode}", train, confinement)
    attack.write_text(ATTACK_TRAIN.replace("{secret}", str(secret)).replace("{scorer}", str(runner.scorer_dir)))
    site = next(runner.scorer_dir.glob("lib/python*/site-packages"))
    guarded = [runner.scorer_dir / "trainergym-packages.json", site / "trainergym_calc_chain" / "family.py",
               site / "trainergym_kit" / "answers.py", runner.pre_cache / f"calc_chain--{BASE.replace('/', '--')}.json"]
    before = {path: _digest(path) for path in guarded}

    result = runner.run()

    attempts = json.loads((runner.outputs / "attacks.json").read_text())
    assert len(attempts) == 16, attempts
    assert all(outcome in REFUSED for outcome in attempts.values()), attempts
    assert {path: _digest(path) for path in guarded} == before
    planted = [site / "aaa_planted.pth", site / "sitecustomize.py", runner.scorer_dir / "bin" / "planted",
               runner.scorer_dir / "pycache" / "planted.pyc", runner.root / "items.jsonl", runner.root / "eval-planted",
               runner.host / "prime-rl-planted", runner.pre_cache / "calc_chain--Qwen--Qwen3-0.6B.json"]
    assert not [p for p in planted if p.exists()]
    assert result.status == "succeeded", result.log_tail
    assert (result.pre, result.post) == (clean.pre, clean.post)
    assert "step_1" in runner.log_path.read_text() and "step_999" not in runner.log_path.read_text()
    assert result.details["train_confinement"].startswith({"setpriv": "setpriv:", "bwrap": "bubblewrap:"}[mode])
    # Nothing of the trainer outlived its phase: the process it left behind stopped ticking before
    # the hidden eval reached the host, and saw none of it.
    daemon = json.loads((runner.outputs / "daemon.json").read_text())
    time.sleep(0.3)
    assert json.loads((runner.outputs / "daemon.json").read_text()) == daemon and daemon["seen"] == []
    assert confinement.alive() == []
    secret.unlink()


def test_an_unconfined_trainer_needs_an_explicit_yes(monkeypatch):
    monkeypatch.delenv("TRAINERGYM_ALLOW_UNCONFINED", raising=False)
    refused = Confinement.choose("none")
    assert refused.kind == "unavailable" and "TRAINERGYM_ALLOW_UNCONFINED=1" in refused.describe()
    monkeypatch.setenv("TRAINERGYM_ALLOW_UNCONFINED", "1")
    assert Confinement.choose("none").describe().startswith("UNCONFINED")
    assert Confinement.choose("chroot").kind == "unavailable"
    monkeypatch.setenv("TRAINERGYM_TRAINER_CONFINEMENT", "none")
    assert Confinement.choose().kind == "none"


def test_the_trainer_gets_no_secret_from_our_environment(tmp_path):
    ours = {"PATH": "/usr/bin", "CUDA_VISIBLE_DEVICES": "0,1", "NCCL_DEBUG": "WARN", "TRAINERGYM_POD_TOKEN": "tok",
            "OPENAI_API_KEY": "sk-x", "HF_TOKEN": "hf_x", "RUNPOD_API_KEY": "rp", "HOME": "/root"}
    env = Confinement.unconfined().env(tmp_path / "home", ours)
    kept = ("PATH", "CUDA_VISIBLE_DEVICES", "NCCL_DEBUG")
    assert {k: env[k] for k in kept} == {k: ours[k] for k in kept}
    assert not {"TRAINERGYM_POD_TOKEN", "OPENAI_API_KEY", "HF_TOKEN", "RUNPOD_API_KEY"} & set(env)
    assert env["HOME"] == str(tmp_path / "home") and env["TMPDIR"] == str(tmp_path / "home" / "tmp")


def test_setpriv_refuses_what_its_uid_cannot_reach(tmp_path):
    confinement = Confinement.choose("setpriv")
    if confinement.kind != "setpriv":
        pytest.skip(f"setpriv cannot confine a trainer here: {confinement.why_not}")
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    (closed / "rl").write_text("#!/bin/sh\n")
    top = Path(tempfile.mkdtemp(prefix="tg-trust-", dir="/tmp"))
    try:
        top.chmod(0o755)
        with pytest.raises(ConfinementError, match="cannot reach .*closed to others"):
            confinement.prepare([top / "outputs", top / "home"], run=[closed / "rl"], protected=[])
        assert os.stat(top / "outputs").st_uid == confinement.uid  # what it may write is its own
        open_to_all = top / "shared"
        open_to_all.mkdir()
        open_to_all.chmod(0o777)
        with pytest.raises(ConfinementError, match="writable by the trainer"):
            confinement.prepare([top / "outputs", top / "home"], run=[], protected=[open_to_all])
    finally:
        shutil.rmtree(top, ignore_errors=True)


_INSIDE = r"""
import json, os, socket, sys
out = {"uid": os.getuid(), "devices": sorted(os.listdir("/dev"))}
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[2])), timeout=2).close()
    out["host_loopback"] = "connected"
except OSError as e:
    out["host_loopback"] = type(e).__name__
for scratch in ("/tmp", "/var/tmp", "/dev/shm"):
    try:
        with open(os.path.join(scratch, "left-for-the-next-job"), "w") as f:
            f.write("x")
        os.makedirs(os.path.join(scratch, "left-dir", "inner"), exist_ok=True)
    except OSError:
        pass
# System V objects with open permissions, one of them handed to another owner (IPC_SET): what a
# later job's trainer could attach to. Their keys go out for the test to look for.
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
key = 0x7E570000 + os.getpid() % 0xFFFF
out["ipc"] = {"key": key, "made": [libc.shmget(key, 1 << 16, 0o1666), libc.semget(key + 1, 1, 0o1666),
                                    libc.msgget(key + 2, 0o1666)]}
class IpcPerm(ctypes.Structure):
    _fields_ = [("key", ctypes.c_int), ("uid", ctypes.c_uint), ("gid", ctypes.c_uint), ("cuid", ctypes.c_uint),
                ("cgid", ctypes.c_uint), ("mode", ctypes.c_ushort), ("pad", ctypes.c_ushort), ("seq", ctypes.c_ushort),
                ("pad2", ctypes.c_ushort), ("unused", ctypes.c_ulong * 2)]
class ShmidDs(ctypes.Structure):
    _fields_ = [("perm", IpcPerm), ("rest", ctypes.c_ulong * 16)]
ds = ShmidDs()
if out["ipc"]["made"][0] >= 0 and libc.shmctl(out["ipc"]["made"][0], 2, ctypes.byref(ds)) == 0:  # IPC_STAT
    ds.perm.uid = 0  # the owner may give it away: to root, whom no sweep by owner would touch
    out["ipc"]["handed_to_root"] = libc.shmctl(out["ipc"]["made"][0], 1, ctypes.byref(ds)) == 0  # IPC_SET
out["seen"] = {path: os.path.exists(path) for path in sys.argv[3:]}
try:
    out["localhost"] = socket.getaddrinfo("localhost", 80)[0][4][0]
except OSError as e:
    out["localhost"] = type(e).__name__
open(os.path.join(sys.argv[1], "inside.json"), "w").write(json.dumps(out))
"""


def _confined_run(confinement, tmp_root: Path, port: int, look: tuple[str, ...] = ()) -> dict:
    python = _system_python()
    if python is None:
        pytest.skip("no interpreter here that every uid may run")
    top = Path(tempfile.mkdtemp(prefix="tg-inside-", dir="/tmp"))
    try:
        top.chmod(0o755)
        (top / "inside.py").write_text(_INSIDE)
        out, home = top / "outputs", top / "home"
        confinement.prepare([out, home], run=[Path(python)], protected=[])
        argv = confinement.command([python, str(top / "inside.py"), str(out), str(port), *look], writable=[out, home],
                                   shown=[top], hidden=[])
        done = subprocess.run(argv, capture_output=True, text=True, env=confinement.env(home), timeout=60)
        assert done.returncode == 0, done.stderr[-1500:]
        confinement.reap()
        return json.loads((out / "inside.json").read_text())
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _ipc_left(inside: dict) -> list[str]:
    """The System V objects the trainer made that the host still holds (by their keys)."""
    key = inside["ipc"]["key"]
    return [f"{kind} {row.split()[0]}" for i, kind in enumerate(("shm", "sem", "msg"))
            for row in Path(f"/proc/sysvipc/{kind}").read_text().splitlines()[1:] if int(row.split()[0]) == key + i]


def test_bubblewrap_gives_the_trainer_no_network_no_disks_and_not_root(host):
    confinement = Confinement.choose("bwrap")
    if confinement.kind != "bwrap":
        pytest.skip(f"bwrap cannot confine a trainer here: {confinement.why_not}")
    inside = _confined_run(confinement, host["top"], int(host["url"].rsplit(":", 1)[1].split("/")[0]))
    assert inside["host_loopback"] != "connected"  # its own network namespace: only its own loopback
    assert not [d for d in inside["devices"] if d.startswith(("loop", "sd", "nvme", "vd", "xvd", "mem", "kmem", "port"))]
    assert inside["uid"] != 0 and (os.geteuid() != 0 or inside["uid"] == confinement.uid)
    assert min(inside["ipc"]["made"]) >= 0 and _ipc_left(inside) == []  # its IPC namespace died with it


def test_bubblewrap_shows_the_trainer_an_allow_list_root(host, monkeypatch):
    """What the runner shows it and the system's files, nothing else of the host: not a second
    checkout beside ours, not homes, not /etc/passwd; TRAINERGYM_TRAINER_SHOW adds a path."""
    confinement = Confinement.choose("bwrap")
    if confinement.kind != "bwrap":
        pytest.skip(f"bwrap cannot confine a trainer here: {confinement.why_not}")
    try:
        second = Path(tempfile.mkdtemp(prefix=".tg-second-checkout-", dir=Path.home()))
    except OSError:
        pytest.skip("no home to plant a second checkout in")
    try:
        second.chmod(0o755)
        (second / "pyproject.toml").write_text("[project]\nname = 'trainergym'\n")
        asked = (str(second), str(second / "pyproject.toml"), "/etc/passwd", "/etc/shadow", "/home", "/root", "/opt",
                 "/srv", "/var/lib", "/etc/hosts", "/usr/bin", "/sys/class", "/proc/self")
        inside = _confined_run(confinement, host["top"], 9, asked)
        assert [p for p, seen in inside["seen"].items() if seen] == ["/etc/hosts", "/usr/bin", "/sys/class", "/proc/self"]
        assert inside["localhost"] == "127.0.0.1"
        monkeypatch.setenv("TRAINERGYM_TRAINER_SHOW", str(second))
        assert _confined_run(confinement, host["top"], 9, asked[:2])["seen"] == {asked[0]: True, asked[1]: True}
    finally:
        shutil.rmtree(second, ignore_errors=True)


def test_what_a_trainer_uid_leaves_in_the_shared_scratch_is_deleted(host):
    confinement = Confinement.choose("setpriv")
    if confinement.kind != "setpriv":
        pytest.skip(f"setpriv cannot confine a trainer here: {confinement.why_not}")
    theirs = Path("/tmp") / f"not-the-trainers-{os.getpid()}"
    theirs.write_text("stays")
    try:
        inside = _confined_run(confinement, host["top"], 9)
        left = [p for scratch in ("/tmp", "/var/tmp", "/dev/shm") for p in Path(scratch).iterdir()
                if p.lstat().st_uid == confinement.uid]
        assert left == [] and theirs.read_text() == "stays"
        # System V objects too, the one handed to root included
        assert min(inside["ipc"]["made"]) >= 0 and inside["ipc"].get("handed_to_root"), inside["ipc"]
        assert _ipc_left(inside) == []
    finally:
        theirs.unlink()
