"""The job the agent writes: `job.toml`, its bounded `[prime_rl]` surface, the rendered
prime-rl `rl.toml`, and the content-addressed job bundle.

The agent tunes a small surface with flat names; the library owns everything else
(inference, renderer, harness, runtime, transports, monitors, paths) and renders the complete
`rl.toml` (docs/design.md, "The job surface"), but for its `[deployment]`: the runner adds that on
the GPU host, from the GPUs it has, so a bundle (and its content hash) is the same wherever it runs.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tomllib
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

import tomli_w
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from trainergym.job.stack import PIN, VERIFIERS_RANGE, StackPin
from trainergym.task.spec import TaskSpec

JOB_FILE = "job.toml"
TASKSET_DIR = "taskset"
# What a bundle takes from the workspace: the agent's files, never the given templates.
BUNDLED = (JOB_FILE, TASKSET_DIR + "/")


class Lora(BaseModel):
    """LoRA adapter settings; without them the job fine-tunes every weight."""

    model_config = ConfigDict(extra="forbid")
    rank: int = Field(16, ge=4, le=64)
    alpha: float = Field(32.0, gt=0, le=256)
    dropout: float = Field(0.0, ge=0, le=0.5)


class PrimeRL(BaseModel):
    """The tunable surface. Field bounds are the surface's own; a task narrows them."""

    model_config = ConfigDict(extra="forbid")
    max_steps: int = Field(ge=1, le=1000, description="optimizer steps")
    seq_len: int = Field(4096, ge=256, le=32768, description="tokens per sample, prompt plus all turns")
    batch_size: int = Field(128, ge=2, le=1024, description="rollouts per step")
    group_size: int = Field(8, ge=2, le=64, description="rollouts per task (GRPO group)")
    temperature: float = Field(1.0, ge=0.1, le=2.0, description="sampling temperature")
    max_tokens: int = Field(512, ge=16, le=8192, description="max completion tokens per turn")
    max_turns: int = Field(8, ge=1, le=64, description="max model turns per rollout")
    lr: float = Field(3e-6, gt=0, le=1e-3)
    optimizer: Literal["adamw", "muon"] = "adamw"
    weight_decay: float = Field(0.01, ge=0, le=1.0)
    max_norm: float = Field(1.0, gt=0, le=100)
    scheduler: Literal["constant", "linear", "cosine"] = "constant"
    warmup_steps: int = Field(0, ge=0)
    min_lr: float = Field(0.0, ge=0)
    loss: Literal["default", "ipo"] = "default"
    kl_tau: float = Field(1e-3, ge=0, le=1.0)
    algorithm: Literal["grpo", "max_rl"] = "grpo"
    max_off_policy_steps: int = Field(1, ge=0, le=8)
    lora: Lora | None = None


class JobSection(BaseModel):
    """`[job]`: the base model to train and free-text notes."""

    model_config = ConfigDict(extra="forbid")
    base_model: str
    notes: str = ""


class JobConfig(BaseModel):
    """A parsed `job.toml`: `[job]` and `[prime_rl]`, unknown keys refused. With a schedule other
    than constant, `warmup_steps` must be below `max_steps` and `min_lr` may not exceed `lr`."""

    model_config = ConfigDict(extra="forbid")
    job: JobSection
    prime_rl: PrimeRL

    @model_validator(mode="after")
    def _schedule(self) -> JobConfig:
        # Only a decaying schedule reads warmup_steps and min_lr (a constant one renders neither),
        # so only there can they be wrong; prime-rl accepts both mistakes silently.
        p = self.prime_rl
        if p.scheduler == "constant":
            return self
        if p.warmup_steps >= p.max_steps:
            raise ValueError(f"prime_rl.warmup_steps ({p.warmup_steps}) must be below max_steps ({p.max_steps})")
        if p.min_lr > p.lr:
            raise ValueError(f"prime_rl.min_lr ({p.min_lr:g}) is above lr ({p.lr:g}): the {p.scheduler} schedule "
                             "goes from lr to min_lr, so it would raise the learning rate as training goes on; "
                             "choose min_lr <= lr")
        return self


class JobIssue(BaseModel):
    """One itemised problem, phrased for the agent."""

    check: str
    message: str
    hint: str = ""


