"""Where trainergym keeps things: the files it ships (`PACKAGE_DATA`, `LIBRARY`) and the
per-user data directory (`data_dir()`: the secrets, the job queue, the cost ledger).

This module imports nothing of trainergym, so every zone (the GPU host included) may use it.
"""

from __future__ import annotations

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
