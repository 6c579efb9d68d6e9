"""The shared SQLite store (trainergym.infra.store): schema and settings, transactions that
commit or roll back, one connection per thread, and concurrent writers (threads and processes)
that queue on the lock without losing a write."""

import multiprocessing as mp
import os
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from trainergym.infra.store import BrokenStore, Store

SCHEMA = """
CREATE TABLE IF NOT EXISTS counter (id INTEGER PRIMARY KEY, n INTEGER NOT NULL);
INSERT OR IGNORE INTO counter VALUES (1, 0);
CREATE TABLE IF NOT EXISTS log (who TEXT NOT NULL, n INTEGER NOT NULL);
"""


@pytest.fixture
def store(tmp_path):
    return Store(tmp_path / "deep" / "er" / "s.db", SCHEMA, "counter")


def count(path) -> int:
    with sqlite3.connect(path) as db:  # a connection of our own: what another process sees
        return db.execute("SELECT n FROM counter WHERE id = 1").fetchone()[0]


def test_creates_the_directory_runs_the_schema_and_settings(store, tmp_path):
    assert store.path == str(tmp_path / "deep" / "er" / "s.db") and os.path.isfile(store.path)
    db = store._connection()
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("PRAGMA busy_timeout").fetchone()[0] == 30000
    assert db.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    with store.tx() as db:
        row = db.execute("SELECT * FROM counter").fetchone()
    assert (row["id"], row["n"]) == (1, 0)  # rows answer by column name


def test_reopening_keeps_the_data(store):
    with store.tx() as db:
        db.execute("UPDATE counter SET n = 5")
    again = Store(store.path, SCHEMA, "counter")  # the schema runs again: IF NOT EXISTS / OR IGNORE keep what is there
    with again.tx() as db:
        assert db.execute("SELECT n FROM counter").fetchone()[0] == 5


def test_a_bad_schema_is_an_error_at_construction(tmp_path):
    with pytest.raises(sqlite3.OperationalError):
        Store(tmp_path / "bad.db", "CREATE TABLE t (;", "t")


def test_a_transaction_commits_on_success(store):
    with store.tx() as db:
        db.execute("UPDATE counter SET n = n + 1")
        db.execute("INSERT INTO log VALUES ('a', 1)")
        assert db.in_transaction
    assert not store._connection().in_transaction
    assert count(store.path) == 1  # visible to another connection: committed


@pytest.mark.parametrize("error", [ValueError("boom"), KeyboardInterrupt()])
def test_any_error_rolls_back_everything_and_is_raised(store, error):
    with pytest.raises(type(error)):
        with store.tx() as db:
            db.execute("UPDATE counter SET n = 42")
            db.execute("INSERT INTO log VALUES ('a', 1)")
            raise error
    assert count(store.path) == 0
    with store.tx() as db:  # the connection is usable again, no transaction left open
        assert db.execute("SELECT COUNT(*) FROM log").fetchone()[0] == 0
        db.execute("UPDATE counter SET n = 1")
    assert count(store.path) == 1


def test_a_failing_statement_rolls_back_the_earlier_ones(store):
    with pytest.raises(sqlite3.IntegrityError):
        with store.tx() as db:
            db.execute("INSERT INTO log VALUES ('a', 1)")
            db.execute("INSERT INTO log VALUES (NULL, 2)")  # NOT NULL
    with store.tx() as db:
        assert db.execute("SELECT COUNT(*) FROM log").fetchone()[0] == 0


def test_one_connection_per_thread(store):
    mine = store._connection()
    assert store._connection() is mine
    with store.tx() as db:
        assert db is mine
    theirs = []
    thread = threading.Thread(target=lambda: theirs.extend([store._connection(), store._connection()]))
    thread.start()
    thread.join()
    assert theirs[0] is theirs[1] and theirs[0] is not mine
    other = Store(store.path, SCHEMA, "counter")  # another Store on the same file: its own connections
    assert other._connection() is not mine