def parse_job(text: str) -> tuple[JobConfig | None, list[JobIssue]]:
    """Parse `job.toml` text; (config, []) or (None, issues)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        return None, [JobIssue(check="job.toml", message=f"not valid TOML: {e}", hint="fix the syntax at the position given")]
    try:
        return JobConfig.model_validate(data), []
    except ValidationError as e:
        issues = []
        for err in e.errors():
            where = ".".join(str(p) for p in err["loc"]) or "job.toml"
            msg = err["msg"]
            if err["type"] == "extra_forbidden":
                msg = "unknown key (the library owns everything outside the documented surface)"
            issues.append(JobIssue(check="job.toml", message=f"{where}: {msg}", hint="see the [prime_rl] table in INSTRUCTIONS.md"))
        return None, issues


def check_bounds(job: JobConfig, task: TaskSpec) -> list[JobIssue]:
    """The task's hard bounds and the rules prime-rl does not enforce at config time."""
    b, p, issues = task.bounds, job.prime_rl, []

    def out(name: str, value: float, rng) -> None:
        if value not in rng:
            issues.append(JobIssue(check="bounds", message=f"prime_rl.{name} = {value:g} is outside the task's bound {rng}",
                                   hint=f"choose {name} within {rng}"))

    if job.job.base_model not in b.base_models:
        issues.append(JobIssue(check="bounds", message=f"job.base_model {job.job.base_model!r} is not allowed",
                               hint=f"choose one of {b.base_models}"))
    out("max_steps", p.max_steps, b.max_steps)
    out("seq_len", p.seq_len, b.seq_len)
    out("batch_size", p.batch_size, b.batch_size)
    out("group_size", p.group_size, b.group_size)
    out("max_tokens", p.max_tokens, b.max_tokens)
    out("max_turns", p.max_turns, b.max_turns)
    if p.batch_size % p.group_size:
        issues.append(JobIssue(check="bounds", message=f"batch_size {p.batch_size} is not divisible by group_size {p.group_size}",
                               hint="prime-rl needs whole groups per batch: pick batch_size as a multiple of group_size"))
    return issues


def package_name(content_hash: str) -> str:
    """The import name the job's taskset gets in its bundle (also its taskset id)."""
    return f"job_{content_hash[:12]}"


def render_rl_toml(job: JobConfig, taskset_id: str, task: TaskSpec) -> dict[str, Any]:
    """The prime-rl rl.toml (as a dict) for the pinned prime-rl commit: complete but for
    `[deployment]`, which the runner adds on the GPU host from the GPUs it has (at least one to
    train and one to serve; the task's `bounds.gpu_count` is what the job is budgeted for)."""
    p = job.prime_rl
    scheduler: dict[str, Any] = {"type": p.scheduler}
    if p.scheduler != "constant":
        scheduler |= {"warmup_steps": p.warmup_steps, "min_lr": p.min_lr}
    if p.scheduler == "linear":
        scheduler["decay_steps"] = max(1, p.max_steps - p.warmup_steps)
    trainer_model: dict[str, Any] = {}
    if p.lora is not None:
        trainer_model["lora"] = p.lora.model_dump()
    # verifiers checks its token caps between turns (the turn that crosses one still completes), so a
    # rollout is stopped while one more full turn still fits seq_len: past this it would outgrow vLLM's
    # max_model_len mid-turn. The probe's data check keeps its estimated longest rollout within
    # seq_len, below this cap at every turn but the last, so the cap only ends rollouts longer than
    # estimated (a prompt or tool results that take more tokens than the probe's 4 characters a token).
    max_total_tokens = max(1, p.seq_len - p.max_tokens)
    return {
        "max_steps": p.max_steps,
        "seq_len": p.seq_len,
        "model": {"name": job.job.base_model},
        "trainer": {
            "optim": {"type": p.optimizer, "lr": p.lr, "weight_decay": p.weight_decay, "max_norm": p.max_norm},
            "scheduler": scheduler,
            "loss": {"type": p.loss, "kl_tau": p.kl_tau},
            "model": trainer_model,
        },
        "orchestrator": {
            "batch_size": p.batch_size,
            "group_size": p.group_size,
            "max_off_policy_steps": p.max_off_policy_steps,
            "algo": {"type": p.algorithm},
            "renderer": {"name": "qwen3"},
            "train": {
                "sampling": {"temperature": p.temperature, "max_completion_tokens": p.max_tokens},
                "source": [{
                    "name": taskset_id,
                    # The env is pinned: with no id, verifiers runs an `Env` the job's package
                    # exports, whose run() and finalize() (cross-trace rewards) no probe sees.
                    "env": {
                        "id": "single_agent",
                        "taskset": {"id": taskset_id},
                        "agent": {"max_turns": p.max_turns, "max_total_tokens": max_total_tokens,
                                  "harness": {"id": "null"}, "runtime": {"type": "subprocess"}},
                    },
                }],
            },
        },
        "inference": {"vllm": {"max_model_len": p.seq_len, "tool_call_parser": "hermes", "enable_lora": p.lora is not None}},
        "weight_broadcast": {"type": "filesystem"},
        "ckpt": {},
        "monitors": {"file": {}},
        "output_dir": "outputs",
        "run": {"name": taskset_id},
    }


