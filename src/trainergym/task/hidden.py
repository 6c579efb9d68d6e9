"""The hidden evals: items generated from a per-installation secret seed, and the keys of
everything else secret (probe items) derived from a separate installation secret.

Both secrets live in the user's data directory (never in a workspace, the repository or a job
bundle), created 0600 in a directory created 0700:

- `hidden-seed` seeds the hidden evals. `TRAINERGYM_HIDDEN_SEED` pins it so results compare
  across machines; a pin shorter than 128 bits (32 hex characters) draws a `WeakSeedWarning`,
  since anyone who knows or guesses it can regenerate the hidden eval.
- `install-secret` (256 random bits) keys `probe_key`, an HMAC-SHA256 per (purpose, family),
  from which the probe items are generated. It is random on every installation even when the
  hidden seed is pinned, so probe items reveal nothing about the hidden seed (nor does a pinned
  seed let anyone predict them). `TRAINERGYM_INSTALL_SECRET` pins it; that is for tests
  (tests/conftest.py pins both), not for installations.

`TRAINERGYM_DATA_DIR` moves the data directory. Only library code calls this module; nothing
an agent can call returns its items.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import os
import secrets
import string
import tempfile
import threading
import warnings
from pathlib import Path

from trainergym.paths import data_dir
from trainergym.task.spec import Example, get_family

HIDDEN_EVAL_SIZE = 200
MIN_SECRET_BITS = 128


class WeakSeedWarning(UserWarning):
    """A pinned secret short enough to guess."""


def _estimated_bits(secret: str) -> int:
    """A generous estimate of a secret's entropy: 4 bits a character if it is all hex digits,
    else 6."""
    return len(secret) * (4 if all(c in string.hexdigits for c in secret) else 6)


_warned: set[str] = set()


def _warn_if_weak(variable: str, value: str, consequence: str) -> None:
    """Warn (once per process and variable) when a pinned secret is shorter than 128 bits."""
    if variable in _warned or _estimated_bits(value) >= MIN_SECRET_BITS:
        return
    _warned.add(variable)
    warnings.warn(f"{variable} is pinned to a value of about {_estimated_bits(value)} bits: anyone who knows or "
                  f"guesses it can {consequence}. Use at least 32 random hex characters "
                  f"(python -c 'import secrets; print(secrets.token_hex(16))').", WeakSeedWarning, stacklevel=3)


_create_lock = threading.Lock()


def _secret_file(name: str, nbytes: int) -> str:
    """The secret in `<data dir>/<name>`, created on first use: `nbytes` random bytes as hex,
    written to a private temporary file and linked into place (O_EXCL semantics: concurrent
    first uses agree on one secret, and nobody ever reads a half-written file)."""
    path = data_dir() / name
    with _create_lock:
        if not path.exists():
            fd, tmp = tempfile.mkstemp(prefix=f".{name}-", dir=path.parent)  # 0600
            try:
                with os.fdopen(fd, "w") as f:
                    f.write(secrets.token_hex(nbytes))
                    f.flush()
                    os.fsync(f.fileno())
                try:
                    os.link(tmp, path)
                except FileExistsError:
                    pass  # another process created it first: use theirs
                except OSError:  # no hard links on this filesystem: exclusive create instead
                    try:
                        out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                    except FileExistsError:
                        pass
                    else:
                        with os.fdopen(out, "w") as f:
                            f.write(Path(tmp).read_text())
            finally:
                os.unlink(tmp)
    try:
        if path.stat().st_mode & 0o077:  # left readable by an older version or by hand: repair
            os.chmod(path, 0o600)
    except OSError:
        pass
    value = path.read_text().strip()
    if not value:
        raise RuntimeError(f"{path} is empty; delete it and a new secret is created")
    return value


def secret_seed() -> str:
    """The hidden evals' seed: `TRAINERGYM_HIDDEN_SEED` if pinned, else the installation's."""
    pinned = os.environ.get("TRAINERGYM_HIDDEN_SEED")
    if pinned:
        _warn_if_weak("TRAINERGYM_HIDDEN_SEED", pinned, "regenerate the hidden eval")
        return pinned
    return _secret_file("hidden-seed", 16)


def install_secret() -> str:
    """256 random bits kept in the data dir (`install-secret`); `TRAINERGYM_INSTALL_SECRET`
    pins it for tests."""
    pinned = os.environ.get("TRAINERGYM_INSTALL_SECRET")
    if pinned:
        _warn_if_weak("TRAINERGYM_INSTALL_SECRET", pinned, "regenerate the probe items")
        return pinned
    return _secret_file("install-secret", 32)


def probe_key(family_id: str, purpose: str) -> str:
    """A key for `purpose` and `family_id` (hex HMAC-SHA256 of the installation secret over
    "<purpose>:<family_id>"): unrelated to the hidden seed, and one key reveals no other."""
    return hmac.new(install_secret().encode(), f"{purpose}:{family_id}".encode(), hashlib.sha256).hexdigest()


@functools.cache
def _items(family_id: str, namespace: str, seed: str, n: int) -> tuple[Example, ...]:
    rows = get_family(family_id).generate(seed, n, namespace=namespace)
    return tuple(Example.model_validate(row) for row in rows)


def hidden_eval(family_id: str, n: int = HIDDEN_EVAL_SIZE) -> list[Example]:
    """The family's hidden eval (what pre/post scores are measured on)."""
    return list(_items(family_id, "hidden", secret_seed(), n))


def eval_fingerprint(family_id: str) -> str:
    """A digest of the family's hidden eval as it is now (its items, hence the hidden seed and the
    family's generator): what a measured baseline row records, so a row scored on another eval is
    not taken for this one's. Keyed by the installation secret, so it cannot confirm a guessed
    hidden seed offline."""
    return _fingerprint(family_id, secret_seed(), install_secret())


@functools.cache
def _fingerprint(family_id: str, seed: str, key: str) -> str:
    items = json.dumps([ex.model_dump(mode="json") for ex in _items(family_id, "hidden", seed, HIDDEN_EVAL_SIZE)],
                       sort_keys=True)
    return hmac.new(key.encode(), f"eval:{items}".encode(), hashlib.sha256).hexdigest()[:16]


@functools.cache
def _solved(family_id: str, seed: str) -> tuple[dict, ...]:
    fam = get_family(family_id)
    return tuple(fam.solve(ex.model_dump()) for ex in _items(family_id, "hidden", seed, HIDDEN_EVAL_SIZE))


def solved_eval(family_id: str) -> list[dict]:
    """The family solver's rollout (`calls`, `reply`) of each hidden-eval item: the shape of
    what the eval asks, for the probe's coverage and the surrogate's rollout costs."""
    return list(_solved(family_id, secret_seed()))


def probe_items(family_id: str, n: int = 8) -> list[Example]:
    """Fresh items the agent never saw, for scoring a job's rewards; not hidden-eval items.
    Generated from `probe_key(family_id, "probe")`, so they say nothing about the hidden seed."""
    return list(_items(family_id, "probe", probe_key(family_id, "probe"), n))
