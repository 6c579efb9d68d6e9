"""`trainergym doctor`: what this host has and lacks, for agent code and for training.

Two parts. The first is about agent code: the sandbox modes the probe can confine it with, the
stack it runs under, the data directory's modes. The second (`host_checks`) is about training:
this host's GPUs and whether they can hold a job, disk at the worker's work directory, uv, the
trainer's confinement, prime-rl's stack, and what driving Runpod pods needs (a key that Runpod
accepts, asked with one read-only call, and `TRAINERGYM_INSTALL`). Each check is ok, warn or
missing, with one line saying what to do, and names the backends that cannot train without it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import tomllib
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from trainergym.paths import PACKAGE_DATA, data_dir, default_workdir

BACKENDS = ("local", "runpod", "mini")  # what `run(backend=...)` can be asked to check for
# Minutes one mini job of the reference's size takes at the default scale and seeds, its base cached
# (docs/backends.md, "mini"): on the CPU, 2 seeds of 60 steps at the micro scale, measured on this
# 2-core host on 2026-12-01 (90 s in the engine, one torch thread a seed; 605 s under heavy load
# with the engine of that morning); on a GPU, 8 seeds at the gpu scale side by side, estimated from
# the H200 runs of 2026-12-02 (docs/mini-backend.md; 5 seeds of 100 steps: 403 s beside another job
# and two base builds; 8 seeds alone not measured). Building a family's base first adds minutes
# (calc_chain micro: 4.5-7 min on CPU; gpu: 1.3-5 min on an H200).
MINI_MINUTES = {"cpu": 3, "cuda": 7}
# Free disk the local worker's work directory should have. An estimate, not a measurement: prime-rl's
# checkout and its venv (torch, vLLM), the scorer's venv, the base model, a job's checkpoints. The
# Runpod pods the pool rents get the same (`container_disk_gb=60` in trainergym.infra.runpod_graphql).
DISK_NEEDED_GB = 60
LARGER_MODEL = "Qwen/Qwen3-1.7B"  # agents shown the baselines pick it (BRIEF.md: 95% of episodes)


@dataclass(frozen=True)
class Check:
    """One line of the training section: `status` is ok, warn or missing; `found` says what is
    here, `todo` what to do about it ("" when nothing), `needed_for` the backends that cannot
    train without it (a missing check there makes `run(backend=...)` exit 1)."""

    name: str
    status: str
    found: str
    todo: str = ""
    needed_for: tuple[str, ...] = ()

    def line(self) -> str:
        """The check as one line of text."""
        return f"{self.status:<7} {self.name}: {self.found}" + (f" -> {self.todo}" if self.todo else "")


# --- GPUs ------------------------------------------------------------------------------------------

def _nvidia_smi(*args: str) -> subprocess.CompletedProcess | None:
    """nvidia-smi's answer, or None when there is no nvidia-smi (it fails with a status of its own
    when the driver does not answer)."""
    try:
        return subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=20)
    except FileNotFoundError:
        return None
    except (OSError, subprocess.TimeoutExpired) as e:
        return subprocess.CompletedProcess(["nvidia-smi", *args], 1, "", str(e))


def query_gpus() -> list[dict] | None:
    """This host's GPUs as nvidia-smi lists them (`name`, `memory_mib`, `driver`), [] when it
    fails, None when there is no nvidia-smi."""
    out = _nvidia_smi("--query-gpu=name,memory.total,driver_version", "--format=csv,noheader")
    if out is None:
        return None
    gpus = []
    for line in out.stdout.splitlines() if out.returncode == 0 else []:
        parts = [p.strip() for p in line.rsplit(",", 2)]
        if len(parts) == 3 and (mib := re.match(r"\d+", parts[1])):
            gpus.append({"name": parts[0], "memory_mib": int(mib.group()), "driver": parts[2]})
    return gpus


def cuda_version() -> str | None:
    """The highest CUDA version the driver supports (nvidia-smi's banner), or None."""
    out = _nvidia_smi()
    found = re.search(r"CUDA Version:\s*([0-9.]+)", out.stdout) if out is not None and out.returncode == 0 else None
    return found.group(1) if found else None


def default_job() -> tuple[str, int]:
    """(base model, seq_len) of the job.toml every workspace starts from."""
    job = tomllib.loads((PACKAGE_DATA / "job.toml").read_text())
    return job["job"]["base_model"], job["prime_rl"]["seq_len"]


def gpu_checks(environ: Mapping[str, str] = os.environ) -> list[Check]:
    """GPUs (with driver and CUDA), at least `MIN_GPUS` of them visible, and whether each holds
    the default job's trainer (and the larger model's) by `trainergym.job.gpu`'s estimate."""
    from trainergym.host.deployment import MIN_GPUS, visible_gpus
    from trainergym.job import gpu as gpu_classes

    gpus = query_gpus()
    if not gpus:
        why = "no nvidia-smi on PATH" if gpus is None else "nvidia-smi finds no GPU (or the driver does not answer)"
        todo = "train on Runpod (--backend runpod), or run this on a host with NVIDIA GPUs and their driver"
        return [Check("gpus", "missing", why, todo, ("local",)),
                Check("gpu count", "missing", f"0 GPUs; the runner needs at least {MIN_GPUS} (one trains, one "
                      "serves rollouts)", "use a host with 2+ GPUs, or --backend runpod (its pods have 2)", ("local",))]
    names = sorted({g["name"] for g in gpus})
    listed = ", ".join(f"{sum(g['name'] == n for g in gpus)} x {n} ({next(g['memory_mib'] for g in gpus if g['name'] == n)}"
                       " MiB)" for n in names)
    cuda = cuda_version()
    checks = [Check("gpus", "ok", f"{listed}; driver {gpus[0]['driver']}, CUDA {cuda or 'unknown'}",
                    "" if cuda else "nvidia-smi does not say its CUDA version: check the driver install",
                    ("local",))]
    count = visible_gpus(environ) or 0
    where = " (CUDA_VISIBLE_DEVICES)" if environ.get("CUDA_VISIBLE_DEVICES") is not None else ""
    if count >= MIN_GPUS:
        checks.append(Check("gpu count", "ok", f"{count} GPUs visible{where}; the runner needs {MIN_GPUS}",
                            needed_for=("local",)))
    else:
        checks.append(Check("gpu count", "missing", f"{count} GPU(s) visible{where}; the runner needs at least "
                            f"{MIN_GPUS} (one trains, one serves rollouts)",
                            "use a host with 2+ GPUs (or widen CUDA_VISIBLE_DEVICES), or --backend runpod",
                            ("local",)))
    model, seq_len = default_job()
    smallest = min(gpus, key=lambda g: g["memory_mib"])
    device = gpu_classes.GPU(smallest["name"], smallest["memory_mib"] / 1024, 0.0, 0.0)
    peak = gpu_classes.peak_estimate(model, seq_len)
    larger = gpu_classes.peak_estimate(LARGER_MODEL, seq_len)
    estimate = (f"estimated trainer peak {peak.value:.1f} GiB for the default job ({model}, seq_len {seq_len}), "
                f"{larger.value:.1f} GiB for {LARGER_MODEL} ({peak.basis}); the smallest GPU has "
                f"{device.memory_gib:.1f} GiB")
    if not gpu_classes.fits(model, seq_len, device):
        checks.append(Check("gpu memory", "missing", estimate, "use GPUs with more memory (24 GB or more), "
                            "or --backend runpod", ("local",)))
    elif not gpu_classes.fits(LARGER_MODEL, seq_len, device):
        checks.append(Check("gpu memory", "warn", estimate, f"jobs on {LARGER_MODEL} will run out of memory here; "
                            "they need lower seq_len, LoRA, or GPUs of 24 GB or more", ("local",)))
    else:
        checks.append(Check("gpu memory", "ok", estimate + " (both fit)", needed_for=("local",)))
    return checks


# --- disk, uv, confinement, the stack --------------------------------------------------------------

def _existing(path: Path) -> Path:
    """`path`, or its nearest ancestor that exists (the work directory is made on first use)."""
    path = path.resolve()
    return next(p for p in (path, *path.parents) if p.exists())


def disk_check(workdir: Path) -> Check:
    """Free disk where the local worker keeps prime-rl, its venvs, the model and the runs."""
    free_gb = shutil.disk_usage(_existing(workdir)).free / 1e9
    found = f"{free_gb:.0f} GB free at {workdir}; needs roughly {DISK_NEEDED_GB} GB (an estimate: prime-rl's checkout " \
            "and venv, the scorer's venv, the base model, checkpoints)"
    if free_gb >= DISK_NEEDED_GB:
        return Check("disk", "ok", found, needed_for=("local",))
    return Check("disk", "warn", found, "free some space, or give the worker a --workdir on a larger disk",
                 ("local",))


def workdir_check(workdir: Path, trainer_uid: int | None) -> Check | None:
    """As root, the trainer runs under a uid of its own that must traverse to the work directory;
    None when that does not apply (not root, or no uid of its own)."""
    if trainer_uid is None:
        return None
    path = workdir.resolve()
    for directory in (*reversed(path.parents), path):
        if not directory.exists():
            break  # made later under umask 022: traversable
        if not os.stat(directory).st_mode & stat.S_IXOTH:
            return Check("workdir", "missing", f"the trainer's own uid cannot traverse {directory} "
                         f"({oct(stat.S_IMODE(os.stat(directory).st_mode))}) on the way to {workdir}",
                         "give the worker a --workdir that others may traverse (e.g. /var/lib/trainergym, 0755)",
                         ("local",))
    return Check("workdir", "ok", f"the trainer's own uid can traverse to {workdir}", needed_for=("local",))


def uv_check() -> Check:
    """uv: the runner's setup syncs prime-rl with it, and it builds the stack."""
    uv = shutil.which("uv")
    if uv is None:
        return Check("uv", "missing", "uv is not on PATH (the runner's setup and `trainergym stack --build` use it)",
                     "pip install uv (or see https://docs.astral.sh/uv/)", ("local",))
    try:
        version = subprocess.run([uv, "--version"], capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        version = ""
    return Check("uv", "ok", f"{version or 'uv'} at {uv}", needed_for=("local",))


def confinement_check(environ: Mapping[str, str] = os.environ) -> tuple[Check, int | None]:
    """What confines the trainer here (what `auto`, or TRAINERGYM_TRAINER_CONFINEMENT, picks), each
    mechanism's availability, and the trainer's own uid when it gets one."""
    from trainergym.host.confinement import Confinement

    chosen = Confinement.choose(environ=environ)
    requested = environ.get("TRAINERGYM_TRAINER_CONFINEMENT", "auto")
    modes = "; ".join(f"{m}: " + ("yes" if (c := Confinement.choose(m, environ)).kind == m else c.why_not.split(": ", 1)[-1])
                      for m in ("bwrap", "setpriv"))
    if chosen.kind == "unavailable":
        return Check("trainer confinement", "missing", f"{requested} finds no mechanism ({chosen.why_not})",
                     "install bubblewrap where it may create namespaces (apt-get install bubblewrap), or run the "
                     "worker as root (setpriv)", ("local",)), None
    uid = ", a uid of its own" if chosen.uid is not None else ""
    if chosen.kind == "none":
        return Check("trainer confinement", "warn", f"{requested} runs the trainer UNCONFINED ({modes})",
                     "unset TRAINERGYM_TRAINER_CONFINEMENT unless nobody else uses this host", ("local",)), None
    return Check("trainer confinement", "ok", f"{requested} picks {chosen.kind}{uid} ({modes})",
                 needed_for=("local",)), chosen.uid


def stack_check(built) -> Check:
    """prime-rl's stack for the probe: built already, or buildable (Python of the pin, uv, and the
    pin's wheels or git). The probe falls back to the library's verifiers, so nothing needs it."""
    from trainergym.job import stack, stack_env

    if built.pinned:
        return Check("stack", "ok", built.describe())
    wheels = stack_env.wheels_dir()
    source = f"the wheels in {wheels}" if wheels else "git at the pinned commits (needs GitHub)"
    if os.environ.get("TRAINERGYM_STACK", "").strip().lower() == "library":
        return Check("stack", "warn", "TRAINERGYM_STACK=library: the probe runs on the library's verifiers",
                     "unset TRAINERGYM_STACK to validate jobs under prime-rl's own")
    if shutil.which("uv") is None:
        return Check("stack", "missing", "prime-rl's stack is not built and uv is not on PATH", "pip install uv, then "
                     "`trainergym stack --build`")
    python = stack_env.find_python()
    if python is None:
        return Check("stack", "missing", f"prime-rl's stack is not built and no Python {stack.PRIME_RL_PYTHON} is found",
                     f"`uv python install {stack.PRIME_RL_PYTHON}` (or set TRAINERGYM_STACK_PYTHON), then "
                     "`trainergym stack --build`")
    return Check("stack", "warn", f"not built (Python {stack.PRIME_RL_PYTHON} at {python}; it would build from {source}); "
                 "until then the probe uses the library's verifiers", "`trainergym stack --build`")


# --- Runpod -----------------------------------------------------------------------------------------

def runpod_pod_names(api_key: str, environ: Mapping[str, str] = os.environ) -> list[str]:
    """The names of the account's pods, asked with ONE read-only call: `RunpodRestProvider.list()`
    (`GET {RUNPOD_REST_URL}/v2/pods`, bearer auth), a 429 not waited out. Raises AuthError when
    Runpod refuses the key (or the account has no balance), another ProviderError otherwise."""
    from trainergym.infra.runpod_rest import RunpodRestProvider

    provider = RunpodRestProvider(api_key=api_key, base_url=environ.get("RUNPOD_REST_URL"), timeout=15.0,
                                  rate_limit_retries=0)
    try:
        return [pod.name for pod in provider.list()]
    finally:
        provider.close()


def runpod_checks(environ: Mapping[str, str] = os.environ) -> list[Check]:
    """The key (set, and accepted by Runpod) and what the pods will install."""
    from trainergym.infra.pool import AuthError, ProviderError
    from trainergym.job.stack import pod_install

    checks = []
    key = environ.get("RUNPOD_API_KEY", "")
    if not key:
        checks.append(Check("runpod key", "missing", "RUNPOD_API_KEY is not set", "set RUNPOD_API_KEY to an API key "
                            "from Runpod's console (Settings -> API Keys) to rent pods", ("runpod",)))
    else:
        try:
            names = runpod_pod_names(key, environ)
        except AuthError as e:
            checks.append(Check("runpod key", "missing", f"Runpod refused RUNPOD_API_KEY ({e})", "set RUNPOD_API_KEY "
                                "to a valid key from Runpod's console (Settings -> API Keys); no balance: add credit",
                                ("runpod",)))
        except ProviderError as e:
            checks.append(Check("runpod key", "warn", f"could not check RUNPOD_API_KEY: {e}", "check the network, "
                                "RUNPOD_REST_URL and the key's permissions, then run `trainergym doctor` again", ("runpod",)))
        else:
            ours = sum(n.startswith("trainergym-") for n in names)
            checks.append(Check("runpod key", "ok", f"Runpod accepted RUNPOD_API_KEY: {len(names)} pod(s) on the "
                                f"account, {ours} named trainergym-*",
                                "pods named trainergym-* bill until reaped: `trainergym worker --backend runpod` "
                                "reaps its own" if ours else "", ("runpod",)))
    install = environ.get("TRAINERGYM_INSTALL", "")
    if install:
        checks.append(Check("pod install", "ok", f"pods install TRAINERGYM_INSTALL={install[:160]}",
                            needed_for=("runpod",)))
    else:
        checks.append(Check("pod install", "missing", f"TRAINERGYM_INSTALL is not set: pods would install "
                            f"{pod_install()[:120]}... from PyPI, where trainergym is not published",
                            "set TRAINERGYM_INSTALL to wheel or git URLs of trainergym, the kit and the families "
                            "(docs/gpu-quickstart.md)", ("runpod",)))
    return checks


def mini_check() -> Check:
    """Whether the mini backend can train here, on a GPU or the CPU, and how long a job takes."""
    import importlib.util

    missing = [m for m in ("torch", "transformers", "trl", "datasets") if importlib.util.find_spec(m) is None]
    if missing:
        return Check("mini", "missing", f"{', '.join(missing)} not installed", "the mini backend needs the mini extra: "
                     "uv sync --extra mini", ("mini",))
    import torch

    if torch.cuda.is_available():
        name = torch.cuda.get_device_name(0)
        return Check("mini", "ok", f"trains on the GPU ({name}) at the gpu scale, 8 seeds side by side: about "
                     f"{MINI_MINUTES['cuda']} min per job on an H200", needed_for=("mini",))
    return Check("mini", "ok", f"no GPU for torch: trains on the CPU ({os.cpu_count()} cores) at the micro scale, 2 seeds "
                 f"one after another: about {MINI_MINUTES['cpu']} min per reference-sized job (a family's first job builds its "
                 "base: minutes more)", needed_for=("mini",))


def host_checks(built, workdir: Path | None = None, environ: Mapping[str, str] = os.environ) -> list[Check]:
    """Every training check, in the order they are printed. `built` is the probe's stack
    (`stack_env.ensure()`); `workdir` the local worker's (default `paths.default_workdir()`, as
    `trainergym worker` has it)."""
    workdir = workdir or default_workdir()
    confinement, trainer_uid = confinement_check(environ)
    traverse = workdir_check(workdir, trainer_uid)
    return [*gpu_checks(environ), disk_check(workdir), *([traverse] if traverse else []), uv_check(), confinement,
            stack_check(built), *runpod_checks(environ), mini_check()]


def ready(checks: list[Check], backend: str) -> list[str]:
    """The checks `backend` misses (none: it can train here)."""
    return [c.name for c in checks if c.status == "missing" and backend in c.needed_for]


def run(console: Console, as_json: bool = False, backend: str | None = None, workdir: Path | None = None) -> int:
    """Print the report (tables and lines, or one JSON object); returns the exit status: 1 when
    agent code cannot be confined here, or when `backend` (local or runpod) is given and misses a
    check it needs; else 0. Raises ValueError for an unknown TRAINERGYM_SANDBOX or backend."""
    from trainergym.job import stack_env
    from trainergym.probe.cgroup import Cgroup
    from trainergym.probe.sandbox import Sandbox, requested_mode

    if backend is not None and backend not in BACKENDS:
        raise ValueError(f"--backend {backend!r}: doctor checks for {' or '.join(BACKENDS)}")
    chosen = Sandbox(mode=requested_mode())
    modes = [{"mode": m, "available": (box := Sandbox(mode=m)).kind != "unavailable", "guarantees": box.describe()}
             for m in ("bwrap", "namespaces", "none")]
    group = Cgroup.create(64 << 20, 8)
    if group is not None:
        group.remove()
    data = data_dir()
    files = {p.name: oct(stat.S_IMODE(p.stat().st_mode)) for p in [data, *sorted(data.iterdir())] if p.exists()} \
        if data.is_dir() else {}
    built = stack_env.ensure()
    checks = host_checks(built, workdir)
    missing = {b: ready(checks, b) for b in BACKENDS}
    out = {"requested": chosen.requested, "runs": chosen.kind, "confinement": chosen.describe(), "modes": modes,
           "accounting": group.describe() if group else "none: caps per process (and per uid when root)",
           "data_dir": str(data), "data_dir_modes": files, "stack": built.describe(),
           "host": [asdict(c) for c in checks], "missing": missing, "backend": backend}
    if as_json:
        print(json.dumps(out))
    else:
        table = Table(title=f"sandbox modes (TRAINERGYM_SANDBOX={chosen.requested} runs: {chosen.kind})")
        for col in ("mode", "available", "guarantees"):
            table.add_column(col)
        for row in modes:
            table.add_row(row["mode"], "yes" if row["available"] else "no", row["guarantees"])
        console.print(table)
        console.print(f"per-sandbox totals: {out['accounting']}")
        console.print(f"data directory {data}: " + ", ".join(f"{k} {v}" for k, v in files.items()))
        console.print(f"agent code runs under {out['stack']}")
        console.print("\ntraining on this host (ok / warn / missing -> what to do):")
        for check in checks:  # plain text: paths and specs may hold brackets rich would read as markup
            console.print(check.line(), markup=False, highlight=False, soft_wrap=True)
        for name in BACKENDS:
            console.print(f"--backend {name}: " + (f"not ready (missing: {', '.join(missing[name])})"
                                                    if missing[name] else "ready"), markup=False, highlight=False,
                          soft_wrap=True)
    agent_code = 0 if chosen.kind != "unavailable" else 1
    return 1 if agent_code or (backend is not None and missing[backend]) else 0
