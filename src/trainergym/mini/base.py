"""A family's base model: a tiny Qwen3 warmed up on the family's public distribution, cached by content.

Why a warm-up: no weights can be downloaded, and a random model never calls a tool, so GRPO would
see only zero rewards. The base is trained by supervised learning on the family's own solver
traces (`solve`) of items from its PUBLIC stream (`generate(seed, n, namespace="public")` with
seeds of our own; the hidden eval is another namespace drawn from a secret seed, never read here),
rendered in the chat format of `trainergym.mini.tokenizer`, loss on the model's own tokens only.
Its prompts come in the forms jobs write them too (`vary_form`: with or without a system prompt
and the family's answer-format sentence). It stops as soon as accuracy on a public dev split (greedy, the family's `check`) reaches the
scale's `target`, so its pre-score leaves room for a job to improve it, the way the untrained
full-scale bases do.

A base is built once per (family, scale) and kept under a content key: the hash of this
package's code, the family's package (and its kit), the scale's settings and the seed
(`base_key`). A user's own Hugging Face directory (`Base.from_dir`) is taken as it is.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from trainergym.mini.rollout import accuracy
from trainergym.mini.scale import Scale, get_scale, make_model
from trainergym.mini.tokenizer import IM_END, build_tokenizer, load_tokenizer, render_call, render_prompt, render_response

MINI_DIR = Path(__file__).resolve().parent
# The code a base depends on: change one and every key changes.
KEYED_MODULES = ("tokenizer.py", "scale.py", "base.py", "rollout.py", "toolbox.py")
WARMUP_SEED, DEV_SEED = "mini-warmup", "mini-dev"  # public-namespace seeds of the warm-up and dev items


@dataclass
class Base:
    """A base model on disk: where, under which key, and how it was made."""

    path: Path
    key: str
    family: str
    scale: str
    info: dict = field(default_factory=dict)

    def caps(self) -> dict:
        """The rollout caps this base plays with: `max_len` (the scale's positions), `max_new` (the
        tokens after the prompt) and `max_tokens` (one turn), these two twice the longest of its
        warm-up traces' within the scale's; a user's base gets the scale's."""
        scale = get_scale(self.scale)
        caps = self.info.get("caps", {})
        return {"max_len": scale.max_len, "max_new": min(scale.max_len, caps.get("max_new", scale.max_len)),
                "max_tokens": min(scale.max_tokens_cap, caps.get("max_tokens", scale.max_tokens_cap))}

    def load(self, device: str = "cpu"):
        """(model, tokenizer), the model on `device` in training mode."""
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(str(self.path)).to(device)
        return model, load_tokenizer(self.path)

    @classmethod
    def from_dir(cls, path: str | Path, family: str, scale: str = "gpu") -> Base:
        """A user's local Hugging Face model directory (`--base-model PATH`), keyed by its files."""
        path = Path(path)
        if not (path / "config.json").exists():
            raise ValueError(f"{path} is not a Hugging Face model directory (no config.json)")
        digest = hashlib.sha256()
        for f in sorted(p for p in path.rglob("*") if p.is_file()):
            digest.update(f.relative_to(path).as_posix().encode())
            digest.update(hashlib.sha256(f.read_bytes()).digest())
        return cls(path=path, key=digest.hexdigest(), family=family, scale=scale, info={"source": "user"})


def _hash_tree(digest, root: Path) -> None:
    for f in sorted(root.rglob("*.py")):
        digest.update(f.relative_to(root).as_posix().encode())
        digest.update(f.read_bytes())


def base_key(family, scale: Scale, seed: int = 0) -> str:
    """The content key of `family`'s base at `scale` and `seed` (hex sha256)."""
    import importlib

    digest = hashlib.sha256()
    for name in KEYED_MODULES:
        digest.update(name.encode())
        digest.update((MINI_DIR / name).read_bytes())
    package = importlib.import_module(family.__name__.partition(".")[0])
    _hash_tree(digest, Path(package.__file__).parent)
    try:
        import trainergym_kit

        _hash_tree(digest, Path(trainergym_kit.__file__).parent)
    except ImportError:
        pass
    digest.update(json.dumps({"family": family.ID, "scale": scale.as_dict(), "seed": seed}, sort_keys=True).encode())
    return digest.hexdigest()


