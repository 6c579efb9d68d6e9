"""Untrained baselines with provenance: the packaged file (src/trainergym/data/baselines.toml)
and the installation's measured file (`<data dir>/baselines.toml`).

`best_pre` for a family is the best untrained model's score: the bar a trained model's
uplift is measured against.

Precedence, per (family, model): a `measured` row of the user's file replaces the packaged row
(`reported` or `surrogate`) in place; a measured row for a model the packaged file has no row
for is added after the packaged ones. Nothing else of the user's file is read.

The measured file is written only by `trainergym baselines measure` (`write_measured`), which
scored the models with the same scorer the jobs' pre-scores come from. Because best_pre is the
bar the agent's reward is paid against, it is read only when it is plainly that command's
output: a regular file (no link) owned by this user, 0600, in the data directory (hidden from
agent code in the probe's sandbox and from the trainer; no workspace lies there), every row
`measured` with its date, stack, eval and backend, and a MAC over the rows keyed by the installation
secret (`hidden.install_secret`), so a row edited by hand or a file copied from elsewhere is
refused. A refused file raises `BaselineFileError` (one line) rather than falling back to the
packaged figures: a bar that silently moved back would pay rewards against the wrong baseline.
A trusted row is the bar only while it measures what jobs are scored against now: the same stack
and the same hidden eval (`stale`); a stale row is passed over and shown as stale.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import hmac
import json
import math
import os
import stat
import tempfile
import tomllib
from pathlib import Path
from typing import Literal

import tomli_w
from pydantic import BaseModel, ValidationError, model_validator

from trainergym.paths import PACKAGE_DATA, data_dir

BASELINES_FILE = PACKAGE_DATA / "baselines.toml"
MEASURED_NAME = "baselines.toml"  # in the data directory
MEASURED_VERSION = 1
_MEASURED_KEYS = {"family", "model", "score", "n", "source", "note", "date", "stack", "eval", "backend", "ci95"}


class BaselineFileError(ValueError):
    """The user's measured baselines file cannot be trusted or read; the message is one line
    naming the file, what is wrong (`why`) and what to do."""

    def __init__(self, message: str, why: str = ""):
        super().__init__(message)
        self.why = why or message


class Baseline(BaseModel):
    """One untrained model's hidden-eval score. `measured` rows also record when, on which
    stack and with which backend; `ci95` defaults to the Wilson interval of a k/n score."""

    family: str
    model: str
    score: float
    n: int
    source: Literal["reported", "measured", "surrogate"]
    note: str = ""
    date: str | None = None
    stack: str | None = None
    eval: str | None = None  # measured rows: `hidden.eval_fingerprint` of the eval they were scored on
    backend: str | None = None
    ci95: tuple[float, float] | None = None

    @model_validator(mode="after")
    def _provenance(self) -> Baseline:
        if self.source == "measured" and not (self.date and self.stack and self.backend):
            raise ValueError(f"measured baseline {self.family}/{self.model} needs date, stack and backend")
        if self.ci95 is None and self.n > 0 and self.source != "surrogate":
            self.ci95 = wilson_interval(self.score, self.n)
        return self


def wilson_interval(p: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a proportion p observed on n items."""
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4)


@functools.cache
def load_baselines(path: Path = BASELINES_FILE) -> tuple[Baseline, ...]:
    """Every baseline row of `path` (the packaged baselines.toml), validated; read once per path."""
    data = tomllib.loads(path.read_text())
    return tuple(Baseline.model_validate(row) for row in data["baseline"])


# --- the installation's measured baselines ------------------------------------------------------
def measured_path() -> Path:
    """Where `trainergym baselines measure` keeps this installation's measured baselines."""
    return data_dir() / MEASURED_NAME


