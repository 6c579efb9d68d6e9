"""On-call triage training tasks for the triage eval tools."""

from .incidents import IncidentTaskset

__all__ = ["IncidentTaskset"]
