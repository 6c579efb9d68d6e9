"""A job trained with several seeds side by side, scored before and after: the mini backend's unit of work.

Why several seeds: at this scale one run ranks nothing (the prototype's reference job ended
anywhere from 0.42 to 0.95 by seed alone, ../shared/reference/mini-rl-h200.md), so every job trains
`seeds` copies of the base and reports the post score's mean, standard error and n over them; the
pre score is the base's, once. Both are the family's own `check` of greedy rollouts over the eval
items the caller passes (the caller holds the hidden eval; this module never reads it).

The seeds run side by side in one process, a trainer each, their rollouts decoded as one batch
(`grpo.train_seeds`, `stack.py`): on a GPU that is how one device trains many tiny models at once.
`parallel` splits them over that many spawned processes instead (each its own CUDA context).
What goes to a worker must pickle: the family travels by module name, the reward must be a
module-level callable (or a `functools.partial` of one).
"""

from __future__ import annotations

import importlib
import math
import time
from dataclasses import asdict, dataclass, field

from trainergym.mini.base import Base
from trainergym.mini.grpo import Reward, train_seeds
from trainergym.mini.knobs import map_knobs, reference_table
from trainergym.mini.rollout import Task, accuracy
from trainergym.mini.scale import get_scale


@dataclass
class SeedResult:
    seed: int
    post: float
    rewards: list[float]  # mean train reward per step
    seconds: float
    rollouts: int
    generation_seconds: float


@dataclass
class MiniResult:
    """What a mini job measured: the base's pre score, every seed's curve and post score, and their summary."""

    family: str
    scale: str
    base_key: str
    pre: float
    seeds: list[SeedResult]
    knobs: dict
    unhonoured: list[str]
    n_eval: int
    seconds: float
    device: str
    post_mean: float = 0.0
    post_se: float = 0.0
    n: int = 0
    extra: dict = field(default_factory=dict)

    def __post_init__(self):
        posts = [s.post for s in self.seeds]
        self.n = len(posts)
        self.post_mean, self.post_se = mean_se(posts)

    def as_dict(self) -> dict:
        return asdict(self)


def mean_se(values: list[float]) -> tuple[float, float]:
    """Mean and standard error of the mean (0 for fewer than two values)."""
    if not values:
        return 0.0, 0.0
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, 0.0
    var = sum((v - mean) ** 2 for v in values) / (len(values) - 1)
    return mean, math.sqrt(var / len(values))


EVAL_MAX_TURNS = 16  # the hidden-eval scorer's (trainergym.host.scorer.score)


def eval_caps(base: Base) -> dict:
    """How pre and post scores play an item: the scorer's turn limit and the base's caps, whatever
    the job asked for (a job's knobs shape its training, never its eval)."""
    return dict(max_turns=EVAL_MAX_TURNS, **base.caps())


