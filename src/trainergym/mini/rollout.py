"""Rollouts with the family's eval tools in the loop: batched decoding over a KV cache.

Why our own loop: a rollout of a tiny model is hundreds of single-token steps, so what counts is
decoding a whole batch per step with a cache, and running a tool the moment a sequence closes a
call. Every sequence of the batch advances one token per forward pass; when one closes
`</tool_call>`, its call is parsed, run by the family's `Toolbox` (the scorer's semantics), and
`<tool_response>result</tool_response>` is forced into it whole, in the next forward pass (`env_mask` 0:
masked from the loss; the other sequences' slots of that pass are padding, masked out of attention),
while the others keep sampling. A rollout ends when the model answers (`<|im_end|>`),
after `max_turns` tool-calling turns (the last call still runs, as under the scorer), when a turn
passes `max_tokens` tokens or its call cannot be read (the scorer's model server would return
such text as the reply), or at the scale's length cap.

Each `Rollout` carries token ids for the trainer and a verifiers-style message list for rewards.
"""

from __future__ import annotations

import json
import warnings
from collections import deque
from dataclasses import dataclass, field

from trainergym.mini.toolbox import Toolbox
from trainergym.mini.tokenizer import CALL_CLOSE, CALL_OPEN, IM_END, render_prompt, render_response


@dataclass(frozen=True)
class Task:
    """One prompt to play: what a job's (or the eval's) item holds."""

    prompt: str
    answer: str = ""
    world: dict | None = None
    system_prompt: str | None = None
    id: str = ""
    tools: bool = True  # False: the job wires no tools, and every call is answered as an unknown tool's

    @classmethod
    def from_row(cls, row: dict) -> Task:
        return cls(prompt=row["prompt"], answer=str(row.get("answer", "")), world=row.get("world") or None,
                   system_prompt=row.get("system_prompt") or None, id=str(row.get("id", "")),
                   tools=bool(row.get("tools", True)))


@dataclass
class Rollout:
    """One played task: the ids the trainer needs and the messages a reward reads."""

    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)  # 1: the model's token; 0: a forced tool response
    messages: list[dict] = field(default_factory=list)  # assistant and tool messages, verifiers' shape
    tool_calls: int = 0
    stop: str = ""  # "answer", "max_turns", "max_tokens", "unreadable_call", "max_len"

    @property
    def reply(self) -> str:
        """The last assistant message's text: what the family's check grades."""
        for m in reversed(self.messages):
            if m["role"] == "assistant":
                return m.get("content") or ""
        return ""


def parse_call(text: str) -> tuple[str, str, str] | None:
    """(content before the call, tool name, arguments as JSON) of a turn ending in `</tool_call>`,
    or None when the call is not the `{"name": ..., "arguments": {...}}` object Hermes parsers read."""
    head, sep, body = text.partition(CALL_OPEN)
    if not sep:
        return None
    body = body.removesuffix(CALL_CLOSE)
    try:
        call = json.loads(body)
    except ValueError:
        return None
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        return None
    args = call.get("arguments", {})
    if not isinstance(args, dict):
        return None
    return head, call["name"], json.dumps(args, ensure_ascii=False)


class _Seq:
    """One sequence's progress through its rollout."""

    def __init__(self, prompt_ids: list[int], toolbox: Toolbox, tokenizer):
        self.out = Rollout(prompt_ids=prompt_ids)
        self.toolbox = toolbox
        self.tokenizer = tokenizer
        self.forced: deque[int] = deque()
        self.turn: list[int] = []
        self.done = False


