"""`trainergym gpu-bench`: peak memory and trained tokens per second of one training step of the
Qwen3 shapes jobs may choose, measured on whatever device is present.

A shape is transformers' `Qwen3ForCausalLM` built from a `Qwen3Config` with random weights (nothing
is downloaded), bf16, sdpa attention, micro-batch 1. One step is forward (loss on the sequence
itself) + backward + AdamW step; each configuration runs three steps and keeps the fastest of the
last two and `torch.cuda.max_memory_allocated` over all three. Variants: activation checkpointing on
with AdamW's state offloaded to CPU memory (prime-rl's default: `model.ac` full, `optim_cpu_offload`
true), checkpointing on with AdamW on the GPU, and checkpointing off with AdamW on the GPU. An
out-of-memory error is caught and recorded as such (and implied for the longer rungs of that variant).

Runs with torch, transformers and pydantic alone, also as a script on a bare GPU machine:
    python3 src/trainergym/job/gpu_bench.py --out rows.json
"""

from __future__ import annotations

import argparse
import datetime as _dt
import gc
import shlex
import sys
import time
from pathlib import Path
from typing import Callable

if __package__:
    from .gpu_measured import MeasuredRow, MeasuredTable, read, write
else:  # run as a script: only this folder is importable
    from gpu_measured import MeasuredRow, MeasuredTable, read, write  # type: ignore[no-redef]

# The shapes of Qwen3's published config.json files (huggingface.co/Qwen/Qwen3-{0.6B,1.7B,4B}); all
# three tie the input embedding and the output head. "tiny" is for a CPU test of the code path.
_QWEN3 = dict(head_dim=128, vocab_size=151936, tie_word_embeddings=True, rms_norm_eps=1e-6, rope_theta=1e6,
              max_position_embeddings=40960)
SHAPES = {
    "Qwen/Qwen3-0.6B": dict(_QWEN3, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                            num_attention_heads=16, num_key_value_heads=8),
    "Qwen/Qwen3-1.7B": dict(_QWEN3, hidden_size=2048, intermediate_size=6144, num_hidden_layers=28,
                            num_attention_heads=16, num_key_value_heads=8),
    "Qwen/Qwen3-4B": dict(_QWEN3, hidden_size=2560, intermediate_size=9728, num_hidden_layers=36,
                          num_attention_heads=32, num_key_value_heads=8),
    "tiny": dict(head_dim=16, vocab_size=512, tie_word_embeddings=True, hidden_size=64, intermediate_size=128,
                 num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096),
}
ALIASES = {"0.6B": "Qwen/Qwen3-0.6B", "1.7B": "Qwen/Qwen3-1.7B", "4B": "Qwen/Qwen3-4B", "tiny": "tiny"}
DEFAULT_MODELS = ("0.6B", "1.7B", "4B")
# Every power of two the job schema's seq_len allows (job.bundle.PrimeRL.seq_len: 256..32768).
SEQ_LEN_RUNGS = (256, 512, 1024, 2048, 4096, 8192, 16384, 32768)
# (grad_ckpt, optimizer_offload), in the order run: prime-rl's default first.
VARIANTS = ((True, True), (True, False), (False, False))
STEPS = 3
METHOD = ("transformers Qwen3ForCausalLM, random weights of the real shape, bf16 parameters and AdamW state, sdpa "
          "attention, micro-batch 1, loss on the sequence itself; one step = forward + backward + AdamW step; "
          "peak = torch.cuda.max_memory_allocated over 3 steps, step_s = fastest of the last two; optimizer offload = "
          "AdamW moments in pinned CPU memory, copied to the GPU one tensor at a time for the step (weights and "
          "gradients stay on the GPU)")


class NoDevice(RuntimeError):
    """The device asked for is not here (no torch, or no CUDA GPU)."""


def resolve(models: str | list[str]) -> list[str]:
    """Model ids from aliases ("0.6B", "tiny") or ids, comma-separated or a list; KeyError for others."""
    names = [m.strip() for m in (models.split(",") if isinstance(models, str) else models) if m.strip()]
    out = []
    for name in names:
        model = ALIASES.get(name, name)
        if model not in SHAPES:
            raise KeyError(f"unknown shape {name!r}; known: {', '.join(ALIASES)}")
        out.append(model)
    return out