def training_caps(base: Base, family, tokenizer, tasks: list[Task], sample: int = 256) -> dict:
    """The caps of training rollouts, `max_new` (tokens after the prompt) and `max_tokens` (a
    turn): the base's, or more where the job's own tasks need it (twice the longest solver
    completion and turn of a sample of them), within the scale's bounds. Why: a job's curriculum may
    run longer than the base's warm-up (the calc_chain reference job's 6-step chains of 4-digit
    operands), and a rollout cut short earns nothing whatever the job's quality."""
    from trainergym.mini.base import completion_len, trace_ids

    scale, caps = get_scale(base.scale), base.caps()
    new, turn = caps["max_new"], caps["max_tokens"]
    for t in tasks[:: max(1, len(tasks) // sample)]:
        row = {"prompt": t.prompt, "system_prompt": t.system_prompt, "answer": t.answer, "world": t.world or {}}
        if traced := trace_ids(tokenizer, family, row):
            new = max(new, 2 * completion_len(traced[1]))
            run = 0
            for m in traced[1]:
                run = run + 1 if m else 0
                turn = max(turn, 2 * run)
    return {"max_new": min(scale.max_len, new), "max_tokens": min(scale.max_tokens_cap, turn)}


def check_reward(family_module: str, tasks: list[Task], completions: list[list[dict]]) -> list[float]:
    """1.0 where the family's own check accepts a completion's last assistant reply for its task's
    answer, else 0.0: the reward tests and bench/mini.py train with (the backend passes the job's
    reward functions instead). Module-level, so `functools.partial(check_reward, name)` pickles."""
    family = importlib.import_module(family_module)
    out = []
    for task, messages in zip(tasks, completions, strict=True):
        replies = [m.get("content") or "" for m in messages if m.get("role") == "assistant"]
        try:
            out.append(float(bool(family.check(replies[-1] if replies else "", task.answer))))
        except Exception:  # noqa: BLE001 - a reply the checker cannot read is wrong
            out.append(0.0)
    return out


def _seed_group(family_module: str, base: Base, max_new: int, knobs, tasks, reward, eval_rows, seeds: list[int],
                device: str, threads: int | None, verbose: bool) -> list[SeedResult]:
    """Train `seeds` from the base side by side (`grpo.train_seeds`) and score each: runs in a worker
    process, or inline. On a CPU it runs one torch thread unless told otherwise: a model this small
    gains nothing from intra-op threads, and on shared cores two threads made it 5-10x slower."""
    import torch

    from trainergym.mini.stack import accuracies

    before = torch.get_num_threads()
    torch.set_num_threads(threads or (1 if device == "cpu" else before))
    try:
        family = importlib.import_module(family_module)
        models, tokenizer = [], None
        for _ in seeds:
            model, tokenizer = base.load(device)
            models.append(model)
        runs = train_seeds(models, tokenizer, family, tasks, reward, knobs, list(seeds), device=device,
                           max_len=base.caps()["max_len"], max_new=max_new, log=print if verbose else None)
        posts = accuracies([r.model for r in runs], tokenizer, family, eval_rows, **eval_caps(base))
    finally:
        torch.set_num_threads(before)
    return [SeedResult(seed=r.seed, post=post, rewards=r.rewards, seconds=round(r.seconds, 2), rollouts=r.rollouts,
                       generation_seconds=round(r.generation_seconds, 2)) for r, post in zip(runs, posts, strict=True)]


def train(job, base: Base, family, tasks: list[dict] | list[Task], reward: Reward, eval_items: list[dict],
          seeds: list[int] = (0,), device: str = "cpu", reference=None, parallel: int | None = None,
          threads: int | None = None, verbose: bool = False) -> MiniResult:
    """Train `job` (its `[prime_rl]` table, a job.toml path or a parsed job) from `base` on `tasks`
    (the job's items: dicts with prompt, answer, world) with `reward`, once per seed; score the base
    and every trained model on `eval_items` (greedy, the family's check). Learning rates count
    relative to `reference` (default: the family's reference job)."""
    started = time.time()
    scale = get_scale(base.scale)
    tasks = [t if isinstance(t, Task) else Task.from_row(t) for t in tasks]
    model, tokenizer = base.load(device)
    pre = accuracy(model, tokenizer, family, eval_items, **eval_caps(base))
    caps = training_caps(base, family, tokenizer, tasks)
    max_new = caps["max_new"]
    del model
    knobs = map_knobs(job, reference if reference is not None else reference_table(family), scale,
                      max_tokens_cap=caps["max_tokens"])
    # The seeds train side by side in one process (`grpo.train_seeds`), or split over `parallel`
    # processes (spawned: each its own CUDA context; the reward must pickle).
    workers = max(1, min(parallel or 1, len(seeds)))
    groups = [list(seeds[i::workers]) for i in range(workers)]
    args = [(family.__name__, base, max_new, knobs, tasks, reward, eval_items, g, device, threads, verbose)
            for g in groups]
    if workers == 1:
        results = _seed_group(*args[0])
    else:
        import multiprocessing as mp

        with mp.get_context("spawn").Pool(workers) as pool:
            results = sorted((r for rs in pool.starmap(_seed_group, args) for r in rs),
                             key=lambda r: list(seeds).index(r.seed))
    return MiniResult(family=family.ID, scale=scale.name, base_key=base.key, pre=pre, seeds=results,
                      knobs={k: v for k, v in asdict(knobs).items() if k != "unhonoured"},
                      unhonoured=list(knobs.unhonoured), n_eval=len(eval_items), seconds=round(time.time() - started, 1),
                      device=device, extra={"train_caps": caps, "eval_caps": eval_caps(base)})
