"""Bookkeeping training tasks for the ledger eval tools."""

from .books import BooksTaskset

__all__ = ["BooksTaskset"]
