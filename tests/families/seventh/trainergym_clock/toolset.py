"""The clock eval tool interface as a verifiers v1 `Toolset` (advertised as `clock_add`,
`clock_sub`). Stateless: each call takes the current time and returns the new one."""

import verifiers.v1 as vf

from trainergym_clock import dial


class ClockToolset(vf.Toolset[vf.ToolsetConfig]):
    TOOL_PREFIX = "clock"

    @vf.tool
    def add(self, time: str, minutes: int) -> str:
        """Return the time (HH:MM, 24-hour) `minutes` after `time`."""
        try:
            return dial.add(time, minutes)
        except ValueError as e:
            return f"error: {e}"

    @vf.tool
    def sub(self, time: str, minutes: int) -> str:
        """Return the time (HH:MM, 24-hour) `minutes` before `time`."""
        try:
            return dial.sub(time, minutes)
        except ValueError as e:
            return f"error: {e}"


if __name__ == "__main__":
    ClockToolset.run()
