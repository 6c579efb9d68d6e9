"""A durable SQLite file shared by threads and processes: the job queue, the pod pool and the
cost ledger each keep one.

WAL mode, so readers never block the writer; one connection per thread (sqlite3 connections
are not shared across threads, and opening one per call dominated the queue's cost); every
write transaction taken up front (`BEGIN IMMEDIATE`), so concurrent writers queue on the lock
instead of failing half-way.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class Store:
    """One SQLite file (`path`) with `schema` applied on open: a connection per thread, and `tx()`
    for every read and write."""

    def __init__(self, path: Path | str, schema: str):
        self.path = str(path)
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._connection().executescript(schema)

    def _connection(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
            db.row_factory = sqlite3.Row
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("PRAGMA busy_timeout=30000")
            self._local.db = db
        return db

    @contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        """One transaction: committed on success, rolled back on any error."""
        db = self._connection()
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