def generate(model, tokenizer, family, tasks: list[Task], *, max_turns: int, max_tokens: int,
             temperature: float = 1.0, greedy: bool = False, max_len: int = 1024, max_new: int | None = None,
             generator=None) -> list[Rollout]:
    """Play every task once with `model` (in order): sampled at `temperature`, or greedy. A rollout
    stops at `max_len` positions in all, or after `max_new` tokens of its own (tool responses included).
    `model` may be a `stack.SeedStack` (several seeds' models, `generator` then one per model, each
    drawing for its own rows)."""
    limit = _Limit(max_len, max_new)
    import torch
    from transformers import DynamicCache

    device = next(model.parameters()).device
    def encode(text: str) -> list[int]:
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    im_end, call_close, pad = (tokenizer.convert_tokens_to_ids(t) for t in (IM_END, CALL_CLOSE, tokenizer.pad_token))
    seqs = [_Seq(encode(render_prompt(t.prompt, t.system_prompt)), Toolbox(family, t.world, t.tools), tokenizer)
            for t in tasks]
    width = max(len(s.out.prompt_ids) for s in seqs)
    ids = torch.full((len(seqs), width), pad, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        n = len(s.out.prompt_ids)
        ids[i, width - n:] = torch.tensor(s.out.prompt_ids)
        mask[i, width - n:] = 1
    ids, mask = ids.to(device), mask.to(device)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    next_pos = mask.sum(-1)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), warnings.catch_warnings():
            # transformers 5.24 renames `past_key_values` to `cache`; the GPU host's 5.17 knows only the former
            warnings.filterwarnings("ignore", message=".*past_key_values.*deprecated", category=FutureWarning)
            cache = model.new_cache() if hasattr(model, "new_cache") else DynamicCache()
            gens = generator if isinstance(generator, list) else [generator]
            per_gen = len(seqs) // len(gens)
            logits = model(input_ids=ids, attention_mask=mask, position_ids=positions, past_key_values=cache,
                           use_cache=True).logits[:, -1]
            live = list(range(len(seqs)))  # the batch's rows, as indices into seqs
            rows = torch.arange(len(live), device=device)
            live_index = rows.clone()
            steps = 0
            while True:
                if greedy or temperature <= 0:
                    sampled = logits.argmax(-1)
                else:  # Gumbel-max, with noise drawn for every task, so a row's draws never depend on
                    # which other rows are still in the batch (compaction keeps sampled rollouts as they were)
                    u = torch.cat([torch.rand((per_gen, logits.shape[-1]), generator=g, device=device) for g in gens])
                    gumbel = -torch.log(-torch.log(u.clamp(min=1e-20)))
                    sampled = (logits.float() / temperature + gumbel[live_index]).argmax(-1)
                sampled = sampled.tolist()
                feeds = [[] if seqs[i].done else _advance(seqs[i], tok, encode, im_end, call_close, max_turns,
                                                          max_tokens, limit) for i, tok in zip(live, sampled, strict=True)]
                if all(seqs[i].done for i in live):
                    break
                steps += 1
                if steps % COMPACT_EVERY == 0:
                    keep = [r for r, i in enumerate(live) if not seqs[i].done]
                    compacted = _compact(cache, mask, keep, device)
                    if compacted is not None:
                        mask = compacted
                        if hasattr(model, "keep_rows"):
                            model.keep_rows(keep)
                        live, feeds = [live[r] for r in keep], [feeds[r] for r in keep]
                        next_pos = next_pos[keep]
                        rows = torch.arange(len(live), device=device)
                        live_index = torch.tensor(live, device=device)
                # One forward for everyone: a sampled token each, or a whole forced tool response
                # (then the others' slots are padding, masked out of attention until compacted away).
                width = max(len(f) for f in feeds)
                lens = torch.tensor([len(f) for f in feeds], device=device)
                step = torch.tensor([f + [pad] * (width - len(f)) for f in feeds], device=device)
                fed = (torch.arange(width, device=device)[None, :] < lens[:, None]).long()
                mask = torch.cat([mask, fed], dim=1)
                out = model(input_ids=step, attention_mask=mask, position_ids=next_pos[:, None] + fed.cumsum(-1) - 1,
                            past_key_values=cache, use_cache=True).logits
                logits = out[rows, (lens - 1).clamp(min=0)]
                next_pos = next_pos + lens
    finally:
        model.train(was_training)
    return [s.out for s in seqs]


COMPACT_EVERY = 16  # decode steps between compactions of the batch and its cache


def _compact(cache, mask, keep: list[int], device):
    """Drop finished rows from the batch, and the cache columns no remaining row attends to (the
    padding of other rows' forced tool responses, which otherwise grows every row's cache by each
    response any row receives). Positions are explicit, so what remains computes exactly as before.
    Returns the new attention mask, or None when there is nothing worth dropping (or the cache keeps
    its tensors where this transformers does not expose them)."""
    import torch

    index = torch.tensor(keep, device=device)
    cols = mask[index].any(0)
    if len(keep) == mask.shape[0] and bool(cols.all()):
        return None
    layers = getattr(cache, "layers", None)
    if not layers or not all(hasattr(layer, "keys") and layer.keys is not None for layer in layers):
        return None
    where = cols.nonzero().squeeze(-1)
    for layer in layers:  # [batch, heads, positions, dim]
        layer.keys = layer.keys[index][:, :, where]
        layer.values = layer.values[index][:, :, where]
    return mask[index][:, where]


