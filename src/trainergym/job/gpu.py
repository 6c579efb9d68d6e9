"""GPU classes and the training-step memory and throughput estimates of a job.

Calibrated on measured peaks and throughput of one training step of Qwen3-0.6B / 1.7B-shaped
models on an H200 (micro-batch 1, activation checkpointing on, AdamW on the GPU). That is an
upper bound for prime-rl, which offloads optimizer state: the one offloaded measurement (0.6B,
seq_len 4096) peaked at 0.81x, which we apply to all.
"""

from __future__ import annotations

from dataclasses import dataclass

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


def peak_memory_gib(model: str, seq_len: int, lora: bool = False) -> float:
    """Estimated trainer peak for one micro-batch of `seq_len` tokens."""
    peak = max(_interpolate(model, seq_len, 1), 0.5 * _CALIBRATION[model][0][1]) * OPTIMIZER_OFFLOAD_FACTOR
    return peak * (LORA_FACTOR if lora else 1.0)


def train_tokens_per_second(model: str, seq_len: int, device: GPU) -> float:
    """Estimated trained tokens per second of `model` at `seq_len` on one `device`: the H200
    calibration (at least 1000) scaled by the device's speed."""
    return max(1000.0, _interpolate(model, seq_len, 2)) * device.speed_vs_h200


def fits(model: str, seq_len: int, device: GPU, lora: bool = False) -> bool:
    """False when the job would certainly run out of memory (5% headroom for the CUDA context)."""
    return peak_memory_gib(model, seq_len, lora) <= 0.95 * device.memory_gib
