"""Chained-arithmetic training tasks for the calc_chain eval tools."""

from .chains import ChainTaskset

__all__ = ["ChainTaskset"]
