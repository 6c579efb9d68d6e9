"""The hidden evals: items generated from a per-installation secret seed.

The seed lives in the user's data directory (never in a workspace, the repository or a job
bundle); `TRAINERGYM_HIDDEN_SEED` pins it explicitly so results compare across machines.
Only library code calls this module; nothing an agent can call returns its items.
"""

from __future__ import annotations

import functools
import os
import secrets
from pathlib import Path

import platformdirs

from trainergym.tasks import Example, get_family

HIDDEN_EVAL_SIZE = 200


def data_dir() -> Path:
    return Path(os.environ.get("TRAINERGYM_DATA_DIR") or platformdirs.user_data_dir("trainergym"))


def secret_seed() -> str:
    pinned = os.environ.get("TRAINERGYM_HIDDEN_SEED")
    if pinned:
        return pinned
    path = data_dir() / "hidden-seed"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(16))
    return path.read_text().strip()


@functools.cache
def _items(family_id: str, namespace: str, seed: str, n: int) -> tuple[Example, ...]:
    rows = get_family(family_id).generate(seed, n, namespace=namespace)
    return tuple(Example.model_validate(row) for row in rows)


def hidden_eval(family_id: str, n: int = HIDDEN_EVAL_SIZE) -> list[Example]:
    """The family's hidden eval (what pre/post scores are measured on)."""
    return list(_items(family_id, "hidden", secret_seed(), n))


def probe_items(family_id: str, n: int = 8) -> list[Example]:
    """Fresh items the agent never saw, for scoring a job's rewards; not hidden-eval items."""
    return list(_items(family_id, "probe", secret_seed(), n))
