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


SQLITE_HEADER = b"SQLite format 3\x00"


class BrokenStore(RuntimeError):
    """The file is there but is not a store of ours we can trust: empty, not SQLite, damaged, or
    another program's database. Never opened as an empty one: that would lose its rows silently."""


class Store:
    """One SQLite file (`path`) with `schema` applied on open: a connection per thread, and `tx()`
    for every read and write. An existing file must already be ours (it holds `table`) and whole;
    else `BrokenStore`, in one line."""

    def __init__(self, path: Path | str, schema: str, table: str):
        self.path = str(path)
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        existed = Path(self.path).exists()
        if existed:
            self._check(table)
        self._connection().executescript(schema)

    def _check(self, table: str) -> None:
        aside = "move it aside to start an empty one, or restore it from a copy"
        with open(self.path, "rb") as f:
            head = f.read(len(SQLITE_HEADER))
        if not head:
            raise BrokenStore(f"{self.path} is empty (0 bytes), not the {table} database it should be (truncated?): {aside}")
        if head != SQLITE_HEADER:
            raise BrokenStore(f"{self.path} is not a SQLite database: {aside}")
        try:
            db = self._connection()
            check = db.execute("PRAGMA quick_check").fetchone()[0]
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.DatabaseError as e:
            raise BrokenStore(f"{self.path} is a damaged SQLite database ({e}): {aside}") from None
        if check != "ok":
            raise BrokenStore(f"{self.path} is a damaged SQLite database ({check}): {aside}")
        if tables and table not in tables:  # a database with no table yet holds nothing to lose
            what = ", ".join(sorted(tables)[:5]) or "no table"
            raise BrokenStore(f"{self.path} is another database ({what}), not trainergym's {table}: {aside}")

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