def default_cache() -> Path:
    """`<data dir>/mini/bases` (imported late: the GPU host's copy may run without the library's deps)."""
    from trainergym.paths import data_dir

    return data_dir() / "mini" / "bases"


def find_base(family, scale: str = "micro", seed: int = 0, cache: Path | None = None) -> Base | None:
    """The cached base for (family, scale, seed) if one was built with this code, else None
    (the package's own prebuilt bases are looked up too)."""
    sc = get_scale(scale)
    key = base_key(family, sc, seed)
    for root in (cache or default_cache(), MINI_DIR / "data"):
        path = Path(root) / f"{family.ID}-{scale}-{key[:16]}"
        meta = path / "base.json"
        if meta.exists():
            info = json.loads(meta.read_text())
            if info.get("key") == key:
                return Base(path=path, key=key, family=family.ID, scale=scale, info=info)
    return None


def warmup_rows(family, n: int, seed: str, difficulty: int | None) -> list[dict]:
    return family.generate(seed, n, namespace="public", difficulty=difficulty)


# Sentences a job's system prompt is made of, more or less: what the warm-up mixes in (with the
# family's own TEACH and ANSWER sentences) so the base reads a task whatever frames it.
GENERIC_SYSTEM = (
    "You are a helpful assistant.", "You are a careful assistant.", "Use the tools for every step.",
    "Call one tool per step.", "Never compute in your head.", "Think step by step.", "Be concise.",
    "Pass each result to the next step.", "Answer exactly as asked.", "You have tools; use them.",
    "Solve the task below.", "Do not guess: look it up with the tools.",
)


def vary_form(family, row: dict, rng) -> dict:
    """`row` in one of the forms a job may give it (why: jobs write their own prompts, and a base
    that read only the family's exact form solved 0% of the calc_chain reference job's, which adds a
    system prompt and drops the answer-format sentence; docs/backends.md): half the time a system
    prompt of 1-3 sentences drawn from the family's TEACH and ANSWER and generic ones, a third of
    the time without the family's answer-format sentence. The answer and world are unchanged."""
    import re

    row = dict(row)
    answer_format = getattr(family, "ANSWER", "")
    if answer_format and answer_format in row["prompt"] and rng.random() < 1 / 3:
        row["prompt"] = row["prompt"].replace(answer_format, "").rstrip()
    if rng.random() < 0.5:
        pool = [*re.split(r"(?<=\.)\s+", getattr(family, "TEACH", "").strip()), answer_format, *GENERIC_SYSTEM]
        pool = [p for p in pool if p]
        row["system_prompt"] = " ".join(rng.sample(pool, rng.randint(1, min(3, len(pool)))))
    return row


def trace_ids(tokenizer, family, row: dict) -> tuple[list[int], list[int]] | None:
    """The solver's rollout of `row` as (ids, loss mask), encoded piece by piece exactly as the
    rollout loop encodes it; None when the solver cannot read the row."""
    try:
        solved = family.solve(row)
    except ValueError:
        return None
    pieces = [(render_prompt(row["prompt"], row.get("system_prompt")), 0)]
    for c in solved["calls"]:
        pieces.append((render_call(c["tool"], c["arguments"]), 1))
        pieces.append((render_response(str(c["result"])), 0))
    pieces.append((solved["reply"] + IM_END, 1))
    encoded = tokenizer([p for p, _ in pieces], add_special_tokens=False)["input_ids"]
    ids, mask = [], []
    for piece, (_, m) in zip(encoded, pieces, strict=True):
        ids.extend(piece)
        mask.extend([m] * len(piece))
    return ids, mask


def trace_caps(traces: list[tuple[list[int], list[int]]], scale: Scale) -> dict:
    """Rollout caps from the solver's traces: twice the longest completion (after the prompt) and
    the longest model turn, within the scale's caps. A rollout that rambles stops there instead of at the scale's far
    larger cap, which is most of the decoding time of a job that breaks its model."""
    longest_turn = longest = 0
    for _, mask in traces:
        run = 0
        for m in mask:
            run = run + 1 if m else 0
            longest_turn = max(longest_turn, run)
        longest = max(longest, completion_len(mask))
    return {"max_new": min(scale.max_len, 2 * longest), "max_tokens": min(scale.max_tokens_cap, 2 * longest_turn)}


