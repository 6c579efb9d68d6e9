"""The hidden-eval scorer plays the family's own taskset against a model server (a fake
OpenAI-compatible one here; vLLM on a GPU host) and scores with the family's own rewards."""

import json
import sys

import pytest
from tests.fakes.openai_server import FakeOpenAI

from trainergym.task import hidden
from trainergym.host import scorer, scorer_install
from trainergym.task.spec import get_family


@pytest.fixture(scope="module")
def record(tmp_path_factory):
    """The family packages' hashes as this venv has them (what setup records in the scorer's)."""
    path = tmp_path_factory.mktemp("scorer") / scorer_install.RECORD_NAME
    scorer_install.record(path)
    return path


def _items(tmp_path, family, n=6):
    path = tmp_path / f"{family}.jsonl"
    path.write_text("".join(json.dumps(ex.model_dump()) + "\n" for ex in hidden.hidden_eval(family, n)))
    return path


def _tool_turns(body):
    return [m for m in body["messages"] if m["role"] == "tool"]


def calc_echo(body):
    """Plays the reference call sequence and answers with the last tool result it was given,
    so it scores only if the scorer really ran the family's tools."""
    user = next(m["content"] for m in body["messages"] if m["role"] == "user")
    calls = get_family("calc_chain").solve({"prompt": user})["calls"]
    done = _tool_turns(body)
    if len(done) < len(calls):
        c = calls[len(done)]
        return {"content": "", "tool_calls": [{"name": c["tool"], "arguments": json.dumps(c["arguments"])}]}
    return {"content": f"Answer: {done[-1]['content']}"}


def ledger_echo(body):
    """Posts the story's operations through the tools, asks the balance, answers with it: the
    balance is right only if the tools started from the item's own world."""
    from trainergym_ledger import items

    user = next(m["content"] for m in body["messages"] if m["role"] == "user")
    story = items.parse(user)
    steps = [*story.ops, ("balance", {"account": story.query})]
    done = _tool_turns(body)
    if len(done) < len(steps):
        kind, args = steps[len(done)]
        return {"content": "", "tool_calls": [{"name": f"ledger_{kind}", "arguments": json.dumps(args)}]}
    return {"content": f"Answer: {done[-1]['content'].rsplit(' ', 1)[1]}"}


@pytest.mark.parametrize("family,policy", [("calc_chain", calc_echo), ("ledger", ledger_echo)])
def test_a_model_that_uses_the_tools_right_scores_one(tmp_path, family, policy, record):
    with FakeOpenAI(policy, faults=["429", "500"]) as fake:
        rc = scorer.main(["--family", family, "--weights", "fake-model", "--items", str(_items(tmp_path, family)),
                          "--out", str(tmp_path / "score.json"), "--base-url", fake.url, "--record", str(record)])
    assert rc == 0
    out = json.loads((tmp_path / "score.json").read_text())
    assert out == {"score": 1.0, "n": 6}


def test_wrong_answers_score_zero_and_unknown_tools_are_errors_the_model_sees(tmp_path):
    seen = []

    def confused(body):
        tools = _tool_turns(body)
        if not tools:
            return {"content": "", "tool_calls": [{"name": "calc_pow", "arguments": "{}"}]}
        seen.append(tools[-1]["content"])
        return {"content": "Answer: 0"}

    with FakeOpenAI(confused) as fake:
        import asyncio

        result = asyncio.run(scorer.score("calc_chain", _items(tmp_path, "calc_chain", 3), fake.url, "fake-model"))
    assert result == {"score": 0.0, "n": 3}
    assert seen and all(s.startswith("error: unknown tool") for s in seen)


def test_the_model_server_is_started_and_killed(tmp_path):
    """`vllm_server` runs the serving command, waits for /v1/models and kills its group."""
    stub = tmp_path / "serve.py"
    stub.write_text(
        "import sys, http.server, json\n"
        "port = int(sys.argv[sys.argv.index('--port') + 1])\n"
        "class H(http.server.BaseHTTPRequestHandler):\n"
        "    def log_message(self, *a): pass\n"
        "    def do_GET(self):\n"
        "        self.send_response(200); self.end_headers(); self.wfile.write(json.dumps({'data': []}).encode())\n"
        "http.server.HTTPServer(('127.0.0.1', port), H).serve_forever()\n")
    command = [sys.executable, str(stub), "{model}", "--port", "{port}"]
    with scorer.vllm_server("w", command, ready_timeout=30) as url:
        import httpx

        assert httpx.get(f"{url}/models").status_code == 200
    with pytest.raises(Exception):
        httpx.get(f"{url}/models", timeout=1)