def test_a_writer_waits_for_the_lock_and_readers_do_not(store):
    """BEGIN IMMEDIATE: a second writer queues until the first commits; a reader meanwhile sees
    the last committed state at once (WAL)."""
    holding, release = threading.Event(), threading.Event()
    events = []

    def first():
        with store.tx() as db:
            db.execute("UPDATE counter SET n = 10")
            holding.set()
            release.wait(10)
            events.append("first commits")

    def second():
        holding.wait(10)
        with store.tx() as db:
            events.append("second begins")
            db.execute("UPDATE counter SET n = n + 1")

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    holding.wait(10)
    started = time.monotonic()
    assert count(store.path) == 0  # the uncommitted write is invisible and the read does not wait
    assert time.monotonic() - started < 1.0
    time.sleep(0.3)  # time for the second writer to get stuck on the lock
    assert events == []
    release.set()
    for t in threads:
        t.join(10)
    assert events == ["first commits", "second begins"]
    assert count(store.path) == 11


def _increment(store: Store, who: str, times: int, start=None) -> None:
    if start is not None:  # a barrier: every writer begins at once
        start.wait(60)
    for _ in range(times):
        with store.tx() as db:  # read, then write on what was read: a lost update if two interleave
            n = db.execute("SELECT n FROM counter WHERE id = 1").fetchone()[0]
            db.execute("UPDATE counter SET n = ? WHERE id = 1", (n + 1,))
            db.execute("INSERT INTO log VALUES (?, ?)", (who, n + 1))


def test_threads_sharing_a_store_lose_no_write(store):
    start = threading.Barrier(6)
    threads = [threading.Thread(target=_increment, args=(store, f"t{i}", 150, start)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert count(store.path) == 6 * 150
    with store.tx() as db:
        seen = [row[0] for row in db.execute("SELECT n FROM log ORDER BY n")]
    assert seen == list(range(1, 6 * 150 + 1))  # each value read by exactly one writer


def _process_writer(path: str, who: str, times: int, start) -> None:
    _increment(Store(path, SCHEMA, "counter"), who, times, start)


def _dies_mid_transaction(path: str) -> None:
    store = Store(path, SCHEMA, "counter")
    with store.tx() as db:
        db.execute("UPDATE counter SET n = -1000")
        os._exit(0)  # killed holding the write lock, before COMMIT


def test_processes_writing_at_once_lose_no_write(store):
    ctx = mp.get_context("spawn")
    start = ctx.Barrier(4)
    procs = [ctx.Process(target=_process_writer, args=(store.path, f"p{i}", 100, start)) for i in range(3)]
    for p in procs:
        p.start()
    _increment(store, "parent", 100, start)  # and this process at the same time
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    assert count(store.path) == 400
    with store.tx() as db:
        per = dict(db.execute("SELECT who, COUNT(*) FROM log GROUP BY who").fetchall())
        seen = [row[0] for row in db.execute("SELECT n FROM log ORDER BY n")]
    assert per == {"p0": 100, "p1": 100, "p2": 100, "parent": 100} and seen == list(range(1, 401))


def test_a_process_that_dies_in_a_transaction_leaves_nothing_and_no_lock(store):
    proc = mp.get_context("spawn").Process(target=_dies_mid_transaction, args=(store.path,))
    proc.start()
    proc.join(60)
    assert proc.exitcode == 0
    assert count(store.path) == 0
    started = time.monotonic()
    _increment(store, "after", 1)  # the dead process's lock went with it
    assert time.monotonic() - started < 5 and count(store.path) == 1


@pytest.mark.parametrize("content, says", [
    (b"", r"is empty \(0 bytes\)"),
    (b"not a database at all, some other file", "is not a SQLite database"),
])
def test_a_file_that_is_not_a_store_is_refused_never_emptied(tmp_path, content, says):
    path = tmp_path / "s.db"
    path.write_bytes(content)
    with pytest.raises(BrokenStore, match=says):
        Store(path, SCHEMA, "counter")
    assert path.read_bytes() == content  # left as it was, for the user to look at


def test_a_damaged_or_foreign_database_is_refused(tmp_path, store):
    with store.tx() as db:
        db.executemany("INSERT INTO log (who, n) VALUES (?, ?)", [("x" * 200, i) for i in range(2000)])
    path = Path(store.path)
    store._connection().execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store._connection().close()
    whole = path.read_bytes()
    cut = tmp_path / "cut.db"
    cut.write_bytes(whole[: len(whole) // 2])  # truncated half-way
    with pytest.raises(BrokenStore, match="damaged"):
        Store(cut, SCHEMA, "counter")
    foreign = tmp_path / "foreign.db"
    sqlite3.connect(foreign).execute("CREATE TABLE photos (id INTEGER)").connection.commit()
    with pytest.raises(BrokenStore, match=r"another database \(photos\)"):
        Store(foreign, SCHEMA, "counter")
