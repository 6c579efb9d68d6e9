"""The two sizes the mini backend trains at, and the model each makes.

A `Scale` fixes everything that depends on the hardware rather than the job: the model's shape
(a transformers `Qwen3ForCausalLM`, the architecture of the full-scale jobs' bases, tiny), the
learning rate that stands for a family reference job's lr (`tuned_lr`: a job at the reference lr
trains at it, a job at 10x trains at 10x it), the warm-up recipe of its base models, and the caps
that keep a rollout short. `gpu` is the prototype's size (3.4M parameters; ../shared/reference/
mini-rl-h200.md); `micro` is small enough that real GRPO shows a real effect within minutes on
two CPU cores.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Scale:
    """One size of model, its warm-up and its rollout caps."""

    name: str
    hidden: int
    layers: int
    heads: int
    mlp: int
    max_len: int  # positions: prompt plus every turn and tool response (a base caps its rollouts far below)
    tuned_lr: float  # the mini lr of a job at its family reference job's lr
    max_tokens_cap: int  # a turn's tokens (the job's max_tokens counts a real tokenizer's, far shorter text)
    batch_cap: int  # rollouts per GRPO step at most
    # warm-up (see trainergym.mini.base)
    sft_lr: float = 1e-3
    sft_batch: int = 64
    sft_max_steps: int = 2000
    sft_eval_every: int = 25
    sft_items: int = 20000
    dev_items: int = 200
    target: float = 0.25  # stop the warm-up once dev accuracy reaches this: room to improve
    difficulty: int | None = None  # the items' difficulty level (None: the family's mix)

    def as_dict(self) -> dict:
        return asdict(self)


SCALES = {
    # gpu: warmed up and scored on the family's whole difficulty mix. Warmed at level 1 alone, its
    # bases sampled 0.2-2% of the reference jobs' own tasks right (levels 1-3), too few for GRPO to
    # learn from, so real training could show a job's harms but not its gains (docs/mini-backend.md).
    # Warmed to 0.25 on the mix, the calc_chain base still sampled only 6% of them right: its target is
    # 0.4, inside the 0.2-0.5, nearer the full-scale bases, which solve most of them.
    "gpu": Scale("gpu", hidden=256, layers=4, heads=8, mlp=768, max_len=1024, tuned_lr=1e-4, max_tokens_cap=96,
                 batch_cap=256, sft_eval_every=5, target=0.4),
    "micro": Scale("micro", hidden=64, layers=2, heads=4, mlp=192, max_len=1024, tuned_lr=1e-4, max_tokens_cap=40,
                   batch_cap=32, sft_lr=3e-3, sft_batch=32, sft_max_steps=1500, sft_eval_every=10, sft_items=4000,
                   dev_items=64, target=0.25, difficulty=1),
}


def get_scale(name: str) -> Scale:
    if name not in SCALES:
        raise ValueError(f"unknown mini scale {name!r}: one of {', '.join(SCALES)}")
    return SCALES[name]


def make_model(scale: Scale, tokenizer, seed: int = 0):
    """A freshly initialised Qwen3 causal LM of `scale`'s shape over `tokenizer`'s vocabulary."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    config = Qwen3Config(
        vocab_size=len(tokenizer), hidden_size=scale.hidden, intermediate_size=scale.mlp,
        num_hidden_layers=scale.layers, num_attention_heads=scale.heads, num_key_value_heads=scale.heads,
        head_dim=scale.hidden // scale.heads, max_position_embeddings=scale.max_len, tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, bos_token_id=None,
        use_cache=True, attn_implementation="sdpa",
    )
    torch.manual_seed(seed)
    return Qwen3ForCausalLM(config)
