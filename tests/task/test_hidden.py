import os
import subprocess
import sys
import warnings

import pytest

from trainergym.paths import data_dir
from trainergym.task import hidden
from trainergym.task.spec import get_family

STRONG = "0123456789abcdef0123456789abcdef"  # 32 hex characters: 128 bits


def test_secret_seed_lives_in_the_data_dir_and_can_be_pinned(monkeypatch):
    monkeypatch.delenv("TRAINERGYM_HIDDEN_SEED")
    seed_file = data_dir() / "hidden-seed"
    assert hidden.secret_seed() == seed_file.read_text().strip()
    assert oct(seed_file.stat().st_mode & 0o777) == "0o600"
    monkeypatch.setenv("TRAINERGYM_HIDDEN_SEED", STRONG)
    assert hidden.secret_seed() == STRONG
    a = hidden.hidden_eval("calc_chain")
    monkeypatch.setenv("TRAINERGYM_HIDDEN_SEED", STRONG[::-1])
    assert hidden.hidden_eval("calc_chain") != a
    monkeypatch.setenv("TRAINERGYM_HIDDEN_SEED", STRONG)
    assert hidden.hidden_eval("calc_chain") == a  # the same pin gives the same eval anywhere


def test_probe_items_are_fresh_but_stable():
    a = hidden.probe_items("calc_chain")
    assert a == hidden.probe_items("calc_chain") and len(a) == 8
    assert not {e.prompt for e in a} & {e.prompt for e in hidden.hidden_eval("calc_chain")}


def test_secrets_are_created_private_in_a_private_data_dir(monkeypatch, tmp_path):
    data = tmp_path / "deep" / "data"
    monkeypatch.setenv("TRAINERGYM_DATA_DIR", str(data))
    monkeypatch.delenv("TRAINERGYM_HIDDEN_SEED")
    monkeypatch.delenv("TRAINERGYM_INSTALL_SECRET")
    old = os.umask(0o022)
    try:
        secret = hidden.install_secret()
        seed = hidden.secret_seed()
    finally:
        os.umask(old)
    assert oct(data.stat().st_mode & 0o777) == "0o700"
    for name, value, chars in (("install-secret", secret, 64), ("hidden-seed", seed, 32)):
        path = data / name
        assert oct(path.stat().st_mode & 0o777) == "0o600" and path.read_text() == value
        assert len(value) == chars and int(value, 16) >= 0
    assert hidden.install_secret() == secret and secret != seed
    assert sorted(os.listdir(data)) == ["hidden-seed", "install-secret"]  # no temporary file left behind


def test_the_install_secret_is_random_even_when_the_hidden_seed_is_pinned(monkeypatch, tmp_path):
    monkeypatch.delenv("TRAINERGYM_INSTALL_SECRET")
    keys = []
    for i in range(2):
        monkeypatch.setenv("TRAINERGYM_DATA_DIR", str(tmp_path / f"install{i}"))
        keys.append(hidden.probe_key("calc_chain", "probe"))
    assert keys[0] != keys[1]  # two installations, same pinned hidden seed


def test_other_users_of_the_data_dir_create_it_private(monkeypatch, tmp_path):
    from trainergym.infra.costs import Ledger

    data = tmp_path / "fresh"
    monkeypatch.setenv("TRAINERGYM_DATA_DIR", str(data))
    monkeypatch.delenv("TRAINERGYM_LEDGER", raising=False)
    Ledger().record("llm", 0.0, "test")
    assert oct(data.stat().st_mode & 0o777) == "0o700" and (data / "ledger.db").exists()


def test_probe_key_is_an_hmac_of_the_install_secret():
    import hashlib
    import hmac

    secret = os.environ["TRAINERGYM_INSTALL_SECRET"]
    key = hidden.probe_key("calc_chain", "probe")
    assert key == hmac.new(secret.encode(), b"probe:calc_chain", hashlib.sha256).hexdigest()
    assert len({key, hidden.probe_key("calc_chain", "other"), hidden.probe_key("ledger", "probe")}) == 3


