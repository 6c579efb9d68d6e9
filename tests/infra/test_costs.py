"""The cost ledger (trainergym.infra.costs): prices per million tokens, the packaged price table
and its overrides, and the ledger's rows and totals (per episode, per kind, per source), safe
under concurrent writers. The LLM agent's metering against a fake endpoint is in
tests/agents/test_llm.py; GPU bills reaching the ledger in tests/infra/test_pool.py."""

import multiprocessing as mp
import threading
import tomllib

import pytest

from trainergym.infra.costs import Ledger, Price, default_path, load_prices
from trainergym.paths import PACKAGE_DATA


@pytest.fixture
def no_env_prices(monkeypatch):
    monkeypatch.delenv("TRAINERGYM_PRICES", raising=False)


@pytest.fixture
def ledger(tmp_path):
    return Ledger(tmp_path / "ledger.db")


# --- prices ----------------------------------------------------------------------------------
def test_price_is_per_million_tokens():
    p = Price(input=2.0, output=8.0)
    assert p.cost(1_000_000, 0) == 2.0 and p.cost(0, 1_000_000) == 8.0
    assert p.cost(1500, 250) == pytest.approx((1500 * 2.0 + 250 * 8.0) / 1e6) == pytest.approx(0.005)
    assert p.cost(0, 0) == 0.0
    with pytest.raises(AttributeError):
        p.input = 0.0  # frozen


def test_the_packaged_table(no_env_prices):
    prices = load_prices()
    assert prices["openai/gpt-4.1"] == Price(2.0, 8.0)
    assert prices["anthropic/claude-sonnet-4"] == Price(3.0, 15.0)
    raw = tomllib.loads((PACKAGE_DATA / "prices.toml").read_text())
    assert set(prices) == set(raw) and len(prices) >= 5
    for model, price in prices.items():
        assert "/" in model and 0 < price.input <= price.output, model  # completions never cost less


def test_an_override_adds_and_replaces_whole_entries(tmp_path, no_env_prices):
    path = tmp_path / "prices.toml"
    path.write_text('version = 2\n["fake-model"]\ninput = 1\noutput = 3\n["openai/gpt-4.1"]\ninput = 0.5\noutput = 0.5\n')
    prices = load_prices(path)
    assert prices["fake-model"] == Price(1.0, 3.0) and isinstance(prices["fake-model"].input, float)
    assert prices["openai/gpt-4.1"] == Price(0.5, 0.5)
    assert prices["openai/gpt-4o-mini"] == load_prices()["openai/gpt-4o-mini"]  # the rest stay
    assert "version" not in prices  # top-level scalars are not models


def test_an_override_entry_replaces_the_packaged_one_so_it_needs_both_prices(tmp_path, no_env_prices):
    path = tmp_path / "prices.toml"
    path.write_text('["openai/gpt-4.1"]\ninput = 0.5\n')  # merged by model, not by field
    with pytest.raises(KeyError, match="output"):
        load_prices(path)


def test_trainergym_prices_is_the_default_override_and_an_argument_wins(tmp_path, monkeypatch):
    env_file, arg_file = tmp_path / "env.toml", tmp_path / "arg.toml"
    env_file.write_text('["m"]\ninput = 1\noutput = 1\n')
    arg_file.write_text('["m"]\ninput = 9\noutput = 9\n')
    monkeypatch.setenv("TRAINERGYM_PRICES", str(env_file))
    assert load_prices()["m"] == Price(1.0, 1.0)
    assert load_prices(arg_file)["m"] == Price(9.0, 9.0)
    monkeypatch.setenv("TRAINERGYM_PRICES", "")  # set but empty: no override
    assert "m" not in load_prices()


def test_a_missing_or_broken_override_is_an_error(tmp_path, no_env_prices):
    with pytest.raises(FileNotFoundError):
        load_prices(tmp_path / "missing.toml")
    (tmp_path / "bad.toml").write_text('["m"\ninput = 1\n')
    with pytest.raises(tomllib.TOMLDecodeError):
        load_prices(tmp_path / "bad.toml")
    (tmp_path / "text.toml").write_text('["m"]\ninput = "cheap"\noutput = 1\n')
    with pytest.raises(ValueError):
        load_prices(tmp_path / "text.toml")


