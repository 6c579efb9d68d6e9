"""The GPU split: which GPUs this host has (nvidia-smi), and the `[deployment]` the runner gives
prime-rl.

A bundle's rl.toml carries no `[deployment]`, so its content hash is the same wherever it runs;
the runner renders its own copy on the host, with the GPUs it can see split between inference
(the first `num_infer_gpus`, prime-rl's order) and training. prime-rl needs at least one of
each, so a host with fewer than two GPUs refuses the job before anything is installed.
"""

from __future__ import annotations

import os
import subprocess
import tomllib
from collections.abc import Mapping
from pathlib import Path

import tomli_w

MIN_GPUS = 2  # one trains, one serves the rollouts


def _nvidia_smi_names() -> list[str] | None:
    """The names of the GPUs nvidia-smi lists, in its order ([] when it fails); None without
    nvidia-smi. The one place this host's GPUs are queried."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=20)
    except FileNotFoundError:
        return None
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip()] if out.returncode == 0 else []


def detect_gpus(environ: Mapping[str, str] = os.environ) -> tuple[str, int | None]:
    """The GPUs a job here may use, as (name, count). The count is what `CUDA_VISIBLE_DEVICES`
    names when it is set, else what nvidia-smi lists (0 when it fails); None when neither can tell
    (no nvidia-smi). The name is nvidia-smi's for the first of those GPUs, "none" when it names none."""
    names = _nvidia_smi_names()
    listed = environ.get("CUDA_VISIBLE_DEVICES")
    if listed is None:
        return (names[0] if names else "none"), (None if names is None else len(names))
    ids = [d.strip() for d in listed.split(",") if d.strip()]
    # CUDA stops enumerating at the first invalid id; "-1" is the usual way to hide them all.
    count = 0 if not ids or ids[0].startswith("-") else len(ids)
    first = int(ids[0]) if count and ids[0].isdigit() and int(ids[0]) < len(names or ()) else 0
    return (names[first] if names and count else "none"), count


def visible_gpus(environ: Mapping[str, str] = os.environ) -> int | None:
    """How many GPUs a job here may use (`detect_gpus`' count): None when nothing here can tell."""
    return detect_gpus(environ)[1]


def split(gpus: int) -> dict[str, int]:
    """prime-rl's `[deployment]` for `gpus` GPUs: half (at least one) serve, the rest train."""
    if gpus < MIN_GPUS:
        raise ValueError(f"{gpus} GPU(s) here; training needs at least {MIN_GPUS}: one to train and one to serve")
    infer = max(1, gpus // 2)
    return {"num_train_gpus": gpus - infer, "num_infer_gpus": infer}


def write_rl_toml(bundle_rl_toml: Path, dest: Path, gpus: int) -> dict[str, int]:
    """Write `dest`: the bundle's rl.toml with `[deployment]` (replacing any it has) split from
    `gpus`; returns the split. Raises ValueError for too few GPUs or an unreadable rl.toml."""
    deployment = split(gpus)
    try:
        config = tomllib.loads(bundle_rl_toml.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ValueError(f"cannot read the bundle's rl.toml: {e}") from None
    config.pop("deployment", None)
    dest.write_text(tomli_w.dumps({**config, "deployment": deployment}))
    return deployment
