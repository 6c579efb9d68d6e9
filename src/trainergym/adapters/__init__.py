"""Adapters: the trainer task as other frameworks' environments."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


@contextlib.contextmanager
def requires_extra(adapter: str, extra: str | None) -> Iterator[None]:
    """Wrap an adapter's third-party imports: a missing module becomes a ModuleNotFoundError
    that names the extra to install (`pip install 'trainergym[tinker]'`), not the first module
    the import happened to touch (`No module named 'chz'`). `extra` None: the module is a core
    dependency, so the installation itself is incomplete."""
    try:
        yield
    except ModuleNotFoundError as e:
        if e.name is None or e.name.split(".")[0] in ("trainergym", "__main__"):
            raise  # our own modules missing is a bug, not an absent extra
        fix = (f"install the {extra!r} extra: pip install 'trainergym[{extra}]' (in a checkout: uv sync --extra {extra})"
               if extra else "its dependencies are missing: reinstall trainergym (pip install trainergym)")
        raise ModuleNotFoundError(f"trainergym.adapters.{adapter} needs {e.name!r}, which is not installed; {fix}",
                                  name=e.name) from e
