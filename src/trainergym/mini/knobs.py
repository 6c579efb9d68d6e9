"""A job's `[prime_rl]` knobs as the mini scale honours them, and the list of those it cannot.

Why relative learning rates: a tiny model's good learning rate is not a 1.7B model's, and small
proxies rank training choices well only when the rate is set per model. So a job's lr counts
relative to its family reference job's: a job at the reference lr trains at the scale's
`tuned_lr`, one at 10x trains at 10x that; `min_lr` scales the same way. The schedule (constant,
linear or cosine decay to `min_lr`, after `warmup_steps` of linear warm-up) is prime-rl's, step
for step.

Everything the scale caps or cannot do is listed in `Knobs.unhonoured`, one line each, never
dropped silently: sequence length and per-turn tokens count a real tokenizer's tokens (the mini
tokenizer's are characters, and the scale fixes its own caps), batches above the scale's cap,
optimizers, losses and algorithms other than AdamW and plain GRPO, off-policy steps and LoRA.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from trainergym.mini.scale import Scale

# The schema's defaults for the knobs mini reads (trainergym.job.bundle.PrimeRL); a job that
# leaves one out gets these.
DEFAULTS = {"batch_size": 128, "group_size": 8, "temperature": 1.0, "max_tokens": 512, "max_turns": 8, "lr": 3e-6,
            "optimizer": "adamw", "weight_decay": 0.01, "max_norm": 1.0, "scheduler": "constant", "warmup_steps": 0,
            "min_lr": 0.0, "loss": "default", "kl_tau": 1e-3, "algorithm": "grpo", "max_off_policy_steps": 1,
            "lora": None, "seq_len": 4096}


@dataclass(frozen=True)
class Knobs:
    """What one mini run trains with."""

    lr: float
    min_lr: float
    scheduler: str
    warmup_steps: int
    max_steps: int
    batch_size: int  # rollouts per step
    group_size: int  # rollouts per task
    max_tokens: int  # per turn, mini tokens
    max_turns: int
    temperature: float
    weight_decay: float
    max_norm: float
    unhonoured: list[str] = field(default_factory=list)

    def lr_at(self, step: int) -> float:
        """The learning rate of optimizer step `step` (0-based): warm-up, then the schedule to `min_lr`."""
        if self.warmup_steps and step < self.warmup_steps:
            return self.lr * (step + 1) / self.warmup_steps
        if self.scheduler == "constant":
            return self.lr
        span = max(1, self.max_steps - self.warmup_steps)
        progress = min(1.0, (step - self.warmup_steps) / span)
        if self.scheduler == "linear":
            return self.min_lr + (self.lr - self.min_lr) * (1.0 - progress)
        return self.min_lr + (self.lr - self.min_lr) * 0.5 * (1.0 + math.cos(math.pi * progress))


def prime_rl_table(job) -> dict:
    """The `[prime_rl]` table of a job given as a dict (the table, or a whole job.toml's data),
    a parsed `JobConfig`, or a path to a job.toml."""
    if isinstance(job, (str, Path)):
        job = tomllib.loads(Path(job).read_text())
    if hasattr(job, "model_dump"):
        job = job.model_dump()
    if isinstance(job, Mapping) and "prime_rl" in job:
        job = job["prime_rl"]
    return {**DEFAULTS, **dict(job)}


def reference_table(family) -> dict:
    """The family reference job's `[prime_rl]` table."""
    return prime_rl_table(Path(family.REFERENCE_JOB) / "job.toml")


def map_knobs(job, reference, scale: Scale, max_tokens_cap: int | None = None) -> Knobs:
    """`job`'s knobs at `scale`, its learning rates relative to `reference`'s (both as
    `prime_rl_table` reads them); a turn's tokens within `max_tokens_cap` (default the scale's)."""
    p, ref = prime_rl_table(job), prime_rl_table(reference)
    out: list[str] = []
    ratio = p["lr"] / ref["lr"]
    group = int(p["group_size"])
    batch = int(p["batch_size"])
    if batch > scale.batch_cap:
        out.append(f"batch_size {batch} -> {scale.batch_cap}: the {scale.name} scale's cap on rollouts per step")
        batch = scale.batch_cap
    if batch % group or batch < group:
        fixed = max(group, batch - batch % group)
        out.append(f"batch_size {batch} -> {fixed}: a whole number of groups of {group}")
        batch = fixed
    max_tokens, cap = int(p["max_tokens"]), min(scale.max_tokens_cap, max_tokens_cap or scale.max_tokens_cap)
    if max_tokens > cap:
        out.append(f"max_tokens {max_tokens} -> {cap} mini tokens per turn (the mini tokenizer's tokens are "
                   "characters; a turn is capped at twice the longest solver turn)")
        max_tokens = cap
    out.append(f"seq_len {p['seq_len']}: the base caps a rollout at twice its warm-up's longest trace "
               f"(at most {scale.max_len} mini tokens)")
    if p["optimizer"] != "adamw":
        out.append(f"optimizer {p['optimizer']!r}: mini trains with AdamW")
    if p["loss"] != "default":
        out.append(f"loss {p['loss']!r}: mini uses TRL's GRPO loss")
    if p["algorithm"] != "grpo":
        out.append(f"algorithm {p['algorithm']!r}: mini runs GRPO")
    if p["kl_tau"] != DEFAULTS["kl_tau"]:
        out.append(f"kl_tau {p['kl_tau']:g}: mini trains without a KL term")
    if int(p["max_off_policy_steps"]) > 1:
        out.append(f"max_off_policy_steps {p['max_off_policy_steps']}: mini is on-policy (one update per batch)")
    if p.get("lora"):
        out.append("lora: mini fine-tunes every weight")
    return Knobs(lr=scale.tuned_lr * ratio, min_lr=scale.tuned_lr * p["min_lr"] / ref["lr"],
                 scheduler=p["scheduler"], warmup_steps=int(p["warmup_steps"]), max_steps=int(p["max_steps"]),
                 batch_size=batch, group_size=group, max_tokens=max_tokens, max_turns=int(p["max_turns"]),
                 temperature=float(p["temperature"]), weight_decay=float(p["weight_decay"]),
                 max_norm=float(p["max_norm"]), unhonoured=out)
