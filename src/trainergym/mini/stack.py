"""Several seeds' models decoded as one batch: the seeds of a job generate together.

Why: a 3.4M-parameter model decodes a batch of 128 rollouts in about a hundred tiny kernels per
token, so a process per seed leaves the GPU's work in small pieces, and 16 such processes ran an
H200 out of memory. Seeds of one job share the shape and the step count, so their trainers can
meet at every step and decode all their rollouts in one forward, each row reading its own seed's
weights through batched matmuls (`torch.bmm` over a stacked weight per layer): as many kernels
as one model, several times the rows. Measured on the H200 (docs/mini-backend.md): 39 seeds
shared the GPU where 16 processes did not fit, at 1.3-1.5x the rollouts per second. A decode
step's attention is two matmuls (SDPA's fp32 kernel read the cache 4x slower); what is left of a
step is mostly the host's (launches, the rollout loop, the tools).

`SeedStack` is a decode-only Qwen3 forward over the stacked weights of `models` (it copies them:
build one per generation, after the optimiser steps). It speaks the part of a transformers
causal LM that `rollout.generate` uses (call with ids, mask, positions and a cache; `.logits`),
plus `keep_rows` for the batch's compaction. Rows are grouped by model, `rows_per_model` each
in order; inside, hidden states are laid out `[model, row, ...]` for the matmuls and flattened
for attention, where every row is on its own. A test holds its logits equal to transformers'
`Qwen3ForCausalLM` for every model, and its rollouts equal to each model's alone.
"""

from __future__ import annotations

from types import SimpleNamespace


def supports(model) -> bool:
    """Whether `model` is a Qwen3 this stack reproduces (no biases, no sliding window)."""
    config = getattr(model, "config", None)
    return (getattr(config, "model_type", "") == "qwen3" and not getattr(config, "attention_bias", False)
            and not getattr(config, "use_sliding_window", False))


class _Layer:
    """One layer's cache: keys and values `[rows, heads, positions, dim]`, in buffers that grow by
    doubling (so a decode step writes one column instead of copying the whole cache)."""

    def __init__(self):
        self._k = self._v = None
        self._kn = self._vn = 0  # filled positions (apart: the compaction sets keys, then values)

    @property
    def length(self) -> int:
        return self._kn

    @property
    def keys(self):
        return None if self._k is None else self._k[:, :, : self._kn]

    @keys.setter
    def keys(self, value):  # the compaction's result: the buffer starts again from it
        self._k, self._kn = value, value.shape[2]

    @property
    def values(self):
        return None if self._v is None else self._v[:, :, : self._vn]

    @values.setter
    def values(self, value):
        self._v, self._vn = value, value.shape[2]

    def append(self, k, v):
        n, filled = k.shape[2], self._kn
        if self._k is None:
            self._k, self._v, self._kn, self._vn = k, v, n, n
            return k, v
        if filled + n > min(self._k.shape[2], self._v.shape[2]):
            cap = max(2 * (filled + n), 64)
            grown_k = k.new_empty((*k.shape[:2], cap, k.shape[3]))
            grown_v = v.new_empty((*v.shape[:2], cap, v.shape[3]))
            grown_k[:, :, :filled] = self.keys
            grown_v[:, :, :filled] = self.values
            self._k, self._v = grown_k, grown_v
        self._k[:, :, filled: filled + n] = k
        self._v[:, :, filled: filled + n] = v
        self._kn = self._vn = filled + n
        return self.keys, self.values


class StackCache:
    """The stack's KV cache, shaped as `rollout._compact` expects (`layers[i].keys/values`)."""

    def __init__(self, n_layers: int):
        self.layers = [_Layer() for _ in range(n_layers)]


