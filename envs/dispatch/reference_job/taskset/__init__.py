"""Ticket-routing training tasks for the dispatch eval tools."""

from .routing import RoutingTaskset

__all__ = ["RoutingTaskset"]