def check_device(device: str):
    """The torch device `device`, or NoDevice saying in one line why not."""
    try:
        import torch
    except ImportError:
        raise NoDevice("gpu-bench needs torch and transformers (uv sync --extra mini)") from None
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise NoDevice("gpu-bench: no CUDA GPU here (torch sees none); run it on a GPU host, or --device cpu "
                       "--models tiny to exercise the code path")
    return torch.device(device)


class OffloadedAdamW:
    """AdamW whose moments live in CPU memory (pinned where the device is a GPU): each step copies one
    tensor's moments to the device, updates, and copies them back, so the GPU holds weights,
    gradients and one tensor's moments at a time."""

    def __init__(self, params, lr=1e-6, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        import torch

        self.params = [p for p in params if p.requires_grad]
        self.lr, self.betas, self.eps, self.wd, self.t = lr, betas, eps, weight_decay, 0
        pin = self.params[0].device.type == "cuda"
        self.m = [torch.zeros(p.shape, dtype=p.dtype, device="cpu", pin_memory=pin) for p in self.params]
        self.v = [torch.zeros(p.shape, dtype=p.dtype, device="cpu", pin_memory=pin) for p in self.params]

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            p.grad = None

    def step(self) -> None:
        import torch

        b1, b2 = self.betas
        self.t += 1
        with torch.no_grad():
            for p, m_cpu, v_cpu in zip(self.params, self.m, self.v):
                if p.grad is None:
                    continue
                m, v, g = m_cpu.to(p.device, non_blocking=True), v_cpu.to(p.device, non_blocking=True), p.grad
                m.lerp_(g, 1 - b1)
                v.mul_(b2).addcmul_(g, g, value=1 - b2)
                p.mul_(1 - self.lr * self.wd)
                denom = (v / (1 - b2 ** self.t)).sqrt_().add_(self.eps)
                p.addcdiv_(m, denom, value=-self.lr / (1 - b1 ** self.t))
                m_cpu.copy_(m, non_blocking=True)
                v_cpu.copy_(v, non_blocking=True)


def build(model: str, device):
    """`model`'s shape with random weights, bf16, on `device` (initialised there: nothing downloaded)."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    config = Qwen3Config(**SHAPES[model], use_cache=False)
    config._attn_implementation = "sdpa"
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device(device):
            net = Qwen3ForCausalLM(config)
    finally:
        torch.set_default_dtype(previous)
    net.train()
    return net


def _sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def optimizer(net, offload: bool, device):
    """AdamW over `net`'s parameters: on the device, or with its moments offloaded to CPU memory."""
    import torch

    if offload:
        return OffloadedAdamW(net.parameters())
    return torch.optim.AdamW(net.parameters(), lr=1e-6, weight_decay=0.01, fused=device.type == "cuda")


def checkpointing(net, on: bool) -> None:
    """Activation checkpointing of every decoder layer on or off (non-reentrant)."""
    if hasattr(net, "activation_checkpointing_enable"):  # transformers >= 5.2x names it so
        if on:
            net.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
        else:
            net.activation_checkpointing_disable()
    elif on:
        net.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    else:
        net.gradient_checkpointing_disable()


def measure_one(net, opt, model: str, seq_len: int, grad_ckpt: bool, offload: bool, device) -> MeasuredRow:
    """Three steps of one configuration with optimizer `opt` (kept across a variant's rungs, as its
    state is across a run's steps); OOM comes back as a row with status "oom"."""
    import torch

    checkpointing(net, grad_ckpt)
    cuda = device.type == "cuda"
    times: list[float] = []
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    try:
        ids = torch.randint(0, net.config.vocab_size, (1, seq_len), device=device)
        for _ in range(STEPS):
            _sync(device)
            start = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            loss = net(input_ids=ids, labels=ids).loss
            loss.backward()
            opt.step()
            _sync(device)
            times.append(time.perf_counter() - start)
            del loss
    except torch.OutOfMemoryError as e:
        peak = torch.cuda.max_memory_allocated(device) / 2**30 if cuda else None
        first = str(e).splitlines()[0][:160]
        return MeasuredRow(model=model, seq_len=seq_len, grad_ckpt=grad_ckpt, optimizer_offload=offload, status="oom",
                           note=f"torch.OutOfMemoryError after {len(times)} step(s), {peak or 0:.1f} GiB allocated at "
                                f"the peak: {first}")
    finally:
        opt.zero_grad(set_to_none=True)
        gc.collect()
        if cuda:
            torch.cuda.empty_cache()
    step_s = min(times[1:]) if len(times) > 1 else times[0]
    peak = round(torch.cuda.max_memory_allocated(device) / 2**30, 2) if cuda else None
    return MeasuredRow(model=model, seq_len=seq_len, grad_ckpt=grad_ckpt, optimizer_offload=offload, status="ok",
                       peak_gib=peak, step_s=round(step_s, 4), train_tok_s=round(seq_len / step_s, 1))


def bench(models: list[str], seq_lens: tuple[int, ...] = SEQ_LEN_RUNGS, variants=VARIANTS, device: str = "cuda",
          budget_s: float | None = None, command: str = "", on_row: Callable[[MeasuredTable], None] | None = None,
          log: Callable[[str], None] = print) -> MeasuredTable:
    """Measure every (variant, model, seq_len), shortest first; `on_row` sees the table after each row.
    Past `budget_s` seconds the rest are recorded as skipped."""
    dev = check_device(device)
    import torch
    import transformers

    cuda = dev.type == "cuda"
    table = MeasuredTable(
        gpu=torch.cuda.get_device_name(dev) if cuda else "cpu",
        gpu_memory_gib=round(torch.cuda.get_device_properties(dev).total_memory / 2**30, 1) if cuda else None,
        torch=torch.__version__, transformers=transformers.__version__, cuda=torch.version.cuda if cuda else None,
        date=_dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(), command=command, method=METHOD)
    started = time.monotonic()
    torch.manual_seed(0)
    for grad_ckpt, offload in variants:
        for model in models:
            net, opt, oom_at = None, None, None
            for seq_len in sorted(seq_lens):
                over = budget_s is not None and time.monotonic() - started > budget_s
                if oom_at is not None or over:
                    note = f"OOM implied: out of memory at seq_len {oom_at}" if oom_at else "not run: time budget spent"
                    row = MeasuredRow(model=model, seq_len=seq_len, grad_ckpt=grad_ckpt, optimizer_offload=offload,
                                      status="oom" if oom_at else "skipped", note=note)
                else:
                    try:
                        if net is None:
                            net = build(model, dev)
                            opt = optimizer(net, offload, dev)
                        row = measure_one(net, opt, model, seq_len, grad_ckpt, offload, dev)
                    except torch.OutOfMemoryError as e:  # the weights or the optimizer alone do not fit
                        row = MeasuredRow(model=model, seq_len=seq_len, grad_ckpt=grad_ckpt, optimizer_offload=offload,
                                          status="oom", note=f"building the model: {str(e).splitlines()[0][:160]}")
                    if row.status == "oom":
                        oom_at = seq_len
                table.rows.append(row)
                log(f"{model} seq_len {seq_len} ckpt {'on' if grad_ckpt else 'off'} offload "
                    f"{'on' if offload else 'off'}: {row.status} peak {row.peak_gib} GiB step {row.step_s} s "
                    f"{row.train_tok_s} tok/s {row.note} [{time.monotonic() - started:.0f} s]")
                if on_row:
                    on_row(table)
            del net, opt
            gc.collect()
            if cuda:
                torch.cuda.empty_cache()
    return table


def run(out: Path, models: str | list[str] = DEFAULT_MODELS, seq_lens: tuple[int, ...] = SEQ_LEN_RUNGS,
        device: str = "cuda", budget_s: float | None = None, command: str = "", variants=VARIANTS,
        log: Callable[[str], None] = print) -> MeasuredTable:
    """Measure and merge the table into the file `out` (rewritten after every row, so a run cut short
    keeps what it measured; an earlier table of the same device is replaced)."""
    chosen = resolve(models)
    existing = read(out)
    return bench(chosen, tuple(seq_lens), variants, device, budget_s, command,
                 on_row=lambda table: write(out, existing.merged(table)), log=log)


def main(argv: list[str] | None = None) -> int:
    """The script's entry point (the CLI's `gpu-bench` is the same with the library's defaults)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS))
    parser.add_argument("--seq-lens", default=",".join(map(str, SEQ_LEN_RUNGS)))
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--budget-s", type=float, default=None)
    parser.add_argument("--command", default=None, help="the command recorded as the rows' provenance")
    args = parser.parse_args(argv)
    command = args.command or shlex.join(["python3", "src/trainergym/job/gpu_bench.py", *(argv or sys.argv[1:])])
    try:
        run(args.out, args.models, tuple(int(s) for s in args.seq_lens.split(",")), args.device, args.budget_s,
            command, log=lambda line: print(line, flush=True))
    except (NoDevice, KeyError) as e:
        print(e.args[0] if e.args else e, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