class SeedStack:
    """`models` (same Qwen3 shape) decoded together; row `r` of a batch is model `r // rows_per_model`'s."""

    training = False

    def __init__(self, models: list, rows_per_model: int):
        import torch

        first = models[0]
        self.config = config = first.config
        self.heads, self.kv_heads = config.num_attention_heads, config.num_key_value_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.heads
        self.eps = config.rms_norm_eps
        self.rotary = first.model.rotary_emb
        self.models = len(models)

        def stack(get, transpose=False):
            with torch.no_grad():
                ws = [get(m).detach() for m in models]
                return torch.stack([w.t() if transpose else w for w in ws])

        self.embed = stack(lambda m: m.model.embed_tokens.weight)                       # [S, vocab, d]
        self.head = stack(lambda m: m.lm_head.weight, transpose=True)                   # [S, d, vocab]
        self.norm = stack(lambda m: m.model.norm.weight)[:, None]                       # [S, 1, d]
        self.layers = []
        for i in range(config.num_hidden_layers):
            def at(m, i=i):
                return m.model.layers[i]
            self.layers.append(SimpleNamespace(
                norm_in=stack(lambda m: at(m).input_layernorm.weight)[:, None],
                qkv=torch.cat([stack(lambda m: at(m).self_attn.q_proj.weight, True),
                               stack(lambda m: at(m).self_attn.k_proj.weight, True),
                               stack(lambda m: at(m).self_attn.v_proj.weight, True)], dim=2),  # [S, d, (H+2K)D]
                q_norm=stack(lambda m: at(m).self_attn.q_norm.weight),                  # [S, D]
                k_norm=stack(lambda m: at(m).self_attn.k_norm.weight),
                o=stack(lambda m: at(m).self_attn.o_proj.weight, True),                 # [S, H*D, d]
                norm_post=stack(lambda m: at(m).post_attention_layernorm.weight)[:, None],
                gate_up=torch.cat([stack(lambda m: at(m).mlp.gate_proj.weight, True),
                                   stack(lambda m: at(m).mlp.up_proj.weight, True)], dim=2),  # [S, d, 2F]
                down=stack(lambda m: at(m).mlp.down_proj.weight, True),                 # [S, F, d]
            ))
        self.device = self.embed.device
        self._set_groups(torch.arange(self.models, device=self.device).repeat_interleave(rows_per_model))

    # --- what rollout.generate calls ---------------------------------------------------------------
    def parameters(self):
        yield self.embed

    def eval(self):
        return self

    def train(self, mode: bool = True):
        return self

    def new_cache(self) -> StackCache:
        return StackCache(len(self.layers))

    def keep_rows(self, keep: list[int]) -> None:
        """The batch kept only rows `keep` (in order): follow it."""
        import torch

        self._set_groups(self.groups[torch.tensor(keep, device=self.device)])

    def __call__(self, input_ids, attention_mask, position_ids, past_key_values, use_cache=True):
        return SimpleNamespace(logits=self.forward(input_ids, attention_mask, position_ids, past_key_values))

    # --- the forward ---------------------------------------------------------------------------------
    def _set_groups(self, groups) -> None:
        """Row -> model, and each row's slot in the `[model, row]` layout (rows of a model keep their order)."""
        import torch

        self.groups = groups
        counts = torch.bincount(groups, minlength=self.models)
        self.per_model = max(1, int(counts.max()))
        starts = torch.cumsum(counts, 0) - counts
        rank = torch.arange(len(groups), device=self.device) - starts[groups]
        self.slots = groups * self.per_model + rank

    def _to_models(self, x):
        """`[rows, t, f]` to `[model, slot * t, f]` (empty slots zero)."""
        rows, t, f = x.shape
        out = x.new_zeros((self.models * self.per_model, t, f))
        out.index_copy_(0, self.slots, x)
        return out.view(self.models, self.per_model * t, f)

    def _to_rows(self, x, t: int):
        return x.view(self.models * self.per_model, t, -1).index_select(0, self.slots)

    def _rms(self, x, weight):
        import torch

        dtype = x.dtype
        x = x.float()
        return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)).to(dtype)

    def forward(self, ids, mask, positions, cache: StackCache):
        import torch
        import torch.nn.functional as F

        rows, t = ids.shape
        h = self.embed[self.groups[:, None], ids]                                        # [rows, t, d]
        cos, sin = self.rotary(h, positions)                                             # [rows, t, D]
        cos, sin = cos[:, None], sin[:, None]
        past = cache.layers[0].length
        total = past + t
        key_pos = torch.arange(total, device=self.device)
        query_pos = past + torch.arange(t, device=self.device)
        # A query sees the cached and new keys its mask keeps, up to itself; and always itself, so
        # a padding query (left padding of the prompt) stays finite and its key harms no one.
        allowed = (mask[:, None, :total].bool() & (key_pos[None, :] <= query_pos[:, None])[None]) | \
                  (key_pos[None, :] == query_pos[:, None])[None]
        blocked = ~allowed[:, None]                                                      # [rows, 1, t, total]
        x = self._to_models(h)
        H, K, D = self.heads, self.kv_heads, self.head_dim
        for layer, lc in zip(self.layers, cache.layers, strict=True):
            qkv = self._to_rows(torch.bmm(self._rms(x, layer.norm_in), layer.qkv), t)    # [rows, t, (H+2K)D]
            q, k, v = qkv.split([H * D, K * D, K * D], dim=-1)
            q = self._rms(q.view(rows, t, H, D), layer.q_norm[self.groups][:, None, None]).transpose(1, 2)
            k = self._rms(k.view(rows, t, K, D), layer.k_norm[self.groups][:, None, None]).transpose(1, 2)
            v = v.view(rows, t, K, D).transpose(1, 2)
            q = q * cos + _rotate_half(q) * sin
            k = k * cos + _rotate_half(k) * sin
            keys, values = lc.append(k, v)
            if K != H:
                keys, values = keys.repeat_interleave(H // K, 1), values.repeat_interleave(H // K, 1)
            if t == 1:
                # A decode step: two matmuls. For one query per row against a long fp32 cache, SDPA's
                # memory-efficient kernel read the cache at 0.54 TB/s on the H200, these at 2.2
                # (bench/mini_decode.py --attention; docs/mini-backend.md).
                scores = (q @ keys.transpose(-1, -2)) * D ** -0.5
                attn = scores.masked_fill(blocked, float("-inf")).softmax(-1) @ values
            else:  # the prompt: SDPA, which never holds the [rows, heads, t, t] scores
                attn = F.scaled_dot_product_attention(q, keys, values, attn_mask=~blocked, scale=D ** -0.5)
            x = x + torch.bmm(self._to_models(attn.transpose(1, 2).reshape(rows, t, H * D)), layer.o)
            gate, up = torch.bmm(self._rms(x, layer.norm_post), layer.gate_up).chunk(2, dim=-1)
            x = x + torch.bmm(F.silu(gate) * up, layer.down)
        return self._to_rows(torch.bmm(self._rms(x, self.norm), self.head), t)


def _rotate_half(x):
    import torch

    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def generate_stacked(models: list, tokenizer, family, tasks: list[list], *, generators=None, **caps) -> list[list]:
    """Play `tasks[i]` (one list per model, all the same length) with `models[i]`, all in one batch;
    sampled with `generators[i]` (one per model, so a seed's draws are its own), or greedy. Takes
    `rollout.generate`'s keyword arguments otherwise; returns one list of `Rollout`s per model."""
    from trainergym.mini.rollout import generate

    n = len(tasks[0])
    if any(len(ts) != n for ts in tasks) or len(tasks) != len(models):
        raise ValueError("generate_stacked: one task list per model, all of one length")
    played = generate(SeedStack(models, n), tokenizer, family, [t for ts in tasks for t in ts],
                      generator=list(generators) if generators is not None else None, **caps)
    return [played[i * n:(i + 1) * n] for i in range(len(models))]


def accuracies(models: list, tokenizer, family, rows: list[dict], *, batch: int = 128, **caps) -> list[float]:
    """`rollout.accuracy` of every model in `models` on the same `rows`, decoded together."""
    from trainergym.mini.rollout import Task, _checks

    correct = [0] * len(models)
    for lo in range(0, len(rows), batch):
        chunk = rows[lo:lo + batch]
        tasks = [Task.from_row(r) for r in chunk]
        for i, played in enumerate(generate_stacked(models, tokenizer, family, [tasks] * len(models), greedy=True,
                                                    **caps)):
            correct[i] += sum(_checks(family, r.reply, row["answer"]) for r, row in zip(played, chunk, strict=True))
    return [c / len(rows) if rows else 0.0 for c in correct]