def _mac(rows: list[dict]) -> str:
    """HMAC-SHA256 of the rows (canonical JSON) under a key derived from the installation secret:
    only this installation's own `write_measured` produces it."""
    from trainergym.task.hidden import install_secret  # not at import: it may create the secret

    key = hmac.new(install_secret().encode(), b"measured-baselines", hashlib.sha256).digest()
    canonical = json.dumps(rows, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hmac.new(key, canonical.encode(), hashlib.sha256).hexdigest()


def _refuse(path: Path, why: str) -> BaselineFileError:
    return BaselineFileError(f"{path}: {why}; run `trainergym baselines measure` again (it replaces the file), or "
                             "delete the file to use the packaged baselines", why)


def load_measured(path: Path | None = None) -> tuple[Baseline, ...]:
    """The measured rows of the user's file (none when there is no file), checked as the module
    says; BaselineFileError when it is refused. Re-read whenever the file changes."""
    path = path or measured_path()
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return ()
    except OSError as e:
        raise _refuse(path, f"cannot be read ({e.strerror})") from None
    return _load_measured(path, (st.st_ino, st.st_mtime_ns, st.st_size, st.st_mode, st.st_uid))


@functools.lru_cache(maxsize=8)
def _load_measured(path: Path, signature: tuple) -> tuple[Baseline, ...]:
    try:  # no link followed, no FIFO blocked on; the checks apply to what was opened
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as e:
        raise _refuse(path, "is a symbolic link" if os.path.islink(path) else f"cannot be read ({e.strerror})") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _refuse(path, "is not a regular file")
        if st.st_uid != os.geteuid() or st.st_mode & 0o077:
            raise _refuse(path, f"must be yours and 0600 (it is uid {st.st_uid}, {st.st_mode & 0o777:04o}): anyone else "
                                "who can write it could move the bar rewards are paid against")
        raw = f.read(1 << 20)
    try:
        data = tomllib.loads(raw.decode())
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise _refuse(path, f"is not valid TOML ({e})") from None
    rows = data.get("baseline", [])
    if data.get("version") != MEASURED_VERSION or not isinstance(data.get("mac"), str) or not isinstance(rows, list) \
            or not all(isinstance(r, dict) for r in rows):
        raise _refuse(path, f"is not a measured-baselines file (version {MEASURED_VERSION}, a mac and [[baseline]] tables)")
    try:
        mac = _mac(rows)
    except ValueError:  # NaN or infinity in a row
        raise _refuse(path, "holds a number that is not finite") from None
    if not hmac.compare_digest(mac, data["mac"]):
        raise _refuse(path, "its rows do not match the MAC `trainergym baselines measure` wrote (edited by hand, "
                            "copied from another installation, or the installation secret changed)")
    out, seen = [], set()
    for row in rows:
        try:
            if set(row) - _MEASURED_KEYS:
                raise ValueError(f"unknown keys {sorted(set(row) - _MEASURED_KEYS)}")
            b = Baseline.model_validate(row)
            _check_measured(b)
        except (ValueError, ValidationError) as e:
            raise _refuse(path, f"row {row.get('family')}/{row.get('model')}: {' '.join(str(e).split())}") from None
        if (b.family, b.model) in seen:
            raise _refuse(path, f"two rows for {b.family}/{b.model}")
        seen.add((b.family, b.model))
        out.append(b)
    return tuple(out)


def _check_measured(b: Baseline) -> None:
    """What a measured row must be, whoever wrote it. ValueError otherwise."""
    from trainergym.task.spec import ALLOWED_BASE_MODELS

    if b.source != "measured":
        raise ValueError(f"source is {b.source!r}: this file holds only measured rows")
    if b.model not in ALLOWED_BASE_MODELS:
        raise ValueError(f"{b.model} is not an allowed base model ({', '.join(ALLOWED_BASE_MODELS)})")
    if not (0.0 <= b.score <= 1.0 and math.isfinite(b.score)) or b.n < 1:
        raise ValueError(f"score {b.score} on n={b.n} items is not a hidden-eval score")


def write_measured(rows: list[Baseline], path: Path | None = None) -> Path:
    """Add `rows` (measured) to the user's file, replacing the rows of the same family and model,
    and sign it. Only `trainergym baselines measure` calls this. An existing regular file that is
    refused is replaced by `rows` alone (its rows are not trusted); a link or anything else there
    raises BaselineFileError. Written 0600 under a lock, to a temporary file renamed into place."""
    path = path or measured_path()
    for b in rows:
        _check_measured(b)
    with open(path.with_name(f".{path.name}.lock"), "a") as lock:  # concurrent measurements merge, never race
        os.chmod(lock.name, 0o600)
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            kept = {(b.family, b.model): b for b in load_measured(path)}
        except BaselineFileError:
            if path.is_symlink() or not path.is_file():
                raise
            kept = {}  # a refused regular file: replaced by the fresh measurements, never merged
        for b in rows:
            kept[(b.family, b.model)] = b
        table = [b.model_dump(mode="json", exclude_none=True) for b in kept.values()]
        text = ("# Measured by `trainergym baselines measure`: untrained models scored on this installation's hidden\n"
                "# evals. Do not edit: the mac covers every row, and an edited file is refused (delete it instead).\n"
                + tomli_w.dumps({"version": MEASURED_VERSION, "mac": _mac(table), "baseline": table}))
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}-", dir=path.parent)  # 0600
        try:
            with os.fdopen(fd, "w") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    return path


# --- lookups: the packaged rows, with the measured ones preferred ---------------------------------
def stale(b: Baseline) -> str:
    """Why a measured row no longer measures what jobs are scored against ("" when it does): it
    was scored on another stack than the one jobs train and score with, or on another hidden eval
    (a new hidden seed, a changed family generator, a row from before rows recorded their eval)."""
    from trainergym.job.stack import short_stack
    from trainergym.task import hidden

    if b.stack != short_stack():
        return f"measured on {b.stack}, jobs now run on {short_stack()}"
    try:
        now = hidden.eval_fingerprint(b.family)
    except KeyError:
        return f"family {b.family} is not installed"
    if b.eval != now:
        return "measured on another hidden eval than this installation's now"
    return ""


def for_family(family: str) -> list[Baseline]:
    """The family's baselines: the packaged rows in file order, each replaced by this
    installation's measured row for the same model, then measured rows for models the packaged
    file lacks (none for an unknown family). A `stale` measured row is passed over: it measured
    another scorer or eval, so the packaged row stands (`trainergym baselines show` says so).
    BaselineFileError when the measured file is refused."""
    measured = {b.model: b for b in load_measured() if b.family == family and not stale(b)}
    rows = [measured.pop(b.model, b) for b in load_baselines() if b.family == family]
    return rows + list(measured.values())


def score(family: str, model: str) -> Baseline:
    """The baseline of `model` on `family`; KeyError when there is none."""
    for b in for_family(family):
        if b.model == model:
            return b
    raise KeyError(f"no baseline for {model} on {family}")


def best_pre(family: str) -> Baseline:
    """The family's best untrained baseline (the highest score): the bar uplift is measured against.
    KeyError for a family with none."""
    rows = for_family(family)
    if not rows:
        raise KeyError(f"no baselines for family {family!r}")
    return max(rows, key=lambda b: b.score)