def completion_len(mask: list[int]) -> int:
    """Tokens after the prompt in a trace's loss mask (the prompt is its leading zeros)."""
    first = next((i for i, m in enumerate(mask) if m), len(mask))
    return len(mask) - first


def build_base(family, scale: str = "micro", seed: int = 0, cache: Path | None = None, device: str = "cpu",
               force: bool = False, log=print) -> Base:
    """Warm up `family`'s base at `scale` (or return the cached one). Stops when greedy accuracy on
    the public dev split reaches the scale's target, or after `sft_max_steps`."""
    import torch

    sc = get_scale(scale)
    if not force and (found := find_base(family, scale, seed, cache)):
        return found
    key = base_key(family, sc, seed)
    started = time.time()
    tokenizer = build_tokenizer(family)
    torch.manual_seed(seed)
    model = make_model(sc, tokenizer, seed).to(device)
    forms = random.Random(f"{WARMUP_SEED}-{seed}-forms")
    traces = [t for row in warmup_rows(family, sc.sft_items, f"{WARMUP_SEED}-{seed}", sc.difficulty)
              if (t := trace_ids(tokenizer, family, vary_form(family, row, forms))) and len(t[0]) <= sc.max_len]
    if len(traces) < sc.sft_batch:
        raise ValueError(f"only {len(traces)} of {family.ID}'s warm-up traces fit the {scale} scale's {sc.max_len} "
                         "tokens: too few to warm up a base")
    dev = warmup_rows(family, sc.dev_items, f"{DEV_SEED}-{seed}", sc.difficulty)
    limits = trace_caps(traces, sc)
    caps = dict(max_turns=16, max_len=sc.max_len, **limits)
    opt = torch.optim.AdamW(model.parameters(), lr=sc.sft_lr, weight_decay=0.0)
    warmup = 50
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warmup))
    gen = torch.Generator().manual_seed(seed)
    pad = tokenizer.pad_token_id
    step, dev_acc, history = 0, 0.0, []
    model.train()
    while step < sc.sft_max_steps:
        order = torch.randperm(len(traces), generator=gen).tolist()
        for lo in range(0, len(order) - sc.sft_batch + 1, sc.sft_batch):
            batch = [traces[i] for i in order[lo:lo + sc.sft_batch]]
            width = max(len(ids) for ids, _ in batch)
            ids = torch.full((len(batch), width), pad, dtype=torch.long)
            labels = torch.full((len(batch), width), -100, dtype=torch.long)
            att = torch.zeros((len(batch), width), dtype=torch.long)
            for i, (x, m) in enumerate(batch):
                ids[i, :len(x)] = torch.tensor(x)
                att[i, :len(x)] = 1
                labels[i, :len(x)] = torch.tensor([t if k else -100 for t, k in zip(x, m, strict=True)])
            loss = model(input_ids=ids.to(device), attention_mask=att.to(device), labels=labels.to(device)).loss
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            step += 1
            if step % sc.sft_eval_every == 0:
                dev_acc = accuracy(model, tokenizer, family, dev, **caps)
                history.append({"step": step, "loss": round(loss.item(), 4), "dev": dev_acc})
                log(f"[mini base {family.ID}/{scale}] step {step} loss {loss.item():.3f} dev {dev_acc:.3f}")
                if dev_acc >= sc.target:
                    break
            if step >= sc.sft_max_steps:
                break
        if dev_acc >= sc.target:
            break
    info = {"key": key, "family": family.ID, "scale": scale, "seed": seed, "steps": step, "dev_accuracy": dev_acc,
            "caps": limits,
            "target": sc.target, "seconds": round(time.time() - started, 1), "history": history,
            "warmup": {"namespace": "public", "seed": f"{WARMUP_SEED}-{seed}", "items": len(traces)},
            "dev": {"namespace": "public", "seed": f"{DEV_SEED}-{seed}", "items": len(dev)},
            "parameters": sum(p.numel() for p in model.parameters())}
    root = Path(cache or default_cache())
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"{family.ID}-{scale}-{key[:16]}"
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=root))
    model.save_pretrained(str(tmp))
    tokenizer.save_pretrained(str(tmp))
    (tmp / "base.json").write_text(json.dumps(info, indent=1))
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    return Base(path=final, key=key, family=family.ID, scale=scale, info=info)
