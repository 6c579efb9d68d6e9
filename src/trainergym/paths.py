"""Where trainergym keeps things: the files it ships (`PACKAGE_DATA`, `LIBRARY`), the per-user
data directory (`data_dir()`: the secrets, the job queue, the cost ledger) and a GPU host's work
directory (`default_workdir()`).

This module imports nothing of trainergym, so every zone (the GPU host included) may use it.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import platformdirs

LIBRARY = Path(__file__).resolve().parent  # the trainergym package directory
PACKAGE_DATA = LIBRARY / "data"  # templates, baselines and prices shipped with the library


def data_dir() -> Path:
    """The data directory (it holds the secrets, the job queue and the ledger), created 0700 on
    first use by whichever caller comes first. The default location is also tightened to 0700
    if an older version left it open to others; a `TRAINERGYM_DATA_DIR` the user chose and
    created is left as it is (the secret files in it are 0600 either way)."""
    chosen = os.environ.get("TRAINERGYM_DATA_DIR")
    path = Path(chosen or platformdirs.user_data_dir("trainergym"))
    try:
        if not path.is_dir():
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                path.mkdir(mode=0o700)
                os.chmod(path, 0o700)  # whatever the umask
            except FileExistsError:
                pass  # created concurrently
        elif not chosen:
            st = path.stat()
            if st.st_mode & 0o077 and st.st_uid == os.getuid():
                os.chmod(path, 0o700)
    except OSError:
        pass  # unwritable here: whoever writes there reports it
    return path


# As root, where the work directories live: root's, traversable by every uid (a trainer's own
# uid must reach prime-rl's env, the model cache and its job's directory) and writable by none.
ROOT_WORKDIRS = Path("/var/lib/trainergym")


def default_workdir() -> Path:
    """The local worker's work directory when none is given. Not root: `<data dir>/worker` (the
    trainer keeps our uid). As root the trainer runs under a uid of its own, which cannot traverse
    the 0700 data directory (nor, usually, /root), and the data directory holds secrets, so it is
    never opened: `/var/lib/trainergym/worker-<hash of the data directory>`, one per data directory
    (its pre-score cache belongs to that directory's hidden eval)."""
    data = data_dir()
    if os.geteuid() != 0:
        return data / "worker"
    return ROOT_WORKDIRS / f"worker-{hashlib.sha256(str(data.resolve()).encode()).hexdigest()[:12]}"
