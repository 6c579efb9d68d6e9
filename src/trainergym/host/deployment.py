"""The GPU split: how many GPUs this host has, and the `[deployment]` the runner gives prime-rl.

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


def visible_gpus(environ: Mapping[str, str] = os.environ) -> int | None:
    """The GPUs a job here may use: those `CUDA_VISIBLE_DEVICES` names when it is set, else those
    `nvidia-smi -L` lists (0 when it fails); None when neither can tell (no nvidia-smi)."""
    listed = environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        ids = [d.strip() for d in listed.split(",") if d.strip()]
        # CUDA stops enumerating at the first invalid id; "-1" is the usual way to hide them all.
        return 0 if not ids or ids[0].startswith("-") else len(ids)
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
    except FileNotFoundError:
        return None
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(line.startswith("GPU ") for line in out.stdout.splitlines()) if out.returncode == 0 else 0


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