def test_probe_items_come_from_the_install_secret_not_the_hidden_seed(monkeypatch):
    fam = get_family("calc_chain")
    items = hidden.probe_items("calc_chain")
    prompts = [e.prompt for e in items]
    with_seed = [r["prompt"] for r in fam.generate(hidden.secret_seed(), 8, namespace="probe")]
    assert prompts != with_seed and not set(prompts) & set(with_seed)
    assert prompts == [r["prompt"] for r in fam.generate(hidden.probe_key("calc_chain", "probe"), 8, namespace="probe")]
    monkeypatch.setenv("TRAINERGYM_HIDDEN_SEED", STRONG)  # the hidden seed does not move them
    assert [e.prompt for e in hidden.probe_items("calc_chain")] == prompts
    monkeypatch.setenv("TRAINERGYM_INSTALL_SECRET", "f" * 64)  # the install secret does
    assert not {e.prompt for e in hidden.probe_items("calc_chain")} & set(prompts)


def test_brute_forcing_a_guessable_hidden_seed_does_not_reproduce_probe_items(monkeypatch):
    monkeypatch.setattr(hidden, "_warned", set())
    monkeypatch.setenv("TRAINERGYM_HIDDEN_SEED", "4242")
    with pytest.warns(hidden.WeakSeedWarning):
        assert hidden.secret_seed() == "4242"
    target = hidden.probe_items("calc_chain")[0].prompt
    fam = get_family("calc_chain")
    # the attack that worked: regenerate the probe stream for every small seed (items are
    # independent of n, so the first item of each candidate stream suffices)
    hits = [s for s in range(10_000) for ns in ("probe", "hidden")
            if fam.generate(str(s), 1, namespace=ns)[0]["prompt"] == target]
    assert hits == []
    assert fam.generate("4242", 1, namespace="probe")[0]["prompt"] == fam.generate(4242, 1, namespace="probe")[0]["prompt"]


def test_a_short_pinned_seed_warns_once_and_a_32_hex_one_does_not(monkeypatch):
    monkeypatch.setattr(hidden, "_warned", set())
    monkeypatch.setenv("TRAINERGYM_HIDDEN_SEED", STRONG)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        hidden.secret_seed()
        monkeypatch.setenv("TRAINERGYM_HIDDEN_SEED", "deadbeef" * 4)
        hidden.secret_seed()
        monkeypatch.setenv("TRAINERGYM_HIDDEN_SEED", "x" * 22)  # 22 non-hex characters: 132 bits
        hidden.secret_seed()
    assert not [w for w in caught if issubclass(w.category, hidden.WeakSeedWarning)]
    for short in ("4242", "a" * 31, "trainergym-test-suite"):  # 16, 124 and 126 bits
        monkeypatch.setattr(hidden, "_warned", set())
        monkeypatch.setenv("TRAINERGYM_HIDDEN_SEED", short)
        with pytest.warns(hidden.WeakSeedWarning, match="anyone who knows or guesses it can regenerate the hidden "
                                                        "eval.*at least 32 random hex characters"):
            hidden.secret_seed()
    with warnings.catch_warnings(record=True) as caught:  # once per process
        warnings.simplefilter("always")
        hidden.secret_seed()
        hidden.hidden_eval("calc_chain", 3)
    assert not caught


def test_the_warning_reaches_stderr_in_a_fresh_process(tmp_path):
    env = {**os.environ, "TRAINERGYM_HIDDEN_SEED": "4242", "TRAINERGYM_DATA_DIR": str(tmp_path)}
    code = "from trainergym.task import hidden; hidden.hidden_eval('calc_chain', 2); hidden.hidden_eval('calc_chain', 3)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stderr.count("WeakSeedWarning") == 1 and "regenerate the hidden eval" in out.stderr
    env["TRAINERGYM_HIDDEN_SEED"] = STRONG
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert "Warning" not in out.stderr
