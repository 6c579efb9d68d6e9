"""The validation probe run by `submit_job` (and by `trainergym probe DIR`).

It catches on a CPU every defect of a job that can be caught there, and explains each as a
named `ProbeItem` (pass / fail / warn / skip, message, hint) the agent can act on.

**The probe judges; the job only answers.** Agent code runs only in the confined child
(`trainergym.probe.child`, inside `trainergym.probe.sandbox`), which hands back data: the job's tasks
(prompt, system prompt, answer, world), one reward per rollout it is given, and its tools'
answers to given calls. Every judgment, and every number in the manifest that the surrogate
pays for, is computed here, in a process that never imported agent code:

- shape: the package imports in the sandbox and exports one Taskset, imports nothing of the
  family but its eval toolset (read statically here, enforced by the sandbox's masks);
- data: enough tasks, every task read (up to the task's item cap; a taskset that does not end
  there is refused unless it declares itself infinite, then it is sampled), prompts and answers
  present and sane, the longest rollout fits `seq_len`; a sample drawn across the whole taskset
  is *verified by the family's own code* (its solver on the item's prompt and world, its checker
  on the job's answer): the verified and readable shares, the skills of verified items;
- tools: the job's tools, given the family solver's calls on fresh items, answer what the eval
  tools answer;
- rewards (`trainergym.probe.adversary`): on fresh items and on the job's own verified items, mixed and
  unlabelled, the correct rollout is paid more than every wrong or adversarial reply, and no
  adversarial reply more than the plain wrong answer it dresses up; rewards never raise and stay
  in [0, 1];
- leakage (`trainergym.probe.leakage`): no task matches a hidden-eval item by text, by the family
  solver's trace, or by content (numbers and entities), reported without saying which;
- config: bounds, memory fit on the task's GPU class, the rendered rl.toml complete, and
  prime-rl's own config classes accept it (in the child: they import the job's taskset).

Agent code runs under the stack the job trains on (`trainergym.job.stack_env`): prime-rl's
vendored verifiers and its config classes, where that environment is built; else the library's
verifiers, and the report's `stack` line says so.

A reward or a taskset that behaves differently under the probe than in training cannot be seen
by any probe (docs/mock-backend.md); the real backends train the job as written and score the
result with the family's scorer, so such a job gains nothing there.
"""

from __future__ import annotations

import ast
import atexit
import contextlib
import copy
import functools
import hashlib
import json
import os
import queue
import random
import re
import secrets
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from trainergym.probe import adversary, giveaway, leakage
from trainergym.job import gpu, stack_env
from trainergym.task import hidden
from trainergym.job.bundle import (JOB_FILE, TASKSET_DIR, JobBundle, JobConfig, build_bundle, check_bounds, parse_job,
                            render_rl_toml, write_manifest)
from trainergym.probe.sandbox import (CAP_FACTOR, WALL_FACTOR, Limits, Sandbox, SandboxUnavailable, WarmWorker, WorkerError,
                                      public_packages, requested_mode, run_once)
from trainergym.task.spec import TaskSpec, get_family

MIN_TASKS = 32
CALL_SECONDS = 30.0  # wall-clock seconds one reward or tool call may take (they take milliseconds)
VERIFY_SAMPLE = 500  # tasks verified by the family's code, drawn across the whole taskset
VERIFIED_PASS, VERIFIED_WARN = 0.5, 0.95
SEPARATION_PASS = 0.9  # share of items whose correct rollout is paid more than every other reply
PROBE_ITEMS, JOB_ITEMS = 8, 8  # items of the reward bank, fresh and the job's own
REWARD_RANGE = (0.0, 1.0)
CHARS_PER_TOKEN = 4  # rough for Qwen tokenizers on English (digits are a token each: numbers count low)
TOOL_MESSAGE_TOKENS = 8  # the chat template around one tool result (qwen3: a user turn, <tool_response> tags)
MAX_PROMPT_CHARS = 16_000
MAX_ANSWER_CHARS = 1000
DEV_SHARE_WARN = 0.2
DISTINCT_WARN = 0.5
SHAPE_WARN = 0.8


class ProbeItem(BaseModel):
    """One check's verdict, phrased for the agent: its name, pass / fail / warn / skip, a message
    and a hint."""

    check: str
    status: Literal["pass", "fail", "warn", "skip"]
    message: str
    hint: str = ""


class ProbeReport(BaseModel):
    """The probe's verdict on one job: its items in order, what confined agent code (`confinement`),
    how long it took, and the measurements the manifest records for the surrogate."""

    items: list[ProbeItem] = []
    confinement: str = ""
    seconds: float = 0.0
    measurements: dict = {}
    # Why the probe could not judge the job, when the host failed it and not the job (the job
    # slept or was starved past the wall-clock limit with CPU time to spare; the sandbox would
    # not start or went silent): such a report fails, and costs the agent no submit attempt.
    infra: str = ""

    @property
    def ok(self) -> bool:
        """True when there is at least one item and none failed."""
        return bool(self.items) and all(i.status != "fail" for i in self.items)

    def add(self, check: str, status: str, message: str, hint: str = "") -> None:
        """Append one item."""
        self.items.append(ProbeItem(check=check, status=status, message=message, hint=hint))

    def render(self) -> str:
        """The report as the agent reads it: VALID or INVALID, then one line per item (with its
        hint, unless it passed)."""
        head = ("VALID: the job passed validation." if self.ok else
                "NOT JUDGED: the probe could not finish on this host; submit the job again." if self.infra else
                "INVALID: fix the failed checks and submit again.")
        rows = [head]
        for i in self.items:
            rows.append(f"[{i.status.upper()}] {i.check}: {i.message}" + (f"\n       hint: {i.hint}" if i.hint and i.status != "pass" else ""))
        return "\n".join(rows)


# --- the confined workers --------------------------------------------------------------------
# Concurrent episodes probe in parallel, one warm worker each, up to one per core (or
# TRAINERGYM_PROBE_WORKERS). A worker is started in the background when a probe finds none idle
# (one at a time; the probe takes the first worker to be free), or by `prestart`, and stopped at
# exit.
POOL_SIZE = int(os.environ.get("TRAINERGYM_PROBE_WORKERS") or min(4, os.cpu_count() or 1))
_idle: queue.LifoQueue[WarmWorker] = queue.LifoQueue()
_started = 0  # workers made (idle, busy or starting)
_starting = 0  # of which starting in the background
_pool_lock = threading.Lock()