def test_a_server_that_dies_before_serving_is_an_error(tmp_path):
    with pytest.raises(RuntimeError, match="exited with status 3"):
        with scorer.vllm_server("w", [sys.executable, "-c", "raise SystemExit(3)"], ready_timeout=30):
            pass


def test_what_vllm_serves_depends_on_the_weights(tmp_path):
    assert scorer.serve_args("Qwen/Qwen3-1.7B", "Qwen/Qwen3-1.7B") == ("Qwen/Qwen3-1.7B", [])
    lora = tmp_path / "lora"
    lora.mkdir()
    (lora / "adapter_config.json").write_text("{}")
    model, extra = scorer.serve_args(str(lora), "Qwen/Qwen3-1.7B")
    assert model == "Qwen/Qwen3-1.7B" and f"scored={lora}" in extra and "--enable-lora" in extra
    with pytest.raises(ValueError, match="LoRA adapter"):
        scorer.serve_args(str(lora), None)
    bare = tmp_path / "step_3"
    bare.mkdir()
    (bare / "model.safetensors").write_bytes(b"")
    assert scorer.serve_args(str(bare), "Qwen/Qwen3-1.7B") == (
        str(bare), ["--tokenizer", "Qwen/Qwen3-1.7B", "--hf-config-path", "Qwen/Qwen3-1.7B"])
    (bare / "config.json").write_text("{}")
    (bare / "tokenizer_config.json").write_text("{}")  # training wrote it: never used
    assert scorer.serve_args(str(bare), "Qwen/Qwen3-1.7B") == (str(bare), ["--tokenizer", "Qwen/Qwen3-1.7B"])
    with pytest.raises(ValueError, match="base-model"):
        scorer.serve_args(str(bare), None)


def test_only_weights_leave_a_broadcast(tmp_path):
    """Training wrote the broadcast: its tokenizer, chat template and generation config, and any
    link out of it, stay behind; a hub id passes as it is."""
    broadcast, dest = tmp_path / "step_3", tmp_path / "served"
    broadcast.mkdir()
    for name in ("model-00001-of-00002.safetensors", "model.safetensors.index.json", "config.json",
                 "adapter_config.json", "tokenizer_config.json", "chat_template.jinja", "tokenizer.json",
                 "generation_config.json"):
        (broadcast / name).write_text(name)
    (tmp_path / "secret").write_text("the hidden seed")
    (broadcast / "model-00002-of-00002.safetensors").symlink_to(tmp_path / "secret")
    assert scorer.trusted_weights(str(broadcast), dest) == str(dest)
    assert sorted(p.name for p in dest.iterdir()) == [
        "adapter_config.json", "config.json", "model-00001-of-00002.safetensors", "model.safetensors.index.json"]
    assert (dest / "config.json").read_text() == "config.json"
    assert scorer.trusted_weights("Qwen/Qwen3-1.7B", dest) == "Qwen/Qwen3-1.7B"


def test_the_scorer_checks_its_record_before_scoring(tmp_path, record):
    """A recorded hash that no longer matches, a package found elsewhere than recorded, a family
    missing from the record, or no record: each refuses before a family is imported, with the
    reason in the output file and exit status 3."""
    items = _items(tmp_path, "calc_chain", 2)
    good = json.loads(record.read_text())
    entry = good["packages"]["trainergym_calc_chain"]
    cases = {
        "differs from its recorded hash": {**good["packages"], "trainergym_calc_chain": {**entry, "sha256": "0" * 64}},
        "would be imported from": {**good["packages"], "trainergym_calc_chain": {**entry, "locations": ["/elsewhere"]}},
        "installed after the scorer's record": {k: v for k, v in good["packages"].items() if k != "trainergym_kit"},
    }
    for why, packages in cases.items():
        bad = tmp_path / "record.json"
        bad.write_text(json.dumps({"packages": packages}))
        out = tmp_path / "score.json"
        rc = scorer.main(["--family", "calc_chain", "--weights", "m", "--items", str(items), "--out", str(out),
                          "--base-url", "http://127.0.0.1:9/v1", "--record", str(bad)])
        assert rc == 3 and why in json.loads(out.read_text())["refused"], why
    rc = scorer.main(["--family", "calc_chain", "--weights", "m", "--items", str(items), "--out", str(out),
                      "--base-url", "http://127.0.0.1:9/v1", "--record", str(tmp_path / "none.json")])
    assert rc == 3 and "no readable record" in json.loads(out.read_text())["refused"]
    assert set(good["packages"]) >= {"trainergym_calc_chain", "trainergym_kit", "trainergym_ledger"}
