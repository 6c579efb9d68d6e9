"""The reference agent: writes the family's reference job through the same tool calls a
model would make (look around, check baselines, write each file, submit)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from trainergym.task.spec import get_family


def reference_job_files(family_id: str) -> dict[str, str]:
    """The family's reference job as {workspace path: content}."""
    root = Path(get_family(family_id).REFERENCE_JOB)
    return {p.relative_to(root).as_posix(): p.read_text() for p in sorted(root.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts}


class ReferenceAgent:
    """Writes the family's reference job, in the order a model would: list the files, read the
    instructions, check the baselines, write each file, then submit until the episode ends."""

    def reset(self, observation: str, info: dict) -> None:
        """Plan the episode's tool calls for `info["family"]`."""
        self._plan = self._actions(info["family"])

    def _actions(self, family: str) -> Iterator[Any]:
        yield {"name": "list_files", "arguments": {}}
        yield {"name": "read_file", "arguments": {"path": "INSTRUCTIONS.md"}}
        yield {"name": "get_baseline_scores", "arguments": {}}
        for path, content in reference_job_files(family).items():
            yield {"name": "write_file", "arguments": {"path": path, "content": content}}
        while True:
            yield {"name": "submit_job", "arguments": {}}

    def act(self, observation: str, info: dict) -> Any:
        """The next planned tool call, as JSON text."""
        return json.dumps(next(self._plan))