def _advance(s: _Seq, sampled: int, encode, im_end: int, call_close: int, max_turns: int, max_tokens: int,
             limit: _Limit) -> list[int]:
    """Take `s`'s next tokens (the pending forced response whole, else the sampled token), update
    its rollout, and return the tokens to feed."""
    out = s.out
    if s.forced:  # the tool's response, fed whole; what the model sampled meanwhile is dropped
        toks = list(s.forced)
        s.forced.clear()
        out.completion_ids.extend(toks)
        out.env_mask.extend([0] * len(toks))
        if limit.reached(out):
            _finish(s, "max_len")
        return toks
    tok = sampled
    out.completion_ids.append(tok)
    out.env_mask.append(1)
    s.turn.append(tok)
    if tok == im_end:
        out.messages.append({"role": "assistant", "content": _decode(s)[: -len(IM_END)]})
        _finish(s, "answer", record=False)
    elif tok == call_close:
        text = _decode(s)
        call = parse_call(text)
        if call is None:
            _finish(s, "unreadable_call")
            return [tok]
        content, name, arguments = call
        out.tool_calls += 1
        call_id = f"call_{out.tool_calls}"
        out.messages.append({"role": "assistant", "content": content, "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}]})
        result = s.toolbox.call(name, arguments)
        out.messages.append({"role": "tool", "tool_call_id": call_id, "name": name, "content": result})
        s.turn = []
        forced = encode(render_response(result))
        if out.tool_calls >= max_turns or limit.reached(out, len(forced)):
            out.completion_ids.extend(forced)  # the result is part of the rollout (masked), but no turn follows
            out.env_mask.extend([0] * len(forced))
            _finish(s, "max_turns" if out.tool_calls >= max_turns else "max_len", record=False)
        else:
            s.forced.extend(forced)
    elif len(s.turn) >= max_tokens:
        _finish(s, "max_tokens")
    elif limit.reached(out):
        _finish(s, "max_len")
    return [tok]


class _Limit:
    """A rollout's length caps: positions in all, and tokens after its prompt."""

    def __init__(self, max_len: int, max_new: int | None):
        self.max_len, self.max_new = max_len, max_new

    def reached(self, out: Rollout, more: int = 0) -> bool:
        new = len(out.completion_ids) + more
        return len(out.prompt_ids) + new >= self.max_len or (self.max_new is not None and new >= self.max_new)


def _decode(s: _Seq) -> str:
    return s.tokenizer.decode(s.turn, skip_special_tokens=False)


def _finish(s: _Seq, why: str, record: bool = True) -> None:
    """End `s`'s rollout; with `record`, its unfinished turn becomes the reply (as a model server
    returns a truncated or unparseable turn: content, no tool calls)."""
    if record and s.turn:
        s.out.messages.append({"role": "assistant", "content": _decode(s)})
    s.out.stop = why
    s.done = True
    s.turn = []


def accuracy(model, tokenizer, family, rows: list[dict], *, max_turns: int, max_tokens: int, max_len: int,
             max_new: int | None = None, batch: int = 256) -> float:
    """Share of `rows` the model answers right, greedy, graded by the family's own `check` against
    each row's `answer`: how pre and post scores are measured."""
    correct = 0
    for lo in range(0, len(rows), batch):
        chunk = rows[lo:lo + batch]
        played = generate(model, tokenizer, family, [Task.from_row(r) for r in chunk], max_turns=max_turns,
                          max_tokens=max_tokens, greedy=True, max_len=max_len, max_new=max_new)
        correct += sum(_checks(family, r.reply, row["answer"]) for r, row in zip(played, chunk, strict=True))
    return correct / len(rows) if rows else 0.0


def _checks(family, reply: str, answer) -> bool:
    try:
        return bool(family.check(reply, str(answer)))
    except Exception:  # noqa: BLE001 - a reply the checker cannot read is wrong
        return False