# --- where the ledger lives ------------------------------------------------------------------
def test_the_ledger_path(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINERGYM_LEDGER", str(tmp_path / "elsewhere" / "l.db"))
    assert default_path() == tmp_path / "elsewhere" / "l.db"
    assert Ledger().path == tmp_path / "elsewhere" / "l.db" and (tmp_path / "elsewhere" / "l.db").is_file()
    monkeypatch.setenv("TRAINERGYM_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("TRAINERGYM_LEDGER")
    assert default_path() == tmp_path / "data" / "ledger.db"
    assert Ledger(tmp_path / "given.db").path == tmp_path / "given.db"  # an explicit path wins


# --- rows and totals ---------------------------------------------------------------------------
def fill(ledger):
    ledger.record("llm", 0.01, "price table", episode="e1", model="m1", prompt_tokens=100, completion_tokens=10)
    ledger.record("llm", 0.02, "reported", episode="e1", model="m1", prompt_tokens=200, completion_tokens=20)
    ledger.record("llm", 0.04, "price table", episode="e2", model="m2", prompt_tokens=400, completion_tokens=40)
    ledger.record("gpu", 1.5, "billed rate", note="pod sim0000001")  # no episode, no tokens
    ledger.record("gpu", 0.25, "surrogate", episode="e1")


def test_an_empty_ledger_totals_zero(ledger):
    assert ledger.totals() == {"entries": 0, "prompt_tokens": 0, "completion_tokens": 0, "usd": 0}
    assert ledger.by_source() == [] and ledger.rows() == []


def test_totals_over_everything_an_episode_a_kind_or_both(ledger):
    fill(ledger)
    everything = ledger.totals()
    assert everything["entries"] == 5 and (everything["prompt_tokens"], everything["completion_tokens"]) == (700, 70)
    assert everything["usd"] == pytest.approx(1.82)
    e1 = ledger.totals(episode="e1")
    assert (e1["entries"], e1["prompt_tokens"], e1["completion_tokens"]) == (3, 300, 30)
    assert e1["usd"] == pytest.approx(0.28)
    assert ledger.totals(kind="gpu")["usd"] == pytest.approx(1.75) and ledger.totals(kind="gpu")["prompt_tokens"] == 0
    both = ledger.totals(episode="e1", kind="llm")
    assert (both["entries"], both["usd"]) == (2, pytest.approx(0.03))
    assert ledger.totals(episode="nobody") == {"entries": 0, "prompt_tokens": 0, "completion_tokens": 0, "usd": 0}


def test_rows_keep_everything_recorded_in_order(ledger):
    fill(ledger)
    rows = ledger.rows()
    assert [r["usd"] for r in rows] == [0.01, 0.02, 0.04, 1.5, 0.25]
    assert [r["ts"] for r in rows] == sorted(r["ts"] for r in rows)
    assert set(rows[0]) == {"ts", "kind", "episode", "model", "prompt_tokens", "completion_tokens", "usd", "source", "note"}
    gpu = rows[3]
    assert (gpu["kind"], gpu["episode"], gpu["prompt_tokens"], gpu["note"]) == ("gpu", None, None, "pod sim0000001")
    assert [r["source"] for r in ledger.rows("e1")] == ["price table", "reported", "surrogate"]
    assert ledger.rows("nobody") == []


def test_by_source_groups_kind_source_and_model(ledger):
    fill(ledger)
    ledger.record("llm", 0.03, "price table", episode="e3", model="m1", prompt_tokens=300, completion_tokens=30)
    table = ledger.by_source()
    assert [(r["kind"], r["source"], r["model"]) for r in table] == [
        ("gpu", "billed rate", None), ("gpu", "surrogate", None), ("llm", "price table", "m1"),
        ("llm", "price table", "m2"), ("llm", "reported", "m1")]
    m1 = table[2]
    assert (m1["entries"], m1["prompt_tokens"], m1["completion_tokens"]) == (2, 400, 40)
    assert m1["usd"] == pytest.approx(0.04)
    assert table[0]["prompt_tokens"] == 0  # rows without tokens sum to 0, not None


def test_a_second_ledger_on_the_same_file_sees_the_rows(ledger):
    fill(ledger)
    assert Ledger(ledger.path).totals() == ledger.totals()


def test_record_is_one_committed_transaction(ledger):
    """A row that cannot be stored (usd is NOT NULL) leaves nothing behind, and the ledger goes on."""
    import sqlite3

    with pytest.raises(sqlite3.IntegrityError):
        ledger.record("llm", None, "price table")
    ledger.record("llm", 0.5, "price table")
    assert ledger.totals()["entries"] == 1


# --- concurrency (moved from tests/agents/test_llm.py) ---------------------------------------
def _write_many(path, worker, n=200, ledger=None):
    ledger = ledger or Ledger(path)
    for _ in range(n):
        ledger.record("llm", 0.001, "price table", episode=f"e{worker}", model="m", prompt_tokens=10, completion_tokens=1)


def test_the_ledger_is_safe_under_concurrent_writers(tmp_path):
    path = tmp_path / "ledger.db"
    Ledger(path)
    procs = [mp.get_context("spawn").Process(target=_write_many, args=(str(path), i)) for i in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0] * 4
    totals = Ledger(path).totals()
    assert totals["entries"] == 4 * 200 and totals["prompt_tokens"] == 4 * 200 * 10
    assert totals["usd"] == pytest.approx(4 * 200 * 0.001)
    assert all(Ledger(path).totals(episode=f"e{i}")["entries"] == 200 for i in range(4))


def test_threads_sharing_one_ledger(ledger):
    threads = [threading.Thread(target=_write_many, args=(None, f"t{i}", 100, ledger)) for i in range(4)]
    threads += [threading.Thread(target=lambda: [ledger.totals() for _ in range(50)])]  # readers meanwhile
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert ledger.totals()["entries"] == 400 and ledger.totals(episode="et2")["entries"] == 100

