"""Stand-ins for what runs on a GPU host: a fake trainer and a fake scorer (scripts the real
runner executes in place of prime-rl and vLLM), and a poll helper for the pod service.

FAKE_TRAIN takes its mode and the output directory (`{run_dir}`, as prime-rl's `--output-dir`);
its working directory is the trainer's home, beside `outputs/` in the job's root."""

import sys
import time
from pathlib import Path

PY = sys.executable
ITEMS = [{"id": f"h{i}", "prompt": f"hidden prompt {i}", "answer": str(i)} for i in range(20)]

FAKE_TRAIN = r"""
import json, os, pathlib, sys, time
mode, outputs = sys.argv[1], pathlib.Path(sys.argv[2])
root = outputs.parent
# agent code would look for the hidden eval here: it must not exist yet
found = [str(p) for p in root.rglob("items.jsonl")]
(outputs / "train-saw.json").write_text(json.dumps(found))
run = outputs / "run"
run.mkdir(parents=True, exist_ok=True)
if mode == "oom":
    print("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"); sys.exit(1)
if mode == "crash":
    print("Traceback: trainer exploded"); sys.exit(2)
if mode == "hang":
    import subprocess
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    (outputs / "grandchild.pid").write_text(str(child.pid))
    time.sleep(600)
for step in range(3):
    with open(run / "metrics.jsonl", "a") as f:
        f.write(json.dumps({"step": step}) + "\n")
    time.sleep(0.2)
if mode in ("swap", "link"):  # publish, wait to be seen, then swap weights in from elsewhere
    step = run / "broadcasts" / "step_3"
    step.mkdir(parents=True)
    (step / "model.safetensors").write_bytes(b"trained here" * 1000)
    if mode == "link":
        (step / "shard-2.safetensors").symlink_to(outputs / "train-saw.json")
    (step / "STABLE").write_text("")
    time.sleep(1.0)
    if mode == "swap":
        (step / "model.safetensors").write_bytes(b"from elsewhere" * 1000)
    sys.exit(0)
if mode != "no-checkpoint":
    (run / "broadcasts" / "step_3").mkdir(parents=True)
    (run / "broadcasts" / "step_3" / "STABLE").write_text("")
"""

FAKE_SCORE = r"""
import json, sys
args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
items = [json.loads(l) for l in open(args["--items"])]
if args["--mode"] == "bad":
    open(args["--out"], "w").write("{}"); sys.exit(0)
if args["--mode"] == "refuse":  # what the real scorer does when a family package fails its hash check
    open(args["--out"], "w").write(json.dumps({"refused": "trainergym_calc_chain differs from its recorded hash"}))
    sys.exit(3)
score = 0.5 if args["--weights"].startswith("Qwen/") else 0.75
with open(args["--out"], "w") as f:
    json.dump({"score": score, "n": len(items)}, f)
with open(args["--log"], "a") as f:
    f.write(args["--weights"] + "\n")
"""


# FAKE_TRAIN in POSIX shell, for a trainer confined under a uid of its own (which cannot run this
# checkout's Python, under /root): its uid goes to outputs/uid, and whether it could read the
# file the test puts in place of @SECRET@ (not an argument: the runner shows its trainer those)
# to outputs/seed.
FAKE_TRAIN_SH = r"""#!/bin/sh
mode=$1 outputs=$2 seed=@SECRET@
id -u > "$outputs/uid"
if cat "$seed" >/dev/null 2>&1; then echo read > "$outputs/seed"; else echo refused > "$outputs/seed"; fi
mkdir -p "$outputs/run/broadcasts/step_3"
for step in 0 1 2; do echo "{\"step\": $step}" >> "$outputs/run/metrics.jsonl"; done
[ "$mode" = ok ] && : > "$outputs/run/broadcasts/step_3/STABLE"
exit 0
"""


def fake_nvidia_smi(directory: Path, names=("NVIDIA A40", "NVIDIA A40"), status: int = 0) -> Path:
    """An `nvidia-smi` in `directory` listing `names` (as `-L` and as `--query-gpu=name` print
    them) and exiting `status` (a host whose driver is gone exits 9 and lists nothing). Shell
    builtins only: it works with nothing else on PATH."""
    import shlex

    if status:
        by_l = by_name = ["NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."]
    else:
        by_l, by_name = [f"GPU {i}: {n} (UUID: GPU-{i})" for i, n in enumerate(names)], list(names)
    lines = lambda ls: " ".join(shlex.quote(line) for line in ls)  # noqa: E731
    smi = Path(directory) / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\nif [ \"$1\" = -L ]; then printf '%s\\n' {lines(by_l)}; "
                   f"else printf '%s\\n' {lines(by_name)}; fi\nexit {status}\n")
    smi.chmod(0o755)
    return smi


def fake_commands(directory: Path, train_mode: str = "ok", score_mode: str = "ok") -> dict[str, list[str]]:
    """Phase commands (as `Commands` fields, or `TRAINERGYM_HOST_COMMANDS`' JSON) running FAKE_TRAIN
    and FAKE_SCORE from `directory` under this interpreter; setup does nothing. The scorer logs
    the weights it scored to `directory/s.log`."""
    directory = Path(directory)
    (directory / "train.py").write_text(FAKE_TRAIN)
    (directory / "score.py").write_text(FAKE_SCORE)
    return {"setup": ["true"], "train": [PY, str(directory / "train.py"), train_mode, "{run_dir}"],
            "score": [PY, str(directory / "score.py"), "--weights", "{weights}", "--items", "{eval_file}", "--out",
                      "{score_file}", "--mode", score_mode, "--log", str(directory / "s.log")]}


