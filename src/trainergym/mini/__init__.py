"""The `mini` backend's training engine: real GRPO of a tiny Qwen3 per family, on one GPU or a CPU.

One concept per module:
- `tokenizer`: the family's character-level Hugging Face tokenizer and compact Qwen3/Hermes chat format;
- `scale`: the two sizes (`gpu`, `micro`), the model each makes and its tuned learning rate;
- `toolbox`: the family's eval tools for one rollout, as the hidden-eval scorer gives them;
- `rollout`: batched KV-cache decoding with those tools in the loop, and greedy accuracy;
- `base`: the warmed-up base model per (family, scale), cached by a content key;
- `knobs`: a job's `[prime_rl]` knobs at the mini scale, and those it cannot honour;
- `grpo`: one seed of GRPO on TRL's `GRPOTrainer` with our rollouts plugged in;
- `train`: a job's seeds side by side, scored before and after (`MiniResult`).

Everything takes plain data and callables (a family module, job tables, item dicts, a reward
callable); wiring it into `make_backend("mini")` is the backends' business. torch, transformers and
trl (the `mini` extra) are imported only inside the functions that need them.
"""
