"""Measured training-step rows (`trainergym gpu-bench`): the records, their provenance, and the file
`job/gpu.py` reads before its `reported` table.

This module imports only the standard library and pydantic, so the benchmark (`gpu_bench.py`) runs
on a bare GPU machine with torch, transformers and pydantic alone.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

# src/trainergym/data/gpu_measured.json: shipped with the library, written by `trainergym gpu-bench`.
MEASURED_PATH = Path(__file__).resolve().parents[1] / "data" / "gpu_measured.json"
# A path to read instead, or "off" for the reported table alone.
MEASURED_ENV = "TRAINERGYM_GPU_MEASURED"


class MeasuredRow(BaseModel):
    """One training step of one shape: micro-batch `micro_batch` of `seq_len` tokens, activation
    checkpointing on or off, AdamW's state on the GPU or offloaded to CPU memory."""

    model_config = ConfigDict(extra="forbid")
    model: str  # the Hugging Face id whose shape was built ("Qwen/Qwen3-0.6B"), or "tiny"
    seq_len: int
    micro_batch: int = 1
    grad_ckpt: bool
    optimizer_offload: bool
    status: Literal["ok", "oom", "skipped"]  # skipped: not run (time budget), or OOM implied by a shorter rung
    peak_gib: float | None = None  # torch.cuda.max_memory_allocated over the three steps (None on CPU)
    step_s: float | None = None  # fastest of the last two of three steps
    train_tok_s: float | None = None  # micro_batch * seq_len / step_s
    note: str = ""


class MeasuredTable(BaseModel):
    """Every row measured in one run on one device, with its provenance."""

    model_config = ConfigDict(extra="forbid")
    source: Literal["measured"] = "measured"
    gpu: str  # torch.cuda.get_device_name(), or "cpu"
    gpu_memory_gib: float | None = None
    torch: str
    transformers: str
    cuda: str | None = None
    date: str  # UTC, ISO 8601
    command: str  # what produced it, exactly
    method: str = ""  # what one step is
    rows: list[MeasuredRow] = Field(default_factory=list)

    def row(self, model: str, seq_len: int, grad_ckpt: bool, optimizer_offload: bool) -> MeasuredRow | None:
        """The row of that configuration (micro-batch 1), or None."""
        return next((r for r in self.rows if (r.model, r.seq_len, r.grad_ckpt, r.optimizer_offload, r.micro_batch)
                     == (model, seq_len, grad_ckpt, optimizer_offload, 1)), None)

    def series(self, model: str, grad_ckpt: bool, optimizer_offload: bool) -> list[MeasuredRow]:
        """The rows of one model and variant at micro-batch 1, by seq_len."""
        return sorted((r for r in self.rows if (r.model, r.grad_ckpt, r.optimizer_offload, r.micro_batch)
                       == (model, grad_ckpt, optimizer_offload, 1)), key=lambda r: r.seq_len)

    @property
    def label(self) -> str:
        """How a figure from this table is introduced to users."""
        return f"measured on {self.gpu}"


class MeasuredFile(BaseModel):
    """The file: one table per device measured (a new run on the same device replaces its table)."""

    model_config = ConfigDict(extra="forbid")
    tables: list[MeasuredTable] = Field(default_factory=list)

    def merged(self, table: MeasuredTable) -> MeasuredFile:
        """This file with `table` in place of any earlier table of the same device."""
        return MeasuredFile(tables=[t for t in self.tables if t.gpu != table.gpu] + [table])


def read(path: Path | str) -> MeasuredFile:
    """The file at `path`; an empty one where there is none."""
    path = Path(path)
    if not path.exists():
        return MeasuredFile()
    return MeasuredFile.model_validate_json(path.read_text())


def write(path: Path | str, file: MeasuredFile) -> None:
    """Write `file` to `path` (atomically: a reader never sees half a file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(file.model_dump(mode="json"), indent=1) + "\n")
    os.replace(tmp, path)


_CACHE: dict[tuple[str, float], MeasuredFile] = {}


def load() -> MeasuredFile:
    """The measured rows in effect: `$TRAINERGYM_GPU_MEASURED` (a path, or "off" for none), else the
    shipped file. A file that does not parse is an error, not a silent fallback."""
    chosen = os.environ.get(MEASURED_ENV)
    if chosen is not None and chosen.strip().lower() in ("off", "none", ""):
        return MeasuredFile()
    path = Path(chosen) if chosen else MEASURED_PATH
    try:
        key = (str(path), path.stat().st_mtime)
    except OSError:
        return MeasuredFile()
    if key not in _CACHE:
        _CACHE.clear()
        _CACHE[key] = read(path)
    return _CACHE[key]