def content_hash(workspace_root: Path) -> str:
    """sha256 over the bundled files (paths and bytes), independent of timestamps."""
    h = hashlib.sha256()
    root = Path(workspace_root)
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink() or not path.is_file() or "__pycache__" in rel:
            continue
        if rel == JOB_FILE or rel.startswith(BUNDLED[1]):
            h.update(rel.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


class JobManifest(BaseModel):
    """What travels with a bundle: identity, provenance and the probe's measurements."""

    content_hash: str
    taskset_id: str
    task_id: str
    family: str
    base_model: str
    stack: StackPin = PIN
    created: str = Field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))
    probe: dict[str, Any] = {}
    episode: str = ""  # the submitting episode's key (its seed, else its id): the mock's noise seed
    episode_id: str = ""  # the submitting episode itself: what ledgers and `costs --episode` name


class JobBundle(BaseModel):
    """A job ready for a backend: a directory holding `workspace/` (the agent's files),
    `package/` (the taskset as an installable package), `rl.toml` and `manifest.json`.
    Nothing from the hidden eval is ever written into it."""

    root: Path
    job: JobConfig
    manifest: JobManifest

    @property
    def rl_toml(self) -> Path:
        """The rendered prime-rl config in the bundle."""
        return self.root / "rl.toml"

    @classmethod
    def open(cls, root: Path | str) -> JobBundle:
        """The bundle `build_bundle` wrote at `root`, read back (its manifest and job.toml).
        Raises ValueError if either is missing or malformed."""
        root = Path(root)
        try:
            manifest = JobManifest.model_validate_json((root / "manifest.json").read_text())
            job, issues = parse_job((root / "workspace" / JOB_FILE).read_text())
        except (OSError, ValidationError) as e:
            raise ValueError(f"{root} is not a job bundle: {e}") from None
        if job is None:
            raise ValueError(f"{root} is not a job bundle: {issues[0].message}")
        return cls(root=root, job=job, manifest=manifest)


def build_bundle(workspace_root: Path, dest: Path, job: JobConfig, task: TaskSpec) -> JobBundle:
    """Snapshot the agent's files and turn `taskset/` into an installable package."""
    digest = content_hash(workspace_root)
    name = package_name(digest)
    if dest.exists():
        shutil.rmtree(dest)
    ws = dest / "workspace"
    ws.mkdir(parents=True)
    shutil.copyfile(workspace_root / JOB_FILE, ws / JOB_FILE)
    src = workspace_root / TASKSET_DIR
    ignore = shutil.ignore_patterns("__pycache__")
    if src.is_dir():
        shutil.copytree(src, ws / TASKSET_DIR, symlinks=True, ignore=ignore)
        shutil.copytree(src, dest / "package" / name, symlinks=True, ignore=ignore)
    (dest / "package").mkdir(parents=True, exist_ok=True)
    (dest / "package" / "pyproject.toml").write_text(
        tomli_w.dumps({
            "project": {"name": name.replace("_", "-"), "version": "0.0.0", "requires-python": ">=3.11",
                        "dependencies": [f"verifiers{VERIFIERS_RANGE}", task.eval_toolset.split(".")[0].replace("_", "-")]},
            "build-system": {"requires": ["hatchling"], "build-backend": "hatchling.build"},
            "tool": {"hatch": {"build": {"targets": {"wheel": {"packages": [name]}}}}},
        })
    )
    (dest / "rl.toml").write_text(tomli_w.dumps(render_rl_toml(job, name, task)))
    manifest = JobManifest(content_hash=digest, taskset_id=name, task_id=task.id, family=task.family,
                           base_model=job.job.base_model)
    bundle = JobBundle(root=dest, job=job, manifest=manifest)
    write_manifest(bundle)
    return bundle


def write_manifest(bundle: JobBundle) -> None:
    """Write the bundle's manifest to its `manifest.json`, replacing what was there."""
    (bundle.root / "manifest.json").write_text(json.dumps(bundle.manifest.model_dump(mode="json"), indent=2))
