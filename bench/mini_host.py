"""The host's share of a mini decode step: `rollout.generate` driven by a model that costs nothing.

On the H200 a generation of 640 stacked rollouts took about 15 ms per decode step with 8 such
processes sharing the GPU (docs/mini-backend.md). This separates what the host spends per step
(advancing every row, building the next input, the sampling noise) from what the GPU does: the
model here returns fixed logits that write one digit forever, so every row stays live for
`--steps` decode steps and no tool runs.

    uv run --no-sync python bench/mini_host.py --rows 640 --steps 300
"""

from __future__ import annotations

import argparse
import json
import time


def main(argv=None) -> int:
    import torch

    from trainergym.mini.rollout import Task, generate
    from trainergym.mini.tokenizer import build_tokenizer
    from trainergym.task.spec import get_family

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--family", default="calc_chain")
    p.add_argument("--rows", type=int, default=640)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    family = get_family(args.family)
    tok = build_tokenizer(family)
    vocab, digit = len(tok), tok.convert_tokens_to_ids("7")

    class Free:
        """Writes `digit` at every position, at no cost."""

        training = False

        def parameters(self):
            yield torch.zeros(1)

        def eval(self):
            return self

        def train(self, mode: bool = True):
            return self

        def __call__(self, input_ids, attention_mask, position_ids, past_key_values, use_cache=True):
            logits = torch.zeros(*input_ids.shape, vocab)
            logits[..., digit] = 5.0
            return type("Out", (), {"logits": logits})

    tasks = [Task.from_row(r) for r in family.generate("mini-host", args.rows, namespace="public", difficulty=1)]
    caps = dict(max_turns=6, max_tokens=10**6, max_len=10**6, max_new=args.steps)
    generate(Free(), tok, family, tasks[:8], **caps, generator=torch.Generator().manual_seed(0))  # imports, warm-up
    times = []
    for r in range(args.repeats):
        started = time.perf_counter()
        out = generate(Free(), tok, family, tasks, **caps, generator=torch.Generator().manual_seed(r))
        times.append(time.perf_counter() - started)
    steps = max(len(o.completion_ids) for o in out)
    best = min(times)
    print(json.dumps({"rows": args.rows, "decode_steps": steps, "seconds": [round(t, 3) for t in times],
                      "ms_per_step": round(1000 * best / steps, 2), "us_per_row_step": round(1e6 * best / steps / args.rows, 2),
                      "note": "host work only (a model that costs nothing), best of the repeats, one torch thread"}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
