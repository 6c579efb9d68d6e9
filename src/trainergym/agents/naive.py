"""The naive agent: reads the instructions and submits the untouched template."""

from __future__ import annotations

from typing import Any


class NaiveAgent:
    def reset(self, observation: str, info: dict) -> None:
        self._read = False

    def act(self, observation: str, info: dict) -> Any:
        if not self._read:
            self._read = True
            return {"name": "read_file", "arguments": {"path": "INSTRUCTIONS.md"}}
        return {"name": "submit_job", "arguments": {}}
