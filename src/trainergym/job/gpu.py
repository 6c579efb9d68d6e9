"""GPU classes and the training-step memory and throughput estimates of a job.

Two sources, each figure saying which (`estimate()`'s `basis`):

- `measured`: the rows `trainergym gpu-bench` wrote to `data/gpu_measured.json`
  (`job/gpu_measured.py`; `$TRAINERGYM_GPU_MEASURED` names another file, or "off"). Read first, for
  prime-rl's default configuration: activation checkpointing on and the optimizer state offloaded,
  micro-batch 1; where only the on-GPU-optimizer rows exist, those x`OPTIMIZER_OFFLOAD_FACTOR`.
- `reported`: the table below, the original system's figures (Qwen3-0.6B / 1.7B-shaped models on an
  H200, micro-batch 1, checkpointing on, AdamW on the GPU), an upper bound for prime-rl, which
  offloads optimizer state: its one offloaded measurement (0.6B, seq_len 4096) peaked at 0.81x,
  which we apply to all. The fallback for models the measured rows lack.

Memory is read as device-independent (the rows of whichever GPU measured them); throughput is
scaled from the measuring GPU by `speed_vs_h200`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from trainergym.job import gpu_measured

# (seq_len, peak GiB, train tokens/s on H200) at micro-batch 1 with checkpointing on.
_CALIBRATION = {
    "Qwen/Qwen3-0.6B": ((2048, 7.58, 9371), (4096, 11.76, 17977), (8192, 20.13, 27770)),
    "Qwen/Qwen3-1.7B": ((2048, 16.67, 5614), (4096, 18.3, 13096), (8192, 26.91, 20448)),
}
CALIBRATED_MODELS = tuple(_CALIBRATION)
OPTIMIZER_OFFLOAD_FACTOR = 9.54 / 11.76
LORA_FACTOR = 0.85  # assumption: no full optimizer state, activations unchanged


@dataclass(frozen=True)
class GPU:
    """A GPU class: its Runpod id, memory, assumed speed relative to an H200 and on-demand price per
    GPU-hour."""

    name: str  # Runpod gpuTypeId
    memory_gib: float
    speed_vs_h200: float  # bf16 dense throughput relative to an H200 (assumed)
    usd_per_hour: float  # on-demand, per GPU: Runpod's list price when these were calibrated


GPUS = {
    g.name: g
    for g in (
        GPU("NVIDIA RTX A5000", 24, 0.15, 0.27),
        GPU("NVIDIA GeForce RTX 4090", 24, 0.2, 0.74),
        GPU("NVIDIA A40", 48, 0.2, 0.44),
        GPU("NVIDIA RTX A6000", 48, 0.2, 0.79),
        GPU("NVIDIA A100 80GB PCIe", 80, 0.45, 1.39),
        GPU("NVIDIA H100 80GB HBM3", 80, 0.7, 3.29),
    )
}
ALIASES = {"A5000": "NVIDIA RTX A5000", "RTX 4090": "NVIDIA GeForce RTX 4090", "4090": "NVIDIA GeForce RTX 4090",
           "A40": "NVIDIA A40", "A6000": "NVIDIA RTX A6000", "A100": "NVIDIA A100 80GB PCIe", "H100": "NVIDIA H100 80GB HBM3"}


def gpu(name: str) -> GPU:
    """The GPU class `name` (a Runpod id or an alias such as "A40"); KeyError for an unknown one."""
    key = ALIASES.get(name, name)
    if key not in GPUS:
        raise KeyError(f"unknown GPU class {name!r}; known: {', '.join(ALIASES)}")
    return GPUS[key]


def list_price(name: str) -> float:
    """On-demand $/h per GPU of a known class; 0.0 for one we have no price for."""
    try:
        return gpu(name).usd_per_hour
    except KeyError:
        return 0.0


def _interpolate(model: str, seq_len: int, column: int) -> float:
    """Linear in seq_len between calibration points, extrapolated past either end."""
    rows = _CALIBRATION[model]
    pairs = list(zip(rows, rows[1:]))
    lo, hi = next((p for p in pairs if seq_len <= p[1][0]), pairs[-1])
    y0, y1 = lo[column], hi[column]
    return y0 + (y1 - y0) * (seq_len - lo[0]) / (hi[0] - lo[0])


REPORTED_BASIS = "reported (the original system's H200 calibration in job/gpu.py, x0.81 for the optimizer offload)"
REPORTED_SPEED_BASIS = "reported (the original system's H200 calibration in job/gpu.py)"


@dataclass(frozen=True)
class Estimate:
    """A training-step figure and where it comes from: `source` "measured" or "reported", `basis`
    the words users see beside it ("measured on NVIDIA H200 (torch 2.11.0+cu130, 2026-12-01)...")."""

    value: float
    source: Literal["measured", "reported"]
    basis: str


def _line(points: list[tuple[int, float]], x: float, extrapolate: bool) -> float:
    """Linear in x between points (sorted by x); past either end the end segment's slope goes on
    (`extrapolate`) or the end value holds."""
    if len(points) == 1:
        return points[0][1]
    if not extrapolate and x <= points[0][0]:
        return points[0][1]
    if not extrapolate and x >= points[-1][0]:
        return points[-1][1]
    pairs = list(zip(points, points[1:]))
    (x0, y0), (x1, y1) = next((p for p in pairs if x <= p[1][0]), pairs[-1])
    return y0 + (y1 - y0) * (x - x0) / (x1 - x0)


def _when(table: gpu_measured.MeasuredTable) -> str:
    return f"torch {table.torch}, {table.date[:10]}"


def _measured_peak(model: str, seq_len: int) -> Estimate | None:
    """The measured peak of prime-rl's default variant (or the on-GPU optimizer's, offloaded by the
    factor), from the first table that has one: linear between rungs, the last slope past the
    longest, flat below the shortest (weights and optimizer dominate there); at or past a rung
    that ran out of memory, at least the measuring GPU's memory."""
    for table in gpu_measured.load().tables:
        for offload, factor in ((True, 1.0), (False, OPTIMIZER_OFFLOAD_FACTOR)):
            series = table.series(model, grad_ckpt=True, optimizer_offload=offload)
            points = [(r.seq_len, r.peak_gib) for r in series if r.status == "ok" and r.peak_gib is not None]
            if not points:
                continue
            peak = max(_line(points, seq_len, extrapolate=True), points[0][1]) * factor
            oom = [r.seq_len for r in series if r.status == "oom" and r.seq_len <= seq_len]
            if oom and table.gpu_memory_gib:
                peak = max(peak, table.gpu_memory_gib)
            how = "optimizer offloaded" if offload else "AdamW on the GPU, x0.81 for the optimizer offload"
            return Estimate(peak, "measured", f"{table.label} ({_when(table)}; checkpointing on, {how})")
    return None