# --- what the child may say -------------------------------------------------------------------
class _Answer(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TaskRow(_Answer):
    """One job task as the child reports it (prompt, system prompt, answer, world), with capped
    lengths."""

    prompt: str = Field(max_length=MAX_PROMPT_CHARS + 1)
    system_prompt: str = Field(max_length=MAX_PROMPT_CHARS + 1)
    answer: str = Field(max_length=2001)
    world: dict | None = None
    world_chars: int = Field(ge=0)


class ToolName(_Answer):
    """One of the job's tools as the child reports it: its name and parameter names."""

    name: str = Field(max_length=200)
    params: list[str] = Field(max_length=50)


class Loaded(_Answer):
    """The child's answer to `load`: the job's tasks (up to the cap), whether it yielded more or
    declares itself infinite, which fields its TaskData has, and its tools (or why they failed to
    build)."""

    stage: Literal["loaded"]
    verifiers_version: str | None
    declared_infinite: bool
    more: bool
    tasks: list[TaskRow] = Field(min_length=1, max_length=100_000)
    answer_field: bool
    world_field: bool
    tools: list[ToolName] = Field([], max_length=200)
    tools_error: str | None = Field(None, max_length=4000)


class Scored(_Answer):
    """The child's answer to `score`: one reward (or error) per rollout, in the order sent."""

    rewards: list[float | None]
    errors: list[str | None]
    rollout_only: list[Annotated[str, Field(max_length=200)]] = Field([], max_length=50)


class ToolAnswers(_Answer):
    """The child's answer to `tools`: per item, each call's result, in the order sent."""

    results: list[list[str]]


class ConfigAnswer(_Answer):
    """The child's answer to `config`: whether prime-rl's config classes were there to ask, and
    their refusal, if any. Agent code could forge an acceptance; that only sends a job prime-rl
    refuses to a trainer that then fails it."""

    checked: bool
    error: str | None = Field(None, max_length=2000)


# --- what the library keeps between probes ---------------------------------------------------
# A job's data, read: the load answer parsed, and what the family's code and the leakage check
# made of it. It is a function of the answer's exact text, the family and task, and the secrets
# (the verified sample is keyed by the installation secret, the leakage check by the hidden
# eval), and is kept under all of them: a job can only ever find the reading of its own answer,
# as the library made it. Bounded by the answers' size (their reading holds some 8x that).
READINGS_CHARS = 12 << 20
READINGS_MAX = 8


@dataclass(frozen=True)
class _Reading:
    first: dict
    loaded: Loaded
    rows: list[dict]
    solved: list[dict | None]
    canon: list[str | None]
    sampled: int
    readable: int
    verified: tuple[int, ...]
    why: dict[int, str]
    task_skills: tuple[set[str], ...]
    task_shapes: tuple[set[str], ...]
    task_mistakes: tuple[set[str], ...]
    leaks: tuple[int, ...]
    size: int


_READINGS: OrderedDict[tuple, _Reading] = OrderedDict()
_readings_lock = threading.Lock()


def _reading_key(task: TaskSpec, text: str) -> tuple:
    """What a reading of the load answer `text` depends on: the family and the whole task, both
    secrets, the answer's exact text."""
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    secret = hashlib.sha256(f"{hidden.secret_seed()}\0{hidden.install_secret()}".encode()).hexdigest()
    return task.family, hashlib.sha256(task.model_dump_json().encode()).hexdigest(), secret, digest


@functools.cache
def _probe_bank(family: str, key: str) -> tuple[tuple[dict, dict, tuple[str, ...]], ...]:
    """The probe items of `family` under the probe key `key` (`hidden.probe_items`): each row, the
    family solver's rollout and up to three of its plain wrong answers. Trusted code on trusted
    items, the same for every probe of this installation: made once."""
    fam = get_family(family)
    out = []
    for ex in hidden.probe_items(family, PROBE_ITEMS):
        row = ex.model_dump()
        out.append((row, fam.solve(row), tuple(d["reply"] for d in fam.distractors(row))[:3]))
    return tuple(out)


_prepared: set[tuple[str, str]] = set()
_prepared_lock = threading.Lock()


def _prepare(family: str) -> None:
    """Build, in the background and once per family and secrets, what every probe reads of the
    hidden eval (the leakage index, the solver's rollouts, their shapes, the classic mistakes)
    and the probe items: a first probe starts its sandbox meanwhile."""
    key = (family, hashlib.sha256(f"{hidden.secret_seed()}\0{hidden.install_secret()}".encode()).hexdigest())
    with _prepared_lock:
        if key in _prepared:
            return
        _prepared.add(key)
    index = leakage.prepare(family)

    def build() -> None:
        index.join()  # one at a time: they share the hidden eval's items
        with contextlib.suppress(Exception):  # a probe that needs one meets the same failure and reports it
            seed = hidden.secret_seed()
            _eval_shapes(family, seed)
            _eval_mistakes(family, seed)
            _probe_bank(family, hidden.probe_key(family, "probe"))

    threading.Thread(target=build, daemon=True).start()


ERROR_CHARS = 1000  # what the job's author is told of an error (child.ERROR_CHARS): enough to fix a job
_HOST_PATH = re.compile(r"(?:/[\w.@+~-]+)+/([\w.@+~-]+)")


def told(text: str | None) -> str:
    """An error text from the sandbox as the job's author is told it: paths outside the job by
    name only, capped at its last ERROR_CHARS characters (where the exception is). The child
    writes it so already; it is agent code's process, so the library makes sure."""
    text = _HOST_PATH.sub(r"\1", text or "")
    return text if len(text) <= ERROR_CHARS else "... " + text[-ERROR_CHARS:]


def _parse(text: str) -> dict:
    """A child's answer as an object; an error answer when it is not a JSON object."""
    try:
        answer = json.loads(text)
    except ValueError:
        return {"error": "the answer was not JSON"}
    return answer if isinstance(answer, dict) else {"error": "the answer was not a JSON object"}


# --- the conversation with the confined child --------------------------------------------------
class _Session:
    """Drives one probe session (see `trainergym.probe.child`): reads the job's tasks, verifies and
    checks them here, then sends the reward bank and the tool calls, and keeps the answers."""

    def __init__(self, task: TaskSpec, job: JobConfig, package_dir: Path, rl_toml: str = ""):
        self.task, self.job, self.package_dir, self.rl_toml = task, job, package_dir, rl_toml
        self.fam = get_family(task.family)
        self.rng = random.Random(secrets.token_bytes(16))  # per probe: nothing to learn across probes
        self.first: dict = {}
        self.loaded: Loaded | None = None
        self.malformed = ""
        self.solved: list[dict | None] = []
        self.verified: list[int] = []
        self.readable = self.sampled = 0
        self.sample: list[int] = []  # the tasks verified by the family's code
        self.verdicts: dict[int, str | None] = {}
        self.why: dict[int, str] = {}  # sampled tasks that are not verified: why not
        self.picked: list[int] = []  # verified tasks for the reward bank
        self.task_skills: list[set[str]] = []  # per verified task
        self.task_shapes: list[set[str]] = []  # per verified task: `shape` of its solution
        self.task_mistakes: list[set[str]] = []  # per verified task: the mistakes that get it wrong
        self.leaks: list[int] = []
        self.rest_error = ""  # why the background reading (leakage) failed, if it did
        self._rest: threading.Thread | None = None
        self._key: tuple | None = None  # the load answer's key in `_READINGS`, and its size
        self._size = 0
        self.recalled = False  # the reading came from `_READINGS`
        self.items: list[adversary.Item] = []
        self.cases: list[adversary.Case] = []
        self.order: list[int] = []
        self.scored: Scored | None = None
        self.tool_items: list[adversary.Item] = []
        self.tool_answers: ToolAnswers | None = None
        self.config: ConfigAnswer | None = None
        self.asked = "load"
        self.end: dict = {}  # the session's end line

    def follow(self, text: str) -> dict | None:
        """The next request, given the child's answer to the last one as the worker relayed it
        (JSON text; None: the session ends)."""
        asked, request = self.asked, None
        try:
            if asked == "load":
                self._key, self._size = _reading_key(self.task, text), len(text)
                if not self._recall():
                    answer = _parse(text)
                    self.first = answer
                    if answer.get("stage") != "loaded":
                        return None
                    self.loaded = Loaded.model_validate(answer)
                    self._read()
                request = self._score_request()
                if self._rest is not None:
                    self._rest.start()  # solves the rest while the child scores
                return self._asked(request)
            answer = _parse(text)
            if asked == "score":
                self.scored = Scored.model_validate(answer)
                if len(self.scored.rewards) != len(self.cases) or len(self.scored.errors) != len(self.cases):
                    raise ValueError(f"{len(self.scored.rewards)} rewards for {len(self.cases)} rollouts")
                request = self._tools_request() or self._config_request()
            elif asked == "tools":
                self.tool_answers = ToolAnswers.model_validate(answer)
                if [len(r) for r in self.tool_answers.results] != [len(i.calls) for i in self.tool_items]:
                    raise ValueError("tool answers do not match the calls")
                request = self._config_request()
            elif asked == "config":
                self.config = ConfigAnswer.model_validate(answer)
        except (ValidationError, ValueError) as e:
            self.malformed = str(e).splitlines()[0][:300]
            return None
        return self._asked(request)

    def _asked(self, request: dict | None) -> dict | None:
        self.asked = request["op"] if request else "done"
        return request

    def _recall(self) -> bool:
        """Take the reading of an identical load answer (same family, task and secrets) from
        `_READINGS`, if one is there."""
        with _readings_lock:
            hit = _READINGS.get(self._key)
            if hit is not None:
                _READINGS.move_to_end(self._key)
        if hit is None:
            return False
        self.recalled = True
        self.first, self.loaded, self.rows, self.solved, self.canon = dict(hit.first), hit.loaded, hit.rows, hit.solved, hit.canon
        self.sampled, self.readable, self.verified, self.why = hit.sampled, hit.readable, list(hit.verified), dict(hit.why)
        self.task_skills, self.task_shapes = list(hit.task_skills), list(hit.task_shapes)
        self.task_mistakes, self.leaks = list(hit.task_mistakes), list(hit.leaks)
        return True

    def _remember(self) -> None:
        """Keep a completed reading in `_READINGS` (not one whose background part failed)."""
        size = self._size
        if self.recalled or self._key is None or self.loaded is None or self.rest_error or size > READINGS_CHARS:
            return
        reading = _Reading(first={k: v for k, v in self.first.items() if k != "tasks"}, loaded=self.loaded, rows=self.rows,
                           solved=self.solved, canon=self.canon, sampled=self.sampled, readable=self.readable,
                           verified=tuple(self.verified), why=dict(self.why), task_skills=tuple(self.task_skills),
                           task_shapes=tuple(self.task_shapes), task_mistakes=tuple(self.task_mistakes),
                           leaks=tuple(self.leaks), size=size)
        with _readings_lock:
            _READINGS[self._key] = reading
            while sum(r.size for r in _READINGS.values()) > READINGS_CHARS or len(_READINGS) > READINGS_MAX:
                _READINGS.popitem(last=False)

    def _read(self) -> None:
        """Start verifying a sample drawn across the whole taskset with the family's code: in a
        random order, only until JOB_ITEMS tasks are verified (the reward bank's own items, which
        the score request needs). The rest of the sample is verified, and every other task solved
        for the leakage check, in the background while the child scores (`_read_rest`)."""
        rows = self.rows = [{"prompt": t.prompt, "answer": t.answer, "world": t.world or {}} for t in self.loaded.tasks]
        self.solved = [None] * len(rows)
        self.canon = [None] * len(rows)
        # The sample is keyed by the data and a secret: the same data is always judged on the same
        # tasks (no lucky draws between byte variants of a job), and no job can aim at them.
        digest = hashlib.sha256(json.dumps([[t.prompt, t.answer] for t in self.loaded.tasks]).encode()).hexdigest()
        picker = random.Random(hidden.probe_key(self.task.family, "verify:" + digest))
        sample = range(len(rows)) if len(rows) <= VERIFY_SAMPLE else sorted(picker.sample(range(len(rows)), VERIFY_SAMPLE))
        self.sample, self.sampled = list(sample), len(sample)
        self.verdicts: dict[int, str | None] = {}  # sampled task -> why it is not verified (None: it is)
        order = list(self.sample)
        self.rng.shuffle(order)  # the first verified in a random order: a uniform draw of the verified
        self.picked = []
        for j in order:
            if len(self.picked) >= JOB_ITEMS:
                break
            if self._verify(j) is None:
                self.picked.append(j)
        self._rest = threading.Thread(target=self._read_rest, daemon=True)

    def _verify(self, j: int) -> str | None:
        """Why sampled task j is not verified by the family's solver and checker (None: it is);
        once per task."""
        if j in self.verdicts:
            return self.verdicts[j]
        self._solve(j)
        solved, row = self.solved[j], self.rows[j]
        if solved is None:
            why = "the family cannot read it"
        else:
            try:
                ok = bool(self.fam.check(solved["reply"], row["answer"]))
            except Exception:  # noqa: BLE001
                ok = False
            why = (f"the family's solver answers {solved['reply']!r}, the task says {row['answer']!r}" if not ok else
                   "its prompt gives the answer away" if giveaway.gives_away(self.loaded.tasks[j], solved) else None)
        self.verdicts[j] = why
        return why

    def _verify_rest(self) -> None:
        """The whole sample's verdicts, in order: verified tasks, why the others are not, and the
        skills, solution shapes and mistakes of the verified."""
        rows = self.rows
        for j in self.sample:
            self._verify(j)
        self.readable = sum(1 for j in self.sample if self.solved[j] is not None)
        self.why = {j: self.verdicts[j] for j in self.sample if self.verdicts[j] is not None}
        self.verified = [j for j in self.sample if self.verdicts[j] is None]
        # A hint the family does not read, holding the answer under a fixed transform in most
        # tasks (one more than it, its hex, reversed), teaches a shortcut the eval does not have.
        hint, hinted = giveaway.shortcut([self.loaded.tasks[j] for j in self.verified], [self.solved[j] for j in self.verified])
        for k in sorted(hinted, reverse=True):
            self.why[self.verified.pop(k)] = f"its prompt gives the answer away ({hint})"
        for j in self.verified:
            with contextlib.suppress(Exception):
                self.task_skills.append(set(self.fam.skills(rows[j])))
            self.task_shapes.append(shape(self.solved[j]))
            self.task_mistakes.append(mistakes(self.fam, rows[j]))

    def _solve(self, j: int) -> None:
        try:
            solved = self.fam.solve(self.rows[j])
        except Exception:  # noqa: BLE001 - family code on untrusted data: unreadable
            return
        self.solved[j] = solved
        self.canon[j] = json.dumps([solved["calls"], solved["reply"]], sort_keys=True, default=str)

    def _read_rest(self) -> None:
        """The rest of the sample's verification; then every task, for leakage: its canonical
        form (the family solver's trace) and content."""
        try:
            self._verify_rest()
            for j in range(len(self.rows)):
                if self.solved[j] is None and j not in self.verdicts:
                    self._solve(j)
            self.leaks = leakage.leaks(self.task.family, self.rows, self.canon)
        except Exception as e:  # noqa: BLE001 - the data and leakage checks fail closed, never silently pass
            self.rest_error = f"{type(e).__name__}: {e}"[:300]

    def finish(self) -> None:
        """Wait for the background reading (started with the score request), and keep the
        reading for an identical answer."""
        if self._rest is not None:
            if not self._rest.is_alive() and self._rest.ident is None:
                self._rest.start()
            self._rest.join()
        self._remember()

    def _item(self, group: str, base: int, row: dict, solved: dict, wrong: list[str] | None = None) -> adversary.Item:
        wrong = [d["reply"] for d in self.fam.distractors(row)][:3] if wrong is None else wrong
        if not wrong:
            others = [t.answer for t in self.loaded.tasks[:200] if t.answer != row["answer"]] or ["0"]
            wrong = [f"Answer: {self.rng.choice(others)}"]
        return adversary.Item(group, base, {"prompt": row["prompt"], "answer": row["answer"], "world": row.get("world") or {}},
                              solved["calls"], solved["reply"], row["answer"], wrong)

    def _score_request(self) -> dict | None:
        n = len(self.loaded.tasks)
        for row, solved, wrong in _probe_bank(self.task.family, hidden.probe_key(self.task.family, "probe")):
            self.items.append(self._item("probe", self.rng.randrange(n), row, solved, list(wrong)))
        self.tool_items = [i for i in self.items if i.calls]
        for j in self.rng.sample(self.verified, min(JOB_ITEMS, len(self.verified))) if self.recalled else self.picked:
            t = self.loaded.tasks[j]  # the world copied: family code never holds what a later probe may reuse
            self.items.append(self._item("job", j, {"prompt": t.prompt, "answer": t.answer, "world": copy.deepcopy(t.world or {})},
                                         self.solved[j]))
        prompts = [t.prompt for t in self.loaded.tasks]
        found = adversary.triggers(self.package_dir, prompts, [t.system_prompt for t in self.loaded.tasks], self.rng)
        self.cases = adversary.build(self.items, found, self.job.prime_rl.max_tokens, self.rng, self.fam.check,
                                     self.job.prime_rl.max_turns)
        self.order = list(range(len(self.cases)))
        self.rng.shuffle(self.order)  # unlabelled and mixed: probe items, the job's own, every kind of reply
        tasks = list(range(len(self.items)))
        self.rng.shuffle(tasks)  # the tasks too: their order says nothing of which are fresh
        slot = {item: k for k, item in enumerate(tasks)}
        rollouts = [{"task": slot[c.item], "calls": c.calls, "reply": c.reply} for c in (self.cases[k] for k in self.order)]
        p = self.job.prime_rl
        return {"op": "score", "timeout": CALL_SECONDS, "rollouts": rollouts, "model": self.job.job.base_model,
                "sampling": {"temperature": p.temperature, "max_tokens": p.max_tokens},
                "tasks": [{"base": self.items[i].base, "data": self.items[i].data} for i in tasks]}

    def rewards(self) -> tuple[list[float | None], list[str | None]]:
        """The rewards in case order (they were sent shuffled)."""
        rewards, errors = [None] * len(self.cases), [None] * len(self.cases)
        for sent, k in enumerate(self.order):
            rewards[k], errors[k] = self.scored.rewards[sent], self.scored.errors[sent]
        return rewards, errors

    def _tools_request(self) -> dict | None:
        if not self.tool_items:
            return None
        return {"op": "tools", "timeout": CALL_SECONDS, "items": [
            {"base": i.base, "data": i.data, "calls": [{"tool": c["tool"], "arguments": c["arguments"]} for c in i.calls]}
            for i in self.tool_items]}

    def _config_request(self) -> dict | None:
        return {"op": "config", "rl_toml": self.rl_toml} if self.rl_toml else None


def _forget_after_fork() -> None:
    """A forked child (a vector env's worker process, say) starts with no warm workers: the
    parent's belong to the parent (their pipes, spool and cgroup; two children sharing one
    collided, and one's cleanup killed the others'), and its threads are gone with their locks."""
    global _idle, _started, _starting, _pool_lock, _readings_lock, _prepared_lock
    _idle, _started, _starting, _pool_lock = queue.LifoQueue(), 0, 0, threading.Lock()
    _readings_lock, _prepared_lock = threading.Lock(), threading.Lock()
    _prepared.clear()


os.register_at_fork(after_in_child=_forget_after_fork)


def _grow(runtime) -> bool:
    """Start one more worker in the background, if the pool may grow and no other is starting
    (one cold start at a time: each imports verifiers on a core of its own). It joins the idle
    workers once started, or once its start failed (`run` then meets and reports the failure).
    False when there was nothing to start; a sandbox that cannot be built raises here."""
    global _started, _starting
    with _pool_lock:
        if _started >= POOL_SIZE or _starting:
            return False
        _started, _starting = _started + 1, _starting + 1
    try:
        worker = WarmWorker(Sandbox(runtime=runtime))
    except BaseException:
        with _pool_lock:
            _started, _starting = _started - 1, _starting - 1
        raise
    atexit.register(worker.close)

    def start() -> None:
        global _starting
        try:
            worker.start()
        finally:
            with _pool_lock:
                _starting -= 1
            _idle.put(worker)

    threading.Thread(target=start, daemon=True).start()
    return True


def _warm_up() -> threading.Thread | None:
    """A first probe: when no worker is idle or starting and the pool may grow, find the stack
    and start a worker in the background while the library reads the job. None when there is
    nothing to start."""
    if not _idle.empty() or _starting or _started >= POOL_SIZE:
        return None

    def start() -> None:
        with contextlib.suppress(Exception):  # `warm_worker` meets the same failure and reports it
            _grow(stack_env.ensure())

    thread = threading.Thread(target=start, daemon=True)
    thread.start()
    return thread


def prestart(n: int | None = None, timeout: float = 600.0) -> int:
    """Start the probe's warm workers now, up to `n` (default the pool's size), and wait until
    they are ready: what a process that will probe many jobs at once may do before its first
    ones (otherwise the pool grows while probes wait). Returns the number of workers."""
    runtime, deadline = stack_env.ensure(), time.monotonic() + timeout
    while _started < min(n or POOL_SIZE, POOL_SIZE) and time.monotonic() < deadline:
        if not _grow(runtime):
            time.sleep(0.05)
    while _starting and time.monotonic() < deadline:
        time.sleep(0.05)
    return _started


@contextlib.contextmanager
def warm_worker() -> Iterator[WarmWorker]:
    """Borrow a warm worker for one probe, on the stack agent code runs in: an idle one, else
    the first to be free, a busy one returned or a new one started meanwhile (the pool grows
    in the background while probes wait; none waits on a cold start that another frees it from)."""
    runtime = stack_env.ensure()
    while True:
        try:
            worker = _idle.get_nowait()
            break
        except queue.Empty:
            pass
        _grow(runtime)
        try:
            worker = _idle.get(timeout=0.5)
            break
        except queue.Empty:
            continue
    if (worker.sandbox.requested, worker.sandbox.runtime) != (requested_mode(), runtime):  # changed: a new worker
        worker.close()
        worker = WarmWorker(Sandbox(runtime=runtime))
        atexit.register(worker.close)
    try:
        yield worker
    finally:
        _idle.put(worker)


def _converse(session: _Session, package_dir: Path, module: str, timeout: float, wall: float,
              warm: bool) -> tuple[dict, str]:
    """Run the session in a confined worker; returns its end line and the sandbox's description.
    The job may use `timeout` CPU seconds and hold the floor `wall` seconds (child.py says how)."""
    cap = session.task.bounds.max_items
    request = {"nonce": secrets.token_hex(8), "module": module, "max_tasks": cap, "timeout": timeout, "wall": wall,
               "cap": CAP_FACTOR * wall}  # on the clock in all (a host that starves it)
    try:
        if warm:
            with warm_worker() as worker:
                sandbox = worker.sandbox
                end = worker.run(package_dir, request, session.follow)
        else:
            sandbox = Sandbox(Limits(wall_seconds=wall), runtime=stack_env.ensure())
            _, end = run_once(sandbox, package_dir, request, session.follow)
    except WorkerError as e:
        end, sandbox = {"stage": "infra" if e.infra else "crash", "error": str(e)}, None
    except SandboxUnavailable as e:
        end, sandbox = {"stage": "infra", "error": str(e)}, None
    except (RuntimeError, ValueError) as e:
        end, sandbox = {"stage": "crash", "error": str(e)}, None
    confinement = sandbox.describe() if sandbox else "no sandbox ran"
    accounting = end.pop("accounting", "")
    return end, f"{confinement}; totals: {accounting}" if accounting else confinement


# --- the checks ------------------------------------------------------------------------------
def _import_rule(task: TaskSpec) -> tuple[set[str], set[str], set[str]]:
    """(top-level modules a job may import, the packages it may import parts of: the family's
    and its public dependencies' (the family kit), their public modules)."""
    import sys

    packages = public_packages(get_family(task.family))
    public = {f"{pkg.name}.{name.removesuffix('.py')}" for pkg, names in packages.items() for name in names
              if name != "__init__.py"}
    return set(sys.stdlib_module_names) | {"verifiers", "pydantic", "numpy"}, {pkg.name for pkg in packages}, public


def _static_imports(report: ProbeReport, package_dir: Path, module: str, task: TaskSpec) -> bool:
    """What the job's source imports, read without running it: the standard library, verifiers,
    pydantic, numpy and the family's eval toolset; never the family's generator, solver,
    checker or reference job, nor trainergym. (Routes around this, such as computed module
    names or reading files, meet the sandbox's masks.)"""
    allowed, pkgs, public = _import_rule(task)
    for path in sorted((package_dir / module).rglob("*.py")):
        rel = "taskset/" + path.relative_to(package_dir / module).as_posix()
        try:
            tree = adversary.parse(path.read_text(errors="replace"))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue  # the import in the sandbox reports it with a line number
        names = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names += [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names += [node.module] + ([f"{node.module}.{a.name}" for a in node.names] if node.module in pkgs else [])
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith(tuple(p + "." for p in pkgs)):
                names.append(node.value.split(":")[0])
        for name in names:
            ok = name.split(".")[0] in allowed or name in pkgs or any(name == m or name.startswith(m + ".") for m in public)
            if not ok:
                report.add("shape", "fail", f"{rel} uses `{name}`: a job may import only the standard library, verifiers, "
                           f"pydantic, numpy and the family's eval toolset ({', '.join(sorted(public))})",
                           "write your own generator, reward and checker; the family's other code and trainergym are not "
                           "available to jobs")
                return False
    return True


def _shape(report: ProbeReport, s: _Session, end: dict) -> bool:
    first = s.first or end
    if first.get("stage") in ("import", "crash", "cpu") or (not s.first and end.get("stage") != "closed"):
        report.add("shape", "fail", "the taskset package could not be imported or built:\n" + told(first.get("error")),
                   "taskset/__init__.py must import cleanly and set __all__ to exactly one vf.Taskset subclass; "
                   "of the family's modules, only its eval toolset is available")
        return False
    version, runtime = first.get("verifiers_version"), stack_env.ensure()
    if version != runtime.verifiers:
        report.add("shape", "fail", f"the sandbox ran verifiers {version} where {runtime.describe()} was expected",
                   "this is an installation problem: rebuild the stack (`trainergym stack --build`) or reinstall trainergym")
        return False
    if first.get("stage") == "load":
        report.add("data", "fail", "building the tasks failed:\n" + told(first.get("error")), "load() must return tasks without raising")
        return False
    if s.loaded is None or s.malformed:
        report.add("shape", "fail", f"the job answered the probe with malformed data ({s.malformed or 'no tasks'})",
                   "load() must yield vf.Task objects whose data holds a text prompt and an `answer: str`")
        return False
    report.add("shape", "pass", f"imports with verifiers {version} and exports one Taskset")
    return True


def _data(report: ProbeReport, s: _Session, job: JobConfig) -> None:
    m, p, task, loaded = report.measurements, job.prime_rl, s.task, s.loaded
    tasks = loaded.tasks
    n = len(tasks)
    prompts = [t.prompt for t in tasks]
    dev = {ex.prompt for ex in task.dev_examples}
    dev_share = sum(1 for q in prompts if q in dev) / n
    verified = s.verified
    share = len(verified) / max(1, s.sampled)
    readable = s.readable / max(1, s.sampled)
    forms = Counter(s.canon[j] for j in verified)  # by the family's reading: free text adds nothing
    distinct_verified = len(forms)
    if s.sampled < n:  # Good-Turing: the unseen share of the rest is about the sample's share of singletons
        singletons = sum(1 for k in forms.values() if k == 1)
        distinct_verified = round(distinct_verified + singletons / s.sampled * (n - s.sampled))
    m.update(n_tasks=n, infinite=loaded.declared_infinite, distinct_prompts=len(set(prompts)), dev_share=round(dev_share, 4),
             verified_share=round(share, 4), readable_share=round(readable, 4), verified_sample=s.sampled,
             distinct_verified_prompts=distinct_verified)
    need = max(MIN_TASKS, p.batch_size // p.group_size)
    longest = max(len(t.prompt) + len(t.system_prompt) for t in tasks)
    parts = rollout_parts(s, job)
    context = sum(part.tokens for part in parts)
    m["rollout_tokens"] = context
    cap = task.bounds.max_items
    if loaded.more and not loaded.declared_infinite:
        report.add("data", "fail", f"load() yields more than {cap} tasks (or never ends); every task is read, up to "
                   f"{cap}", f"keep the taskset within {cap} tasks, or declare an endless generator with "
                   "`INFINITE = True` on the Taskset (it is then sampled)")
    elif n < need:
        report.add("data", "fail", f"load() yields {n} tasks; at least {need} are needed", "generate more tasks")
    elif any(not q.strip() for q in prompts):
        report.add("data", "fail", f"{sum(1 for q in prompts if not q.strip())} tasks have an empty prompt", "every task needs a prompt")
    elif longest > MAX_PROMPT_CHARS:
        report.add("data", "fail", f"a prompt is {longest} characters long; the limit is {MAX_PROMPT_CHARS}", "shorten the prompts")
    elif not loaded.answer_field or any(not t.answer.strip() for t in tasks):
        report.add("data", "fail", "tasks must carry the expected final answer in an `answer: str` field of their TaskData "
                   f"({sum(1 for t in tasks if not t.answer.strip())} of {n} are missing one)",
                   "add `answer: str` to your vf.TaskData subclass")
    elif max(len(t.answer) for t in tasks) > MAX_ANSWER_CHARS:
        report.add("data", "fail", f"an answer is {max(len(t.answer) for t in tasks)} characters long; the limit is "
                   f"{MAX_ANSWER_CHARS}", "answers are checked exactly: keep them short")
    elif context > p.seq_len:
        parts.sort(key=lambda part: -part.tokens)
        report.add("data", "fail", f"the longest rollout is ~{context} tokens, more than seq_len {p.seq_len}: "
                   + ", ".join(part.what for part in parts), f"raise seq_len, or {parts[0].remedy}")
    else:
        report.add("data", "pass", f"{n}{' (sampled from an endless taskset)' if loaded.declared_infinite else ''} tasks "
                   f"with prompts and answers; the longest rollout fits seq_len (~{context} of {p.seq_len} tokens: "
                   + ", ".join(part.what for part in parts) + ")")

    fam = s.fam
    # A sample's share carries its sampling error: the bar holds only where the whole interval clears it
    # (half the answers wrong once passed at 52.2% of 500). A sample of the whole taskset is exact.
    low = share if s.sampled >= n else wilson_low(len(verified), s.sampled)
    m["verified_share_low"] = round(low, 4)
    status = "pass" if share >= VERIFIED_WARN else "warn" if low > VERIFIED_PASS else "fail"  # half wrong: refused
    example = ""
    if status != "pass":
        if s.why:
            bad = min(s.why)
            example = f"; for example task {bad} ({tasks[bad].prompt[:160]!r}...): {s.why[bad]}"
    bound = f" (at least {low:.1%} of the taskset, at 95% confidence)" if low != share else ""
    report.add("data.verified", status, f"{share:.1%}".replace(".0%", "%") + f" of {s.sampled} tasks checked are verified by the family's own "
               f"solver and checker{bound}; {readable:.0%} readable{example}",
               f"only verified tasks count: write prompts (and worlds) in the form the family reads: {fam.READ_FORM}"
               if hasattr(fam, "READ_FORM") else "write tasks in the family's own form, as the dev examples are")

    coverage, covered, missing = skill_coverage(task, s.task_skills)
    shapes = shape_coverage(task, s.task_shapes)
    punished = mistake_coverage(task, s.task_mistakes)
    m.update(skill_coverage=round(coverage, 4), skills_covered=covered, shape_coverage=round(shapes, 4),
             mistake_coverage=round(punished, 4))
    notes = ([f"missing skills: {', '.join(missing)}"] if missing else []) + \
            ([f"the tasks' solutions cover {shapes:.0%} of the eval's (which tool follows which, and how many calls)"]
             if shapes < SHAPE_WARN else []) + \
            ([f"the tasks punish {punished:.0%} of the eval's classic mistakes (a mistake that still gets a task right "
              "teaches nothing)"] if punished < SHAPE_WARN else []) + \
            ([f"only {len(set(prompts))} distinct prompts in {n} tasks"] if len(set(prompts)) < DISTINCT_WARN * n else []) + \
            ([f"{dev_share:.0%} of the tasks are the task's dev examples"] if dev_share > DEV_SHARE_WARN else [])
    report.add("coverage", "warn" if notes else "pass",
               f"skills covered by verified tasks: {', '.join(covered) or 'none'}" + (f"; {'; '.join(notes)}" if notes else ""),
               "varied tasks that exercise every skill of the family teach more; the dev examples are examples, not data")


class RolloutPart(NamedTuple):
    """One part of the longest rollout's tokens: how many, what it is (for the agent) and how to
    make it smaller."""

    tokens: int
    what: str
    remedy: str


def wilson_low(k: int, n: int, z: float = 1.645) -> float:
    """The lower end of the one-sided 95% Wilson interval of a share k/n: the least the whole
    taskset's share can be, given the sample's."""
    if n == 0:
        return 0.0
    p = k / n
    centre = p + z * z / (2 * n)
    spread = z * (p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5
    return max(0.0, (centre - spread) / (1 + z * z / n))


def rollout_parts(s: _Session, job: JobConfig) -> list[RolloutPart]:
    """The longest rollout the job allows, estimated in tokens at CHARS_PER_TOKEN, by part: the
    prompt as the model reads it (the longest prompt and system prompt, and the eval tools'
    schemas the chat template adds), every turn at max_tokens, and the tool results. A rollout
    reads results after every turn but its last: at one call a turn, max_turns - 1 calls, or the
    most calls the family's solver made on one of the job's tasks if more (a model that makes them
    all then makes some at once). Each is counted as long as the longest result the eval tools gave
    the solver on the job's tasks, in its chat template: those are the tools and worlds training uses."""
    p, loaded = job.prime_rl, s.loaded
    prompt = max(-(-(len(t.prompt) + len(t.system_prompt)) // CHARS_PER_TOKEN) for t in loaded.tasks)
    schemas = -(-len(json.dumps(s.task.eval_tools)) // CHARS_PER_TOKEN)
    trajectories = [solved for solved in s.solved if solved is not None]
    results = [len(str(call["result"])) for solved in trajectories for call in solved["calls"]]
    calls = max([p.max_turns - 1, *(len(solved["calls"]) for solved in trajectories)])
    per_call = -(-max(results) // CHARS_PER_TOKEN) + TOOL_MESSAGE_TOKENS if results else 0
    tools = (f"tool results ~{calls * per_call} ({calls} calls x ~{per_call}: the longest result the eval tools gave "
             f"on your tasks, {max(results)} characters, in its chat template)" if results else
             "tool results not counted (the family's solver made no call on your tasks)")
    return [
        RolloutPart(prompt + schemas, f"the prompt ~{prompt + schemas} (the longest prompt and system prompt ~{prompt}, "
                    f"the eval tools' schemas ~{schemas})", "shorten the prompts"),
        RolloutPart(p.max_turns * p.max_tokens, f"max_turns x max_tokens {p.max_turns} x {p.max_tokens} = "
                    f"{p.max_turns * p.max_tokens}", "lower max_turns or max_tokens"),
        RolloutPart(calls * per_call, tools, "lower max_turns, or give your tasks worlds whose tools answer shorter"),
    ]


def skill_coverage(task: TaskSpec, task_skills: list[set[str]]) -> tuple[float, list[str], list[str]]:
    """How well the verified tasks cover the hidden eval, by share, not mere presence: each skill
    counts as far as its share of the tasks reaches its share of the eval items; an eval item is
    covered as far as its least covered skill. Ten hard tasks among 2,000 trivial ones cover
    little. Returns (coverage, skills present, skills missing); only aggregates leave the library."""
    fam = get_family(task.family)
    evals = hidden.hidden_eval(task.family)
    n = max(1, len(task_skills))
    in_data = {t: sum(1 for sk in task_skills if t in sk) / n for t in fam.SKILL_TAGS}
    in_eval = {t: sum(1 for ex in evals if t in ex.skills) / max(1, len(evals)) for t in fam.SKILL_TAGS}
    reach = {t: min(1.0, in_data[t] / in_eval[t]) if in_eval[t] else 1.0 for t in fam.SKILL_TAGS}
    share = sum(min((reach.get(t, 0.0) for t in ex.skills), default=1.0) for ex in evals) / max(1, len(evals))
    return share, [t for t in fam.SKILL_TAGS if in_data[t]], [t for t in fam.SKILL_TAGS if not in_data[t]]


def shape(solved: dict) -> set[str]:
    """The shape of a solution, operands and wording aside: which tool follows which (from the
    start to the answer) and how many calls it takes. What a policy must learn to do."""
    names = ["^", *(c["tool"] for c in solved["calls"]), "$"]
    return {f"{a}>{b}" for a, b in zip(names, names[1:])} | {f"calls={len(solved['calls'])}"}


def by_share(data: list[set[str]], evals: list[set[str]]) -> float:
    """How far tasks with features `data` cover eval items with features `evals`, by share:
    each feature counts as far as its share of the tasks reaches its share of the eval items,
    an eval item as far as its features on average (an item with none counts as covered)."""
    n = max(1, len(data))
    in_data = Counter(f for d in data for f in d)
    in_eval = Counter(f for e in evals for f in e)
    reach = {f: min(1.0, in_data[f] / n / (k / len(evals))) for f, k in in_eval.items()}
    return sum(sum(reach[f] for f in e) / len(e) if e else 1.0 for e in evals) / max(1, len(evals))


@functools.cache
def _eval_shapes(family: str, seed: str) -> tuple[frozenset[str], ...]:
    return tuple(frozenset(shape(solved)) for solved in hidden.solved_eval(family))


def shape_coverage(task: TaskSpec, task_shapes: list[set[str]]) -> float:
    """How much of the eval's solution shapes the verified tasks exercise: one template varied
    only in its numbers covers the few steps it takes, not the eval."""
    return by_share(task_shapes, [set(e) for e in _eval_shapes(task.family, hidden.secret_seed())])


def mistakes(fam, row: dict) -> set[str]:
    """The classic mistakes (the family's distractors: a skipped step, the start person's
    attribute, the rule after the match, ...) that get this task wrong. A task that a mistake
    still answers right does not teach to avoid it: a world where every lookup gives the answer,
    rules that all name one team, steps that do nothing."""
    try:
        return {d["kind"] for d in fam.distractors(row)}
    except Exception:  # noqa: BLE001 - family code on untrusted data
        return set()


@functools.cache
def _eval_mistakes(family: str, seed: str) -> tuple[frozenset[str], ...]:
    fam = get_family(family)
    return tuple(frozenset(mistakes(fam, ex.model_dump())) for ex in hidden.hidden_eval(family))


def mistake_coverage(task: TaskSpec, task_mistakes: list[set[str]]) -> float:
    """How much of the eval's classic mistakes the verified tasks punish, by share."""
    return by_share(task_mistakes, [set(e) for e in _eval_mistakes(task.family, hidden.secret_seed())])


def _tools(report: ProbeReport, s: _Session) -> None:
    """Parity by behaviour: the job's tools answer the family solver's calls as the eval tools do."""
    m, task, loaded = report.measurements, s.task, s.loaded
    if loaded.tools_error:
        report.add("tools", "fail", "building the toolsets failed:\n" + told(loaded.tools_error), "toolsets() must construct without raising")
        m["tool_parity"] = 0.0
        return
    have = {t.name: t.params for t in loaded.tools}
    want = {t["function"]["name"]: sorted(t["function"]["parameters"].get("properties", {})) for t in task.eval_tools}
    wrong: dict[str, str] = {}
    if s.tool_answers is not None:
        for item, results in zip(s.tool_items, s.tool_answers.results):
            for call, got in zip(item.calls, results):
                if call["tool"] in have and got.strip() != str(call["result"]).strip() and call["tool"] not in wrong:
                    wrong[call["tool"]] = f"{call['tool']}({json.dumps(call['arguments'])[:80]}) answered {got[:80]!r} " \
                                          f"where the eval tool answers {str(call['result'])[:80]!r}"
    called = {c["tool"] for i in s.tool_items for c in i.calls} if s.tool_answers is not None else set()
    missing = [name for name in want if name not in have]
    extra = [name for name in have if name not in want]
    params = [name for name in want if name in have and name not in called and sorted(have[name]) != want[name]]
    ok = [name for name in want if name not in wrong and name not in missing and name not in params]
    m["tool_parity"] = round(len(ok) / max(1, len(want)), 4)
    if wrong or missing or extra or params:
        parts = list(wrong.values()) + ([f"missing {missing}"] if missing else []) + ([f"extra {extra}"] if extra else []) + \
                ([f"different parameters for {params}"] if params else [])
        report.add("tools", "fail", "the job's tools differ from the eval tool interface: " + told("; ".join(parts)),
                   f"wire the eval toolset ({task.eval_toolset}) into your Task.toolsets, and nothing else; give each "
                   "task the `world` the tools answer from" if task.world else
                   f"wire the eval toolset ({task.eval_toolset}) into your Task.toolsets, and nothing else")
    else:
        report.add("tools", "pass", f"tools match the eval interface ({', '.join(want)})" +
                   (f" and answered {sum(len(i.calls) for i in s.tool_items)} calls on fresh items as the eval tools do"
                    if called else ""))


def _rewards(report: ProbeReport, s: _Session) -> None:
    m = report.measurements
    if s.scored is None:
        report.add("rewards", "fail", "the rewards could not be checked: " + (s.malformed or s.end.get("error") or
                   "the probe process stopped answering while scoring"), "rewards must score a rollout quickly and return a number")
        return
    if s.scored.rollout_only:
        report.add("rewards.runtime", "fail", f"{', '.join(repr(n) for n in s.scored.rollout_only)} run only inside "
                   "a training rollout (a reward or judge taking a `runtime` parameter, or an override of a Task "
                   "method the rollout calls around scoring): the probe scores finished traces, as offline scoring "
                   "does, so what they do in training cannot be checked",
                   "judge the trace alone (`task`, `trace`) in @vf.reward methods; keep runtime checks in `validate`")
        return
    rewards, errors = s.rewards()
    v = adversary.judge(s.items, s.cases, rewards, errors, *REWARD_RANGE)
    sep = {g: (k / n if n else 0.0) for g, (k, n) in v.separated.items()}
    pooled = sum(k for k, _ in v.separated.values()) / max(1, sum(n for _, n in v.separated.values()))
    m.update(reward_separation=round(pooled, 4), reward_separation_probe=round(sep.get("probe", 0.0), 4),
             reward_separation_job=round(sep.get("job", 0.0), 4), reward_margin=v.margin, group_variance=v.group_variance,
             noop_ok=v.noop_ok and not v.errors, reward_exploits=len(v.exploits), rollouts_scored=v.scored)
    if v.errors:
        report.add("rewards", "fail", f"a reward raised or returned no number: {told(v.errors[0])}",
                   "rewards must never raise; return 0.0 for replies they cannot parse")
        return
    if v.out_of_range:
        report.add("rewards.range", "fail", f"a reward of {v.out_of_range[0]!r} is outside the documented range "
                   f"[{REWARD_RANGE[0]:g}, {REWARD_RANGE[1]:g}]", "keep each reward's weighted sum within [0, 1]")
    else:
        report.add("rewards.range", "pass", f"all {v.scored} rewards seen are within [0, 1]")
    if v.exploits:
        f = v.exploits[0]
        shown = f.reply if len(f.reply) <= 160 else f"{f.reply[:80]}...{f.reply[-60:]} ({len(f.reply)} characters)"
        than = ("the solver's rollout, which makes the tool calls the eval needs" if f.kind.startswith("correct")
                else "the plain wrong answer")
        report.add("rewards.exploit", "fail", f"the reward pays {f.paid:g} for {f.kind} ({shown!r}), more than the "
                   f"{f.plain:g} it pays {than}" +
                   (f"; {len(v.exploits) - 1} more such replies" if len(v.exploits) > 1 else ""),
                   "pay for the correct final answer (format shaping is fine); never for length, phrases, extra numbers, "
                   "values copied from the task or tool calls around a wrong answer, nor less for using the tools")
    else:
        report.add("rewards.exploit", "pass", "no adversarial reply (padding, extra numbers, the answer beside a wrong "
                   "one, values the task shows, tool calls, empty, the job's own strings) is paid more than a plain "
                   "wrong answer, nor the correct reply without tools more than with them")
    n_items = sum(n for _, n in v.separated.values())
    low = [g for g, share in sep.items() if share < 0.75]
    if pooled < SEPARATION_PASS or low:
        report.add("rewards.ranking", "fail", f"the correct rollout is paid more than every wrong reply on only "
                   f"{pooled:.0%} of {n_items} items" + (f" ({', '.join(f'{g} items {sep[g]:.0%}' for g in sep)})"),
                   "score the final answer exactly as the answer format says, on every task, whatever its prompt")
    else:
        report.add("rewards.ranking", "pass", f"on {n_items} items (fresh and the job's own) the correct rollout is paid "
                   f"more than every wrong reply {pooled:.0%} of the time")


def _leakage(report: ProbeReport, s: _Session) -> None:
    if s.rest_error:
        report.measurements["leakage"] = True
        report.add("leakage", "fail", f"the tasks could not be read in full, nor checked against the hidden eval ({s.rest_error})",
                   "keep tasks and their worlds plain: strings, numbers, lists and objects")
        return
    found = bool(s.leaks)
    report.measurements["leakage"] = found
    if found:
        report.add("leakage", "fail", "some tasks in your data match items of the hidden eval (by text, by the family "
                   "solver's trace, or by their numbers and names); which ones is not shown",
                   "generate your own data; never copy or reword eval items into training data")
    else:
        report.add("leakage", "pass", f"none of the {len(s.loaded.tasks)} tasks matches a hidden-eval item")


def _config(report: ProbeReport, job: JobConfig, task: TaskSpec, bundle: JobBundle) -> None:
    issues = check_bounds(job, task)
    for issue in issues:
        report.add("config.bounds", "fail", issue.message, issue.hint)
    if not issues:
        report.add("config.bounds", "pass", "job.toml is within the task's bounds")
    p, model, device = job.prime_rl, job.job.base_model, gpu.gpu(task.bounds.gpu)
    if gpu.covered(model):
        estimate = gpu.peak_estimate(model, p.seq_len, lora=p.lora is not None)
        peak = estimate.value
        report.measurements["peak_memory_gib"] = round(peak, 2)
        report.measurements["peak_memory_source"] = estimate.source
        if gpu.fits(model, p.seq_len, device, lora=p.lora is not None):
            report.add("config.memory", "pass", f"estimated trainer peak {peak:.1f} GiB ({estimate.basis}) fits "
                       f"{device.name} ({device.memory_gib} GB)")
        else:
            report.add("config.memory", "fail", f"estimated trainer peak {peak:.1f} GiB at seq_len {p.seq_len} "
                       f"({estimate.basis}) would run out of memory on {device.name} ({device.memory_gib} GB)",
                       "lower seq_len, use LoRA, or a smaller model")
    rl = render_rl_toml(job, bundle.manifest.taskset_id, task)
    missing = [key for key, ok in (
        ("max_steps", rl.get("max_steps")), ("seq_len", rl.get("seq_len")), ("model.name", rl["model"].get("name")),
        ("orchestrator.group_size >= 2", rl["orchestrator"].get("group_size", 0) >= 2),
        ("env single_agent", rl["orchestrator"]["train"]["source"][0]["env"].get("id") == "single_agent"),
        ("harness null", rl["orchestrator"]["train"]["source"][0]["env"]["agent"]["harness"]["id"] == "null"),
        ("runtime subprocess", rl["orchestrator"]["train"]["source"][0]["env"]["agent"]["runtime"]["type"] == "subprocess"),
        ("agent.max_total_tokens below seq_len",
         0 < rl["orchestrator"]["train"]["source"][0]["env"]["agent"].get("max_total_tokens", 0) < rl["seq_len"]),
    ) if not ok]
    if missing:
        report.add("config.rl_toml", "fail", f"the rendered rl.toml lacks {missing}", "this is a trainergym bug: please report it")
    else:
        report.add("config.rl_toml", "pass", "the rendered rl.toml is complete")


def _prime_rl_schema(report: ProbeReport, s: _Session | None) -> None:
    """prime-rl's own config classes on the rendered rl.toml, asked in the child (they import
    the job's taskset by its id): in prime-rl's stack only."""
    runtime = stack_env.ensure()
    answer = s.config if s is not None else None
    if answer is None or not answer.checked:
        why = (f"agent code ran under {runtime.describe()}" if not runtime.pinned else
               "the job did not load far enough to ask" if answer is None else "its config classes are not installed")
        report.add("config.prime_rl", "skip", f"prime-rl's config classes were not asked: {why}")
    elif answer.error:
        report.add("config.prime_rl", "fail", f"prime-rl's config classes refuse the rendered rl.toml:\n{told(answer.error)}",
                   "check the [prime_rl] values named above")
    else:
        report.add("config.prime_rl", "pass", f"prime-rl's config classes at {runtime.describe()} accept the rendered rl.toml")


def probe(workspace_root: Path, task: TaskSpec, bundle_dir: Path, timeout: float = 90.0,
          warm: bool = True, wall: float | None = None) -> tuple[ProbeReport, JobBundle | None]:
    """Validate the workspace as a job; the bundle is returned only when everything passed.
    `warm=False` uses a fresh sandbox (and pays the verifiers import).

    The job's code may use `timeout` seconds of CPU time, its processes together: past that it
    fails (its own doing on any host). `wall` (default 3 x `timeout`) bounds the seconds it may
    spend neither running nor waiting for a CPU (asleep, blocked), and 4 x `wall` its time on the
    clock (a host that starves it): past either, the report says the probe could not judge it
    (`ProbeReport.infra`), a failure of the host's and not the job's."""
    started = time.monotonic()
    report = ProbeReport()
    job_path = workspace_root / JOB_FILE
    if not job_path.is_file():
        report.add("job.toml", "fail", "job.toml is missing", "write job.toml from the template in INSTRUCTIONS.md")
        return report, None
    job, issues = parse_job(job_path.read_text(errors="replace"))
    if job is None:
        for issue in issues:
            report.add(issue.check, "fail", issue.message, issue.hint)
        return report, None
    if not (workspace_root / TASKSET_DIR / "__init__.py").is_file():
        report.add("shape", "fail", "taskset/__init__.py is missing",
                   "write a verifiers v1 taskset package under taskset/ (see INSTRUCTIONS.md)")
        return report, None
    odd = [p.relative_to(workspace_root).as_posix() for p in sorted((workspace_root / TASKSET_DIR).rglob("*"))
           if p.is_symlink() or not (p.is_file() or p.is_dir())]
    if odd:
        report.add("shape", "fail", f"{odd[0]} is a symlink or special file; a job holds only regular files and "
                   "directories", "replace it with a regular file")
        return report, None

    warming = _warm_up() if warm else None  # a first probe: the sandbox starts while the job is read
    bundle = build_bundle(workspace_root, bundle_dir, job, task)
    package, module = bundle.root / "package", bundle.manifest.taskset_id
    session = None
    imports = _static_imports(report, package, module, task)
    if imports:
        _prepare(task.family)
    runtime = stack_env.ensure()
    report.items.insert(0, ProbeItem(check="stack", status="pass" if runtime.pinned else "warn",
                                     message=told(f"agent code runs under {runtime.describe()}"),
                                     hint="" if runtime.pinned else "the job is checked on the library's verifiers; the "
                                     "trainer runs prime-rl's"))
    if imports:
        session = _Session(task, job, package / module, bundle.rl_toml.read_text())
        if warming is not None:
            warming.join()
        end, report.confinement = _converse(session, package, module, timeout, wall or WALL_FACTOR * timeout, warm)
        session.finish()
        session.end = end
        if not code_masks_hold(report.confinement):
            report.confinement += "; the family's code and trainergym are NOT masked from agent code in this mode"
        if end.get("stage") in ("timeout", "infra"):  # the host's failure, not the job's: nothing is judged
            report.infra = end.get("error") or "the sandbox failed"
            report.add("probe", "fail", f"the job could not be judged: {report.infra}",
                       "submit the job again; a probe that the host failed costs no submit attempt")
        elif end.get("stage") == "idle":  # asleep or blocked past the limit: the job's own doing, on any host
            report.add("shape", "fail", end.get("error", ""), "a job's code must never wait: no sleeps, locks or network")
        elif _shape(report, session, end):
            _data(report, session, job)
            _tools(report, session)
            _rewards(report, session)
            _leakage(report, session)
    if not report.infra:
        _config(report, job, task, bundle)
        _prime_rl_schema(report, session)
    report.seconds = round(time.monotonic() - started, 2)
    bundle.manifest.probe = report.measurements
    write_manifest(bundle)
    return report, (bundle if report.ok else None)


def code_masks_hold(confinement: str) -> bool:
    """Masks need a mount namespace of the sandbox's own."""
    return confinement.startswith(("bubblewrap", "namespaces"))
