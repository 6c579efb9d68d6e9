"""The cost ledger: every metered model call and every GPU job, with where its dollars came from.

One SQLite database (WAL) per installation, `<data dir>/ledger.db` or `TRAINERGYM_LEDGER`, safe
for many processes and threads writing at once. A row's `source` says how its dollars were
known: `reported` (the provider billed them in its response), `price table` (tokens the provider
reported x our table's price), `measured` (a real GPU job) or `surrogate` (the mock backend's
estimate). Prices are per million tokens, from `data/prices.toml` unless overridden.
"""

from __future__ import annotations

import os
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

from trainergym.paths import PACKAGE_DATA
from trainergym.infra.store import Store

_SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    ts REAL NOT NULL, kind TEXT NOT NULL, episode TEXT, model TEXT, prompt_tokens INTEGER, completion_tokens INTEGER,
    usd REAL NOT NULL, source TEXT NOT NULL, note TEXT
);
CREATE INDEX IF NOT EXISTS entries_episode ON entries (episode);
"""


@dataclass(frozen=True)
class Price:
    """A model's price in USD per million prompt and completion tokens."""

    input: float  # USD per million prompt tokens
    output: float  # USD per million completion tokens

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        """The dollars of one call with these token counts."""
        return (prompt_tokens * self.input + completion_tokens * self.output) / 1e6


def load_prices(override: Path | None = None) -> dict[str, Price]:
    """The price table: the packaged one, updated by `override` (or `TRAINERGYM_PRICES`), a TOML
    file of `["vendor/model"] input = .., output = ..`."""
    table = tomllib.loads((PACKAGE_DATA / "prices.toml").read_text())
    path = override or (Path(os.environ["TRAINERGYM_PRICES"]) if os.environ.get("TRAINERGYM_PRICES") else None)
    if path:
        table |= tomllib.loads(Path(path).read_text())
    return {model: Price(float(p["input"]), float(p["output"])) for model, p in table.items() if isinstance(p, dict)}


def default_path() -> Path:
    """The ledger file: `TRAINERGYM_LEDGER`, else `<data dir>/ledger.db`."""
    from trainergym.paths import data_dir

    return Path(os.environ.get("TRAINERGYM_LEDGER") or data_dir() / "ledger.db")


class Ledger:
    """The cost ledger in one SQLite file (`path`, default `default_path()`), shared by every
    process that opens it."""

    def __init__(self, path: Path | str | None = None):
        self.path = Path(path) if path else default_path()
        self.store = Store(self.path, _SCHEMA, "entries")

    def record(self, kind: str, usd: float, source: str, episode: str | None = None, model: str | None = None,
               prompt_tokens: int | None = None, completion_tokens: int | None = None, note: str | None = None) -> None:
        """Append one entry: `usd` dollars of `kind` (`llm`, `gpu`) known by `source`, with the
        episode, model and token counts where they apply. Committed when it returns."""
        with self.store.tx() as db:
            db.execute("INSERT INTO entries VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       (time.time(), kind, episode, model, prompt_tokens, completion_tokens, usd, source, note))

    def totals(self, episode: str | None = None, kind: str | None = None) -> dict:
        """Summed tokens, dollars and calls, over everything or one episode / kind."""
        where, args = [], []
        for column, value in (("episode", episode), ("kind", kind)):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(value)
        query = ("SELECT COUNT(*), COALESCE(SUM(prompt_tokens), 0), COALESCE(SUM(completion_tokens), 0), "
                 "COALESCE(SUM(usd), 0) FROM entries" + (" WHERE " + " AND ".join(where) if where else ""))
        with self.store.tx() as db:
            n, prompt, completion, usd = db.execute(query, args).fetchone()
        return {"entries": n, "prompt_tokens": prompt, "completion_tokens": completion, "usd": usd}

    def by_source(self) -> list[dict]:
        """Totals per (kind, source, model): what the `trainergym costs` table shows."""
        with self.store.tx() as db:
            return [dict(row) for row in db.execute(
                "SELECT kind, source, model, COUNT(*) AS entries, COALESCE(SUM(prompt_tokens), 0) AS prompt_tokens, "
                "COALESCE(SUM(completion_tokens), 0) AS completion_tokens, SUM(usd) AS usd FROM entries "
                "GROUP BY kind, source, model ORDER BY kind, source, model")]

    def rows(self, episode: str | None = None) -> list[dict]:
        """Every entry (of `episode`, if given) as a dict, oldest first."""
        with self.store.tx() as db:
            return [dict(row) for row in db.execute("SELECT * FROM entries" + (" WHERE episode = ?" if episode else "")
                                                    + " ORDER BY ts", (episode,) if episode else ())]
