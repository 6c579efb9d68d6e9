"""Multi-hop people-directory training tasks for the multi_hop eval tools."""

from .hops import PeopleHopsTaskset

__all__ = ["PeopleHopsTaskset"]
