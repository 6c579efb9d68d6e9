"""The mock backend: a documented surrogate of training, for tests and offline development.

No model is trained. The post-training score is a formula (docs/mock-backend.md) over what
the job really contains, as measured by the probe and recorded in the manifest: the chosen
base model's baseline, whether the job's rewards separate correct from plausible wrong
answers on items the agent never saw, how well its data covers the family's skills (weighted
by the hidden eval), parity of its tools with the eval interface, hyperparameter sanity and
the training budget; plus the sampling noise of an n-item eval, drawn per episode (never from
the bundle's bytes); `details["post_expected"]` is the noise-free value. Configs whose
memory estimate exceeds the GPU crash. Every result says `source: "surrogate"`.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import random
import uuid

from trainergym import baselines, gpu, hidden
from trainergym.backends import JobHandle, JobResult
from trainergym.job import JobBundle, JobConfig
from trainergym.tasks import TaskSpec, get_family

# Surrogate constants (assumptions, documented in docs/mock-backend.md).
CAPACITY = {"Qwen/Qwen3-0.6B": 0.45, "Qwen/Qwen3-1.7B": 0.55}  # share of headroom an ideal job closes
LR_OPTIMUM = {"Qwen/Qwen3-0.6B": 3e-6, "Qwen/Qwen3-1.7B": 2e-6}  # full fine-tune; LoRA x10
LR_WIDTH_DECADES = 0.5
ROLLOUTS_SCALE = 4000.0
DISTINCT_SCALE = 500  # distinct training prompts below which the data itself limits learning  # rollouts for 63% of the attainable gain
SETUP_SECONDS = 420.0  # install + model load before step 1
STEP_OVERHEAD_SECONDS = 6.0  # weight broadcast, orchestration
INFERENCE_SPEEDUP = 8.0  # rollout tokens/s relative to training tokens/s
PROMPT_TOKENS = 350
TOKENS_PER_TURN = 100
EVAL_SECONDS = 300.0  # pre + post scoring on the hidden eval


def hyper_factor(job: JobConfig) -> tuple[float, dict]:
    """How much of the attainable gain these hyperparameters let through, per factor."""
    p, model = job.prime_rl, job.job.base_model
    optimum = LR_OPTIMUM[model] * (10 if p.lora else 1)
    decades = math.log10(p.lr / optimum)
    f = {
        "lr": math.exp(-(decades**2) / (2 * LR_WIDTH_DECADES**2)),
        "group_size": min(1.0, p.group_size / 8) ** 0.5,
        "batch_size": min(1.0, p.batch_size / 64) ** 0.3,
        "temperature": math.exp(-(((p.temperature - 1.0) / 0.35) ** 2)),
        "max_tokens": min(1.0, p.max_tokens / 128) ** 0.5,
        "kl_tau": 1.0 if p.kl_tau <= 0.05 else 0.7,
    }
    return math.prod(f.values()), {k: round(v, 4) for k, v in f.items()}


def turns_needed(task: TaskSpec) -> list[int]:
    """Model turns the reference solver needs on each hidden item (tool calls + the answer)."""
    fam = get_family(task.family)
    return [len(fam.solve(ex.model_dump())["calls"]) + 1 for ex in hidden.hidden_eval(task.family)]


def simulate(bundle: JobBundle, task: TaskSpec, seed: int, device: gpu.GPU) -> JobResult:
    """The surrogate outcome of one job: its expected post is a function of what the probe
    measured and the config; its noise of (seed, the submitting episode)."""
    job, m = bundle.job, bundle.manifest.probe
    p, model = job.prime_rl, job.job.base_model
    job_id = f"mock-{bundle.manifest.content_hash[:12]}-{uuid.uuid4().hex[:6]}"
    n = hidden.HIDDEN_EVAL_SIZE
    pre = baselines.score(task.family, model).score
    common = dict(job_id=job_id, content_hash=bundle.manifest.content_hash, base_model=model, pre=pre, eval_n=n,
                  gpu=device.name, gpu_count=task.bounds.gpu_count, source="surrogate")

    peak = gpu.peak_memory_gib(model, p.seq_len, lora=p.lora is not None)
    if not gpu.fits(model, p.seq_len, device, lora=p.lora is not None):
        return JobResult(**common, status="failed", failure_reason="out of memory",
                         train_seconds=SETUP_SECONDS, cost_usd=_cost(SETUP_SECONDS, device, task),
                         log_tail=f"torch.OutOfMemoryError: estimated peak {peak:.1f} GiB > {device.memory_gib} GiB on {device.name}",
                         details={"peak_gib": round(peak, 2)})

    # Duration: per step, generate batch_size rollouts then train on them.
    needed = turns_needed(task)
    turns = sum(1 for t in needed if t <= p.max_turns) / len(needed)  # items solvable within max_turns
    mean_turns = min(p.max_turns, sum(needed) / len(needed))
    sample_tokens = min(p.seq_len, PROMPT_TOKENS + mean_turns * min(p.max_tokens, TOKENS_PER_TURN))
    tok_s = gpu.train_tokens_per_second(model, p.seq_len, device)
    # prime-rl overlaps inference and training (async, off-policy), so the slower one sets the pace.
    step_tokens = p.batch_size * sample_tokens
    step_s = max(step_tokens / tok_s, step_tokens / (tok_s * INFERENCE_SPEEDUP)) + STEP_OVERHEAD_SECONDS
    budget_s = task.bounds.gpu_hours * 3600 / task.bounds.gpu_count
    steps_done = min(p.max_steps, int((budget_s - SETUP_SECONDS) // step_s)) if budget_s > SETUP_SECONDS else 0
    train_s = SETUP_SECONDS + steps_done * step_s

    # Only what the probe measured itself (never what the job's own functions report):
    # the reward's separation on fresh and own items, the share of data the family verified,
    # skill coverage and distinct prompts among verified tasks, tool parity by behaviour.
    signal = m.get("reward_separation", 0.0) * (1.0 if m.get("noop_ok") else 0.0)
    if m.get("reward_exploits", 0) or m.get("leakage", True):
        signal = 0.0  # (such jobs do not validate; a bundle that skipped the probe earns nothing)
    verified = m.get("verified_share", 0.0)
    coverage = (0.3 + 0.7 * m.get("skill_coverage", 0.0)) * min(1.0, m.get("distinct_verified_prompts", 0) / DISTINCT_SCALE) ** 0.5
    parity = m.get("tool_parity", 0.0)
    hyper, hyper_parts = hyper_factor(job)
    rollouts = steps_done * p.batch_size
    budget = 1 - math.exp(-rollouts / ROLLOUTS_SCALE)
    gain = CAPACITY[model] * (1 - pre) * signal * verified * coverage * parity * hyper * turns * budget
    # A reward that pays for the wrong thing, data that is mostly wrong, or a learning rate far
    # too high makes things worse.
    damage = pre * budget * (0.3 * max(0.0, 0.5 - signal) + 0.3 * max(0.0, 0.5 - verified) + 0.3 * max(0.0, min(1.0, math.log10(p.lr / LR_OPTIMUM[model]) - 1)))
    expected = round(min(1.0, max(0.0, pre + gain - damage)), 4)  # as recorded: a reuse draws from the same value
    post, noise = eval_noise(expected, pre, seed, bundle.manifest.episode or "unkeyed", n)
    details = {"post_expected": expected, "signal": round(signal, 4), "verified": round(verified, 4), "coverage": round(coverage, 4), "tool_parity": parity, "hyper": round(hyper, 4),
               "hyper_parts": hyper_parts, "turns": round(turns, 4), "budget": round(budget, 4), "gain": round(gain, 4),
               "damage": round(damage, 4), "noise": round(noise, 4), "peak_gib": round(peak, 2),
               "step_seconds": round(step_s, 2), "rollouts": rollouts}
    note = f" (stopped at the GPU budget after {steps_done} of {p.max_steps} steps)" if steps_done < p.max_steps else ""
    return JobResult(**common, status="succeeded", post=post, train_seconds=round(train_s, 1), steps_done=steps_done,
                     cost_usd=_cost(train_s + EVAL_SECONDS, device, task),
                     log_tail=f"[surrogate] trained {steps_done} steps, post {post:.3f} vs pre {pre:.3f}{note}",
                     details=details)


def eval_noise(expected: float, pre: float, seed: int, episode: str, n: int) -> tuple[float, float]:
    """(post, noise): the expected post plus the sampling noise of an n-item eval, reported as
    k/n. Drawn from (backend seed, episode), never from the bundle's content, so every byte
    variant of a job earns the same and each episode sees its own draw."""
    rng = random.Random(hashlib.sha256(f"{seed}:{episode}".encode()).digest())
    noise = rng.gauss(0.0, math.sqrt(max(pre * (1 - pre), 0.01) / n))
    return round(min(1.0, max(0.0, expected + noise)) * n) / n, noise


def _cost(seconds: float, device: gpu.GPU, task: TaskSpec) -> float:
    return round(seconds / 3600 * device.usd_per_hour * task.bounds.gpu_count, 4)


class MockBackend:
    """Backend protocol over `simulate`. `latency` (seconds) imitates a queue and training
    wall time; `reuse` answers a byte-identical resubmission with the earlier result."""

    name = "mock"

    def __init__(self, seed: int = 0, gpu_class: str | None = None, latency: float = 0.0, reuse: bool = True):
        self.seed, self.gpu_class, self.latency, self.reuse = seed, gpu_class, latency, reuse
        self._jobs: dict[str, JobResult] = {}
        self._by_hash: dict[str, JobResult] = {}
        self._delivered: set[str] = set()
        self._cancelled: set[str] = set()

    async def submit(self, bundle: JobBundle, task: TaskSpec) -> JobHandle:
        cached = self._by_hash.get(bundle.manifest.content_hash) if self.reuse else None
        if cached is not None:  # the same expected outcome, this episode's own eval noise
            details = cached.details
            post, noise = eval_noise(details["post_expected"], cached.pre, self.seed,
                                     bundle.manifest.episode or "unkeyed", cached.eval_n)
            cached = cached.model_copy(update={"post": post, "details": {**details, "noise": round(noise, 4)}})
        result = cached or simulate(bundle, task, self.seed, gpu.gpu(self.gpu_class or task.bounds.gpu))
        # One trained job, one delivery per submission (each with its episode's noise).
        key = result.job_id if cached is None else f"{result.job_id}+{uuid.uuid4().hex[:6]}"
        self._jobs[key] = result
        if result.status == "succeeded":
            self._by_hash.setdefault(result.content_hash, result)
        return JobHandle(job_id=key, content_hash=result.content_hash, backend=self.name)

    async def result(self, handle: JobHandle, timeout: float | None = None) -> JobResult:
        async with asyncio.timeout(timeout):
            if self.latency:
                await asyncio.sleep(self.latency)
            self._delivered.add(handle.job_id)
            return self._jobs[handle.job_id]

    def in_flight(self) -> set[str]:
        """Jobs submitted and neither delivered nor cancelled (what would still be on a GPU)."""
        return set(self._jobs) - self._delivered - self._cancelled

    async def cancel(self, handle: JobHandle) -> None:
        self._cancelled.add(handle.job_id)
        job = self._jobs.get(handle.job_id)
        if job is not None and job.status == "succeeded" and handle.job_id not in self._delivered:
            self._jobs[handle.job_id] = job.model_copy(update={"status": "cancelled", "post": None, "failure_reason": "cancelled"})
