from trainergym import hidden


def test_secret_seed_lives_in_the_data_dir_and_can_be_pinned(monkeypatch):
    monkeypatch.delenv("TRAINERGYM_HIDDEN_SEED")
    seed_file = hidden.data_dir() / "hidden-seed"
    assert hidden.secret_seed() == seed_file.read_text().strip()
    assert oct(seed_file.stat().st_mode & 0o777) == "0o600"
    monkeypatch.setenv("TRAINERGYM_HIDDEN_SEED", "pinned")
    assert hidden.secret_seed() == "pinned"
    a = hidden.hidden_eval("calc_chain")
    monkeypatch.setenv("TRAINERGYM_HIDDEN_SEED", "other")
    assert hidden.hidden_eval("calc_chain") != a
    monkeypatch.setenv("TRAINERGYM_HIDDEN_SEED", "pinned")
    assert hidden.hidden_eval("calc_chain") == a  # the same pin gives the same eval anywhere


def test_probe_items_are_fresh_but_stable():
    a = hidden.probe_items("calc_chain")
    assert a == hidden.probe_items("calc_chain") and len(a) == 8
    assert not {e.prompt for e in a} & {e.prompt for e in hidden.hidden_eval("calc_chain")}

