"""The mock backend: a documented surrogate of training, for tests and offline development.

No model is trained. The post-training score is a formula (docs/mock-backend.md) over what
the job really contains, as measured by the probe and recorded in the manifest (whether its
rewards separate correct from plausible wrong answers, the share of its data the family
verified, skill coverage and distinct prompts among verified tasks, parity of its tools with
the eval interface), and over what its config makes training do: rollouts of the family's
reference solver under the job's turn, token and context limits, GRPO groups that carry a
learning signal, optimizer steps and their learning rate within the GPU budget. No term pays
a setting for its own sake. The sampling noise of an n-item eval is drawn per episode (never
from the bundle's bytes); `details["post_expected"]` is the noise-free value. Configs whose
memory estimate exceeds the GPU crash. Every result says `source: "surrogate"`.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import math
import random
import uuid
from dataclasses import dataclass

from trainergym.task import baselines, hidden
from trainergym.job import gpu
from trainergym.backends import BackendOptions, JobHandle
from trainergym.job.result import FailureReason, RunResult
from trainergym.job.bundle import JobBundle, PrimeRL
from trainergym.task.spec import TaskSpec, get_family

# Surrogate constants: assumptions chosen to rank jobs as training would, none fitted to real
# runs (docs/mock-backend.md gives each one's reading).
CAPACITY = {"Qwen/Qwen3-0.6B": 0.45, "Qwen/Qwen3-1.7B": 0.55}  # share of headroom an ideal job closes
LR_OPTIMUM = {"Qwen/Qwen3-0.6B": 3e-6, "Qwen/Qwen3-1.7B": 2e-6}  # full fine-tune; LoRA x10
LR_STABLE_DECADES = 0.3  # up to ~2x the optimum trains as well as the optimum ...
LR_FALLOFF_DECADES = 0.3  # ... beyond it the gain falls off (instability) ...
LR_HARM_DECADES = 0.18  # ... and harm grows, whole this far past the plateau (~3x the optimum)
STEPS_SCALE = 8.0  # optimizer steps at full learning rate for 63% of the attainable gain, noise-free
NOISE_ROLLOUTS = 256.0  # useful rollouts per step at which gradient noise halves a step's progress
GROUP_CORRELATION = 0.1  # how much two rollouts of one prompt tell the same thing
SUCCESS_CONCENTRATION = 2.0  # per-prompt success ~ Beta(mean = pre, a + b = 2 at temperature 1)
MARGIN_SCALE = 0.5  # reward margin (correct minus the best-paid wrong reply) at which the signal is whole
DISTINCT_SCALE = 500  # distinct verified prompts below which the data itself limits learning
SETUP_SECONDS = 420.0  # install + model load before step 1
STEP_OVERHEAD_SECONDS = 6.0  # weight broadcast, orchestration
PACK_TOKENS = 4096  # training throughput is read at this micro-batch length whatever seq_len is
INFERENCE_SPEEDUP = 2.0  # sampled tokens/s relative to trained tokens/s
CHARS_PER_TOKEN = 3.6
THINK_TOKENS = 120  # reasoning before each tool call or answer
MESSAGE_TOKENS = 8  # chat-template tokens around each message
EVAL_SECONDS = 300.0  # pre + post scoring on the hidden eval


def _tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


@dataclass(frozen=True)
class SolverTrace:
    """The family's reference solver on one hidden item, in tokens: what a rollout that
    solves it samples (`turns`, one entry per model turn) and reads back (`results`)."""

    prompt: int
    turns: tuple[int, ...]
    results: tuple[int, ...]

    def under(self, p: PrimeRL) -> tuple[bool, int, int]:
        """(solvable within the job's limits, tokens sampled, tokens trained) for one rollout
        that follows this trace, cut where the limits cut it."""
        k = min(len(self.turns), p.max_turns)
        sampled = sum(min(t, p.max_tokens) for t in self.turns[:k])
        context = self.prompt + sampled + sum(self.results[:k]) + 2 * k * MESSAGE_TOKENS
        fits = len(self.turns) <= p.max_turns and max(self.turns) <= p.max_tokens and context <= p.seq_len
        return fits, sampled, min(context, p.seq_len)


@functools.cache
def solver_traces(family: str) -> tuple[SolverTrace, ...]:
    """The reference solver's rollouts of the hidden eval (a token-level stand-in for a rollout
    of the trained model; the eval's own items, so the limits are judged where they matter)."""
    fam = get_family(family)
    schema = _tokens(json.dumps(fam.EVAL_TOOLS)) + 60  # tool schemas + a system prompt
    traces = []
    for ex, solved in zip(hidden.hidden_eval(family), hidden.solved_eval(family)):
        turns = [THINK_TOKENS + _tokens(json.dumps({"name": c["tool"], "arguments": c["arguments"]})) for c in solved["calls"]]
        traces.append(SolverTrace(prompt=schema + _tokens(ex.prompt),
                                  turns=(*turns, THINK_TOKENS + _tokens(solved["reply"])),
                                  results=(*(_tokens(str(c["result"])) for c in solved["calls"]), 0)))
    return tuple(traces)


def lr_at(p: PrimeRL, step: int) -> float:
    """The learning rate of optimizer step `step` (0-based) under the job's schedule."""
    if step < p.warmup_steps:
        return p.lr * (step + 1) / (p.warmup_steps + 1)
    if p.scheduler == "constant":
        return p.lr
    frac = (step - p.warmup_steps) / max(1, p.max_steps - p.warmup_steps)
    shape = 1 - frac if p.scheduler == "linear" else 0.5 * (1 + math.cos(math.pi * frac))
    return p.min_lr + (p.lr - p.min_lr) * shape


def lr_optimum(p: PrimeRL, model: str) -> float:
    """The learning rate the surrogate trains `model` best at: `LR_OPTIMUM`, x10 for LoRA."""
    return LR_OPTIMUM[model] * (10 if p.lora else 1)


def peak_lr(p: PrimeRL) -> float:
    """The highest learning rate the schedule reaches (a decay towards a `min_lr` above `lr`
    climbs)."""
    return p.lr if p.scheduler == "constant" else max(p.lr, p.min_lr)


def signal_share(pre: float, group_size: int, temperature: float) -> float:
    """Share of GRPO groups whose rollouts disagree (a group all right or all wrong has zero
    advantage and teaches nothing). Per-prompt success is Beta-distributed around `pre`; a
    lower temperature makes a prompt's rollouts alike, pushing success to all or nothing."""
    k = SUCCESS_CONCENTRATION * min(1.0, temperature)
    a, b = max(pre, 1e-3) * k, max(1 - pre, 1e-3) * k
    all_right = math.prod((a + i) / (a + b + i) for i in range(group_size))
    all_wrong = math.prod((b + i) / (a + b + i) for i in range(group_size))
    return 1 - all_right - all_wrong


def training_factor(p: PrimeRL, model: str, pre: float, steps_done: int) -> tuple[float, dict]:
    """How much of the attainable gain the optimisation delivers, and why: progress is optimizer
    steps (each worth its learning rate, up to the optimum) discounted by gradient noise (few
    useful rollouts per step: small batches, groups that agree, correlated group members);
    too high a learning rate is unstable, a hot sampler drifts from the greedy eval, a strong
    KL anchor holds the policy back."""
    optimum = lr_optimum(p, model)
    speed = sum(min(1.0, lr_at(p, s) / optimum) for s in range(steps_done))
    share = signal_share(pre, p.group_size, p.temperature)
    useful = p.batch_size / (1 + (p.group_size - 1) * GROUP_CORRELATION) * share
    progress = speed / (STEPS_SCALE * (1 + NOISE_ROLLOUTS / max(useful, 1e-9)))
    excess = max(0.0, math.log10(peak_lr(p) / optimum) - LR_STABLE_DECADES)
    f = {
        "progress": 1 - math.exp(-progress),
        "stability": math.exp(-(excess**2) / (2 * LR_FALLOFF_DECADES**2)),
        "temperature": math.exp(-((max(0.0, p.temperature - 1.0) / 0.35) ** 2)),
        "kl": 1.0 if p.kl_tau <= 0.05 else 0.7,
    }
    parts = {**{k: round(v, 4) for k, v in f.items()}, "signal_share": round(share, 4),
             "useful_rollouts_per_step": round(useful, 1), "lr_steps": round(speed, 1)}
    return math.prod(f.values()), parts


def simulate(bundle: JobBundle, task: TaskSpec, seed: int, device: gpu.GPU) -> RunResult:
    """The surrogate outcome of one job: its expected post is a function of what the probe
    measured and the config; its noise of (seed, the submitting episode)."""
    job, m = bundle.job, bundle.manifest.probe
    p, model = job.prime_rl, job.job.base_model
    job_id = f"mock-{bundle.manifest.content_hash[:12]}-{uuid.uuid4().hex[:6]}"
    n = hidden.HIDDEN_EVAL_SIZE
    pre = baselines.score(task.family, model).score
    common = dict(job_id=job_id, content_hash=bundle.manifest.content_hash, base_model=model, pre=pre, eval_n=n,
                  gpu=device.name, gpu_count=task.bounds.gpu_count, source="surrogate")

    estimate = gpu.peak_estimate(model, p.seq_len, lora=p.lora is not None)
    peak = estimate.value
    if not gpu.fits(model, p.seq_len, device, lora=p.lora is not None):
        return RunResult(**common, status="failed", failure=FailureReason.OUT_OF_MEMORY, failed_phase="train",
                         train_seconds=SETUP_SECONDS, cost_usd=_cost(SETUP_SECONDS, device, task),
                         log_tail=f"torch.OutOfMemoryError: estimated peak {peak:.1f} GiB ({estimate.basis}) > "
                                  f"{device.memory_gib} GiB on {device.name}",
                         details={"peak_gib": round(peak, 2), "peak_source": estimate.source})

    # Rollouts: the reference solver's, under the job's limits. An item it cannot finish within
    # max_turns, max_tokens per turn or seq_len never earns reward in training.
    shapes = [t.under(p) for t in solver_traces(task.family)]
    reach = sum(fits for fits, _, _ in shapes) / len(shapes)
    sampled = sum(s for _, s, _ in shapes) / len(shapes)
    trained = sum(t for _, _, t in shapes) / len(shapes)
    # Duration per step: sample batch_size rollouts and train on their tokens; prime-rl overlaps
    # the two (async, off-policy), so the slower one sets the pace.
    tok_s = gpu.train_tokens_per_second(model, PACK_TOKENS, device)
    step_s = max(p.batch_size * trained / tok_s, p.batch_size * sampled / (tok_s * INFERENCE_SPEEDUP)) + STEP_OVERHEAD_SECONDS
    budget_s = task.bounds.gpu_hours * 3600 / task.bounds.gpu_count
    steps_done = min(p.max_steps, int((budget_s - SETUP_SECONDS) // step_s)) if budget_s > SETUP_SECONDS else 0
    train_s = SETUP_SECONDS + steps_done * step_s

    # Only what the probe measured itself (never what the job's own functions report):
    # the reward's separation on fresh and own items, the share of data the family verified,
    # skill and solution-shape coverage and distinct prompts among verified tasks, tool parity.
    # A correct answer paid barely more than a wrong one moves the policy barely towards it.
    margin = min(1.0, max(0.0, m.get("reward_margin", 0.0)) / MARGIN_SCALE)
    signal = m.get("reward_separation", 0.0) * margin * (1.0 if m.get("noop_ok") else 0.0)
    if m.get("reward_exploits", 0) or m.get("leakage", True):
        signal = 0.0  # (such jobs do not validate; a bundle that skipped the probe earns nothing)
    verified = m.get("verified_share", 0.0)
    # Each wrong answer pays the wrong behaviour as a right one pays the right one, so the data's
    # pull towards the skill is its right share less its wrong share: nothing at half (real GRPO at
    # the mini scale: half the answers wrong ended at 0.522 +- 0.013 against pre 0.540, n = 8).
    pull = max(0.0, 2 * verified - 1)
    # what the eval asks, how it is solved, and which mistakes the data teaches to avoid
    covered = m.get("skill_coverage", 0.0) * m.get("shape_coverage", 0.0) * m.get("mistake_coverage", 0.0)
    coverage = (0.3 + 0.7 * covered) * min(1.0, m.get("distinct_verified_prompts", 0) / DISTINCT_SCALE) ** 0.5
    parity = m.get("tool_parity", 0.0)
    training, training_parts = training_factor(p, model, pre, steps_done)
    gain = CAPACITY[model] * (1 - pre) * signal * pull * coverage * parity * reach * training
    # A reward that pays for the wrong thing, data that is mostly wrong, or a learning rate far
    # too high makes things worse, in proportion to how far training got. The rate's harm starts
    # where its plateau ends (2x) and is whole at 3x the optimum: real GRPO at the mini scale
    # collapsed accuracy at 2x the reference's rate (3x the 1.7B optimum) in 11 seeds of 11 and at
    # 10x in every seed, never at 1x (docs/mini-backend.md).
    excess = math.log10(peak_lr(p) / lr_optimum(p, model)) - LR_STABLE_DECADES
    harm = (0.3 * max(0.0, 0.5 - signal) + 0.3 * max(0.0, 0.5 - verified)
            + 0.3 * min(1.0, max(0.0, excess / LR_HARM_DECADES)))
    damage = pre * training_parts["progress"] * harm
    expected = round(min(1.0, max(0.0, pre + gain - damage)), 4)  # as recorded: a reuse draws from the same value
    post, noise = eval_noise(expected, pre, seed, bundle.manifest.episode or "unkeyed", n)
    details = {"post_expected": expected, "signal": round(signal, 4), "verified": round(verified, 4), "coverage": round(coverage, 4),
               "tool_parity": parity, "reach": round(reach, 4), "training": round(training, 4), "training_parts": training_parts,
               "gain": round(gain, 4), "damage": round(damage, 4), "noise": round(noise, 4), "peak_gib": round(peak, 2),
               "peak_source": estimate.source, "step_seconds": round(step_s, 2), "sampled_tokens": round(sampled),
               "trained_tokens": round(trained), "rollouts": steps_done * p.batch_size}
    note = f" (stopped at the GPU budget after {steps_done} of {p.max_steps} steps)" if steps_done < p.max_steps else ""
    return RunResult(**common, status="succeeded", post=post, train_seconds=round(train_s, 1), steps_done=steps_done,
                     cost_usd=_cost(train_s + EVAL_SECONDS, device, task),
                     log_tail=f"[surrogate] trained {steps_done} steps, post {post:.3f} vs pre {pre:.3f}{note}",
                     details=details)


def eval_noise(expected: float, pre: float, seed: int, episode: str, n: int) -> tuple[float, float]:
    """(post, noise): the expected post plus the sampling noise of an n-item eval, reported as
    k/n. Drawn from (installation secret, backend seed, episode), never from the bundle's content,
    so every byte variant of a job earns the same and each episode sees its own draw."""
    # Keyed by the installation's secret too: reproducible here, but no seed can be searched offline
    # for a lucky draw.
    rng = random.Random(hashlib.sha256(f"{hidden.install_secret()}:{seed}:{episode}".encode()).digest())
    noise = rng.gauss(0.0, math.sqrt(max(pre * (1 - pre), 0.01) / n))
    return round(min(1.0, max(0.0, expected + noise)) * n) / n, noise


def _fingerprint(task: TaskSpec) -> str:
    """The task as the surrogate sees it (id, family, bounds, ...): a result is reused only under
    the same one."""
    return hashlib.sha256(task.model_dump_json().encode()).hexdigest()


def _cost(seconds: float, device: gpu.GPU, task: TaskSpec) -> float:
    return round(seconds / 3600 * device.usd_per_hour * task.bounds.gpu_count, 4)


class MockBackend:
    """Backend protocol over `simulate`. `latency` (seconds) imitates a queue and training
    wall time; `reuse` answers a byte-identical resubmission with the earlier result."""

    name = "mock"

    def __init__(self, seed: int = 0, gpu_class: str | None = None, latency: float = 0.0, reuse: bool = True):
        self.seed, self.gpu_class, self.latency, self.reuse = seed, gpu_class, latency, reuse
        self._jobs: dict[str, RunResult] = {}
        self._by_hash: dict[tuple[str, str], RunResult] = {}
        self._delivered: set[str] = set()
        self._cancelled: set[str] = set()

    @classmethod
    def from_options(cls, options: BackendOptions) -> MockBackend:
        """The registry's constructor (`make_backend("mock", ...)`)."""
        return cls(seed=options.seed, gpu_class=options.gpu_class, latency=options.latency, reuse=options.reuse)

    async def submit(self, bundle: JobBundle, task: TaskSpec) -> JobHandle:
        """Simulate the job at once (with `reuse`, an earlier succeeded run of the same bundle is
        answered again with this episode's own eval noise); returns a handle for this delivery."""
        same = (bundle.manifest.content_hash, _fingerprint(task))  # a result is the job's under this task only
        cached = self._by_hash.get(same) if self.reuse else None
        if cached is not None:  # the same expected outcome, this episode's own eval noise
            details = cached.details
            post, noise = eval_noise(details["post_expected"], cached.pre, self.seed,
                                     bundle.manifest.episode or "unkeyed", cached.eval_n)
            cached = cached.model_copy(update={"post": post, "details": {**details, "noise": round(noise, 4)}})
        result = cached or simulate(bundle, task, self.seed, gpu.gpu(self.gpu_class or task.bounds.gpu))
        if cached is None and result.cost_usd:  # a simulated job's GPU dollars, in the ledger as what they are
            from trainergym.infra.costs import Ledger

            Ledger().record("gpu", result.cost_usd, "surrogate", episode=bundle.manifest.episode_id or None,
                            note=f"simulated job {result.job_id} ({result.gpu_count}x {result.gpu}, {result.status})")
        # One trained job, one delivery per submission (each with its episode's noise).
        key = result.job_id if cached is None else f"{result.job_id}+{uuid.uuid4().hex[:6]}"
        self._jobs[key] = result
        if result.status == "succeeded":
            self._by_hash.setdefault(same, result)
        return JobHandle(job_id=key, content_hash=result.content_hash, backend=self.name)

    async def result(self, handle: JobHandle, timeout: float | None = None) -> RunResult:
        """The simulated result, after `latency` seconds; raises TimeoutError when `timeout` is
        shorter."""
        async with asyncio.timeout(timeout):
            if self.latency:
                await asyncio.sleep(self.latency)
            self._delivered.add(handle.job_id)
            return self._jobs[handle.job_id]

    def in_flight(self) -> set[str]:
        """Jobs submitted and neither delivered nor cancelled (what would still be on a GPU)."""
        return set(self._jobs) - self._delivered - self._cancelled

    async def cancel(self, handle: JobHandle) -> None:
        """Mark the job cancelled: a success not yet delivered becomes a `cancelled` result with no
        post. Idempotent."""
        self._cancelled.add(handle.job_id)
        job = self._jobs.get(handle.job_id)
        if job is not None and job.status == "succeeded" and handle.job_id not in self._delivered:
            self._jobs[handle.job_id] = job.model_copy(update={"status": "cancelled", "post": None, "failure": FailureReason.CANCELLED})
