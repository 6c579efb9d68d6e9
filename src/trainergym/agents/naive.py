"""The naive agent: reads the instructions and submits the untouched template."""

from __future__ import annotations

from typing import Any


class NaiveAgent:
    """Reads INSTRUCTIONS.md, then submits the untouched template on every turn: a floor to compare
    agents against."""

    def reset(self, observation: str, info: dict) -> None:
        """Start over: the next action reads the instructions."""
        self._read = False

    def act(self, observation: str, info: dict) -> Any:
        """`read_file` INSTRUCTIONS.md on the first turn, `submit_job` on every later one."""
        if not self._read:
            self._read = True
            return {"name": "read_file", "arguments": {"path": "INSTRUCTIONS.md"}}
        return {"name": "submit_job", "arguments": {}}