def _speed_of(table: gpu_measured.MeasuredTable) -> float | None:
    """The measuring GPU's speed relative to an H200 (None: unknown, its throughput is not used)."""
    if "H200" in table.gpu:
        return 1.0
    known = GPUS.get(ALIASES.get(table.gpu, table.gpu))
    return known.speed_vs_h200 if known else None


def _measured_speed(model: str, seq_len: int, device: GPU) -> Estimate | None:
    for table in gpu_measured.load().tables:
        speed = _speed_of(table)
        if not speed:
            continue
        # AdamW on the GPU first: a job's step trains many micro-batches per optimizer step, so the
        # offloaded optimizer's transfers (paid once per micro-batch here) would understate the rate.
        for offload in (False, True):
            series = table.series(model, grad_ckpt=True, optimizer_offload=offload)
            points = [(r.seq_len, r.train_tok_s) for r in series if r.status == "ok" and r.train_tok_s]
            if points:
                tok_s = _line(points, seq_len, extrapolate=False) * device.speed_vs_h200 / speed
                how = "optimizer offloaded" if offload else "AdamW on the GPU"
                scaled = "" if device.name == table.gpu else f", x{device.speed_vs_h200 / speed:g} for {device.name}"
                return Estimate(tok_s, "measured", f"{table.label} ({_when(table)}; checkpointing on, {how}{scaled})")
    return None


def covered(model: str) -> bool:
    """Whether either source has figures for `model`."""
    return model in _CALIBRATION or _measured_peak(model, 4096) is not None


def peak_estimate(model: str, seq_len: int, lora: bool = False) -> Estimate:
    """Estimated trainer peak (GiB) for one micro-batch of `seq_len` tokens under prime-rl's defaults,
    measured rows first; KeyError for a model neither source has."""
    found = _measured_peak(model, seq_len)
    if found is None:
        peak = max(_interpolate(model, seq_len, 1), 0.5 * _CALIBRATION[model][0][1]) * OPTIMIZER_OFFLOAD_FACTOR
        found = Estimate(peak, "reported", REPORTED_BASIS)
    if lora:
        found = Estimate(found.value * LORA_FACTOR, found.source, found.basis + ", x0.85 for LoRA (assumed)")
    return found


def speed_estimate(model: str, seq_len: int, device: GPU) -> Estimate:
    """Estimated trained tokens per second of `model` at `seq_len` on one `device`: measured rows
    first (scaled from the measuring GPU by `speed_vs_h200`), else the reported H200 calibration (at
    least 1000) scaled by the device's speed; KeyError for a model neither source has."""
    found = _measured_speed(model, seq_len, device)
    if found is not None:
        return found
    return Estimate(max(1000.0, _interpolate(model, seq_len, 2)) * device.speed_vs_h200, "reported",
                    f"{REPORTED_SPEED_BASIS}, x{device.speed_vs_h200:g} for {device.name}")


def peak_memory_gib(model: str, seq_len: int, lora: bool = False) -> float:
    """Estimated trainer peak for one micro-batch of `seq_len` tokens (`peak_estimate`'s value)."""
    return peak_estimate(model, seq_len, lora).value


def train_tokens_per_second(model: str, seq_len: int, device: GPU) -> float:
    """Estimated trained tokens per second of `model` at `seq_len` on one `device`
    (`speed_estimate`'s value)."""
    return speed_estimate(model, seq_len, device).value


def fits(model: str, seq_len: int, device: GPU, lora: bool = False) -> bool:
    """False when the job would certainly run out of memory (5% headroom for the CUDA context)."""
    return peak_memory_gib(model, seq_len, lora) <= 0.95 * device.memory_gib


def classes_that_fit(model: str, seq_len: int, lora: bool = False) -> list[str]:
    """The known GPU classes (Runpod ids) whose memory holds the job's trainer, cheapest first: what a
    ladder may offer a job of this shape."""
    return [g.name for g in sorted(GPUS.values(), key=lambda g: g.usd_per_hour) if fits(model, seq_len, g, lora)]