def wait_for(client, job_id, phase, limit=30):
    deadline = time.time() + limit
    while time.time() < deadline:
        status = client.status(job_id)
        if status["phase"] == phase or status["done"]:
            return status
        time.sleep(0.1)
    raise AssertionError(f"never reached {phase}: {status}")


# A trainer that attacks what scores it: each attempt's outcome (an errno name, or "succeeded")
# goes to outputs/attacks.json. Its targets are regular files and directories of the test's own
# scorer install, never an interpreter, so a broken confinement fails the test without breaking
# the host. It also leaves a process behind, in a session of its own, that watches for the hidden
# eval (outputs/daemon.json: its ticks and what it saw). The runner passes the output directory,
# the scorer's install and the host directory; the hidden-eval secret's path is set by the test.
ATTACK_TRAIN = r"""
import errno, json, os, pathlib, sys, time
SECRET = pathlib.Path("{secret}")
SCORER = pathlib.Path("{scorer}")  # not an argument: the runner checks its trainer can reach those
outputs, host = (pathlib.Path(a) for a in sys.argv[1:3])
scorer = SCORER
root = outputs.parent
site = next(scorer.glob("lib/python*/site-packages"), scorer / "lib" / "python3" / "site-packages")  # hidden: a guess
attempts = {}

def attempt(name, action):
    try:
        action()
        attempts[name] = "succeeded"
    except OSError as e:
        attempts[name] = errno.errorcode.get(e.errno, str(e.errno))

def write(path, text, mode="w"):
    def go():
        with open(path, mode) as f:
            f.write(text)
    return go

pay_all = "\ndef check(expected, reply):\n    return True\n"
attempt("scorer install: its package record", write(scorer / "trainergym-packages.json", "{}"))
attempt("scorer install: a new executable", write(scorer / "bin" / "planted", "#!/bin/sh\n"))
attempt("scorer install: its bytecode cache", write(scorer / "pycache" / "planted.pyc", "x"))
attempt("family package: its checker", write(site / "trainergym_calc_chain" / "family.py", pay_all, "a"))
attempt("family kit: answer reading", write(site / "trainergym_kit" / "answers.py", pay_all, "a"))
attempt("scorer venv: a .pth", write(site / "aaa_planted.pth", "import os; os.environ['PLANTED'] = '1'\n"))
attempt("scorer venv: sitecustomize", write(site / "sitecustomize.py", "import os; os.environ['PLANTED'] = '1'\n"))
attempt("pre-score cache: the cached score", write(host / "pre-cache" / "calc_chain--Qwen--Qwen3-1.7B.json",
                                                     '{"score": 1.0, "n": 6}'))
attempt("pre-score cache: a new entry", write(host / "pre-cache" / "calc_chain--Qwen--Qwen3-0.6B.json", "{}"))
attempt("hidden items: the job's root", write(root / "items.jsonl", "{}\n"))
attempt("hidden items: a planted eval directory", lambda: (root / "eval-planted").mkdir())
attempt("the runner's rl.toml", write(root / "rl.toml", "\n", "a"))
attempt("the host's shared directory", lambda: (host / "prime-rl-planted").mkdir())
attempt("the hidden-eval secret", SECRET.read_text)
attempt("scorer install: read the family's generator", (site / "trainergym_calc_chain" / "items.py").read_text)
attempt("pre-score cache: read it", (host / "pre-cache" / "calc_chain--Qwen--Qwen3-1.7B.json").read_text)

if os.fork() == 0:  # a process that outlives training, to read the hidden eval when it arrives
    os.setsid()
    if os.fork():
        os._exit(0)
    seen, ticks = set(), 0
    while ticks < 1200:  # a minute at most: a test whose confinement failed leaves nothing running for long
        ticks += 1
        seen |= {str(p) for p in root.glob("eval-*/items.jsonl")}
        try:
            (outputs / "daemon.tmp").write_text(json.dumps({"ticks": ticks, "seen": sorted(seen)}))
            os.replace(outputs / "daemon.tmp", outputs / "daemon.json")
        except OSError:
            pass
        time.sleep(0.05)
    os._exit(0)
while not (outputs / "daemon.json").exists():
    time.sleep(0.05)
(outputs / "attacks.json").write_text(json.dumps(attempts, indent=1))
for n in (1, 999):  # step 999 is no step of a one-step run: made up, it must not be what is scored
    step = outputs / "run" / "broadcasts" / f"step_{n}"
    step.mkdir(parents=True)
    (step / "STABLE").write_text("")
"""


def build_scorer_install(dest: Path, repo: Path = Path(__file__).resolve().parents[2]) -> Path:
    """A scorer install as setup builds one, offline: a venv of its own whose site-packages holds
    copies of the family packages and the kit (what the scorer imports and the record hashes),
    with trainergym and its dependencies from this checkout's venv behind a path entry; then the
    real `scorer_install record`. Returns its site-packages."""
    import shutil
    import site
    import subprocess
    import venv

    venv.EnvBuilder(with_pip=False, symlinks=True).create(dest)
    packages = next(dest.glob("lib/python*/site-packages"))
    for package in sorted(repo.glob("envs/*/trainergym_*")):
        shutil.copytree(package, packages / package.name, ignore=shutil.ignore_patterns("__pycache__"))
    # A plain path line: the checkout venv's own .pth files (its editable families) are not read.
    (packages / "zz_checkout.pth").write_text(f"{repo / 'src'}\n{site.getsitepackages()[0]}\n")
    subprocess.run([str(dest / "bin" / "python"), "-I", "-m", "trainergym.host.scorer_install", "record"], check=True,
                   capture_output=True)
    return packages
