"""Clock-arithmetic training tasks for the clock eval tools."""

from .shifts import ShiftTaskset

__all__ = ["ShiftTaskset"]
