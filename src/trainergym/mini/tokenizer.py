"""A family's tokenizer and chat format: a real Hugging Face `PreTrainedTokenizerFast`, built offline.

Why not a downloaded tokenizer: nothing can be downloaded here or on the GPU machine, and a tiny
model trains far faster on short sequences. So the vocabulary is one token per character (every
printable ASCII character, plus any other character the family's public items use), the chat
markers as special tokens, and a few multi-character tokens that make a family's rollouts short:
its tool names, the JSON scaffolding of a tool call, the role headers and the fixed phrases its
prompts and tool results repeat (mined from public items; numbers and quoted strings stay
characters, so the model must copy them).

The chat format is Qwen3/Hermes style, kept compact: tool schemas are not rendered (the model
learns its tools in warm-up), a tool call is `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`
and its result `<tool_response>...</tool_response>` follows inline in the same assistant turn, which
ends with `<|im_end|>` only when it answers:

    <|im_start|>user
    Start with 52. ...<|im_end|>
    <|im_start|>assistant
    <tool_call>{"name": "calc_add", "arguments": {"a": 52, "b": 34}}</tool_call><tool_response>86</tool_response>Answer: 86<|im_end|>

`render_call` / `render_response` build exactly the text the Jinja template renders for a
verifiers-style message list, and the rollout loop (`trainergym.mini.rollout`) encodes the same
pieces, so warm-up, GRPO and scoring see one token stream. The tokenizer saves and loads with
`save_pretrained` / `from_pretrained` (template included).
"""

from __future__ import annotations

import json
import re
from collections import Counter

IM_START, IM_END, PAD = "<|im_start|>", "<|im_end|>", "<|pad|>"
UNK = "<unk>"
CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
RESPONSE_OPEN, RESPONSE_CLOSE = "<tool_response>", "</tool_response>"
SPECIAL = (PAD, UNK, IM_START, IM_END)
MARKERS = (CALL_OPEN, CALL_CLOSE, RESPONSE_OPEN, RESPONSE_CLOSE)
HEADERS = ("system\n", "user\n", "assistant\n")
SCAFFOLD = ('{"name": "', '", "arguments": {', "}}", "Answer: ")

# The template renders what `render_call` and `render_response` build (a test holds them equal).
CHAT_TEMPLATE = (
    "{%- for m in messages -%}"
    "{%- if m.role == 'system' or m.role == 'user' -%}"
    "<|im_start|>{{ m.role }}{{ '\\n' }}{{ m.content }}<|im_end|>{{ '\\n' }}"
    "{%- elif m.role == 'assistant' -%}"
    "{%- if loop.index0 == 0 or messages[loop.index0 - 1].role != 'tool' -%}<|im_start|>assistant{{ '\\n' }}{%- endif -%}"
    "{{ m.content or '' }}"
    "{%- for c in (m.tool_calls or []) -%}"
    "{%- set f = c.function if c.function is defined else c -%}"
    "<tool_call>{\"name\": \"{{ f.name }}\", \"arguments\": "
    "{%- if f.arguments is string %} {{ f.arguments }}{% else %} {{ f.arguments | tojson }}{% endif -%}"
    "}</tool_call>"
    "{%- endfor -%}"
    "{%- if not m.tool_calls -%}<|im_end|>{{ '\\n' }}{%- endif -%}"
    "{%- elif m.role == 'tool' -%}"
    "<tool_response>{{ m.content }}</tool_response>"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt and (messages | length == 0 or messages[-1].role != 'tool') -%}"
    "<|im_start|>assistant{{ '\\n' }}"
    "{%- endif -%}"
)

_DATA = re.compile(r'-?\d+|"[^"\n]*"')  # numbers and quoted strings: data the model must copy
_CLAUSE = re.compile(r"(?<=[.:;?!\n])")
_WORD = re.compile(r"[A-Za-z][A-Za-z_'-]{2,} ?")


def render_call(name: str, arguments: dict | str) -> str:
    """One tool call as the model writes it (and the template renders it)."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return f'{CALL_OPEN}{{"name": "{name}", "arguments": {args}}}{CALL_CLOSE}'


def render_response(result: str) -> str:
    """A tool's result as it is forced into the sequence (masked from the loss)."""
    return f"{RESPONSE_OPEN}{result}{RESPONSE_CLOSE}"


def render_prompt(prompt: str, system_prompt: str | None = None) -> str:
    """A task's prompt up to the assistant header, as `apply_chat_template(..., add_generation_prompt=True)`."""
    head = f"{IM_START}system\n{system_prompt}{IM_END}\n" if system_prompt else ""
    return f"{head}{IM_START}user\n{prompt}{IM_END}\n{IM_START}assistant\n"


def mine_phrases(texts: list[str], min_share: float = 0.05, max_phrases: int = 240) -> list[str]:
    """Fixed phrases the texts repeat: the pieces between numbers and quoted strings that occur in
    at least `min_share` of the texts, longest-saving first."""
    counts: Counter[str] = Counter()
    for text in texts:
        pieces = {p for p in _DATA.split(text) if 3 <= len(p) <= 400}
        pieces |= {s for p in pieces for s in _CLAUSE.split(p) if len(s) >= 3}  # repeated clauses of varying prompts
        pieces |= set(_WORD.findall(text))  # and repeated words
        counts.update(pieces)
    floor = max(2, int(min_share * len(texts)))
    kept = [p for p, n in counts.items() if n >= floor and not any(s in p for s in (*SPECIAL, *MARKERS))]
    kept.sort(key=lambda p: (-(counts[p] * (len(p) - 1)), p))
    return sorted(kept[:max_phrases])


def family_corpus(family, n: int = 400, seed: str = "mini-tokenizer") -> tuple[list[str], set[str]]:
    """Public texts of the family (prompts, tool results, replies) to mine phrases from, and the tool names."""
    rows = family.generate(seed, n, namespace="public")
    texts, tools = [], {t["function"]["name"] for t in family.EVAL_TOOLS}
    for row in rows:
        texts.append(row["prompt"])
        try:
            solved = family.solve(row)
        except ValueError:
            continue
        texts.extend(str(c["result"]) for c in solved["calls"])
        texts.append(solved["reply"])
    return texts, tools


def build_tokenizer(family, extra_phrases: tuple[str, ...] = ()):
    """The family's tokenizer: characters, chat markers, tool names, argument keys, mined phrases.
    Deterministic for a family's generator (the base model's cache key covers this code)."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    texts, tool_names = family_corpus(family)
    chars = {chr(i) for i in range(32, 127)} | {"\n"}
    for text in texts:
        chars.update(text)
    vocab = {tok: i for i, tok in enumerate([*SPECIAL, *sorted(chars)])}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    backend.pre_tokenizer = pre_tokenizers.Split(pattern=Regex("."), behavior="isolated")  # one token a character
    backend.decoder = decoders.Fuse()
    keys = sorted({p for t in family.EVAL_TOOLS for p in t["function"]["parameters"].get("properties", {})})
    words = [*MARKERS, *HEADERS, *SCAFFOLD, *sorted(tool_names),
             *(f'"{k}": ' for k in keys), *(f', "{k}": ' for k in keys),
             *mine_phrases(texts), *extra_phrases]
    seen: set[str] = set(vocab)
    added = [w for w in words if not (w in seen or seen.add(w))]
    backend.add_tokens([AddedToken(w, normalized=False, special=False) for w in added])
    backend.add_special_tokens([AddedToken(t, normalized=False, special=True) for t in (PAD, IM_START, IM_END)])
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token=UNK, pad_token=PAD, eos_token=IM_END,
                                  bos_token=None, padding_side="left")
    tok.chat_template = CHAT_TEMPLATE
    return tok


def load_tokenizer(path):
    """A tokenizer saved by `save_pretrained` (ours, or a user's model directory's)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(path))
