"""Red-team attempts on the researcher-facing surfaces added most recently: measured baselines
(`trainergym baselines`, the installation's HMAC'd `<data dir>/baselines.toml` that `best_pre`
prefers), crash accounting (episodes whose model endpoint failed are counted apart from the agent's
failures in batch / eval-agent / compare / report), and the run records a researcher reads
(`trainergym show [--html]`, the batch table).

The attacker is the agent: the text and tool calls its model emits, the files it writes, and the
job code it submits (which runs in the probe's sandbox). Each attempt goes only through what the
agent controls; the harness (the env, `run_many`, the LLM agent, the CLI) is used as shipped.

Each test asserts the secure behaviour. Of the 15, 8 broke it when written (a stale measured row
as the bar; three ways to get a bad episode counted as crashed; terminal escapes, markup and
unreadable arguments through `show` and the batch table; a speed bonus for training nothing);
they were strict xfails until fixed, and now all pass. Offline: model endpoints are fakes on
127.0.0.1 that refuse conversations as real servers do (llama.cpp's 500 on malformed tool-call
history, OpenRouter's 403 on moderated input). One probe runs (~5-20 s); the rest is fast.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import json
import secrets
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.fakes.openai_server import FakeOpenAI
from tests.marks import import_extra
from trainergym.agents.reference import reference_job_files
from trainergym.backends import make_backend
from trainergym.env.core import AsyncTrainerEnv
from trainergym.paths import data_dir
from trainergym.task import baselines

pytestmark = pytest.mark.slow  # the second tier (docs/testing.md)

FAMILY = "calc_chain"
INSTALL_SECRET_PREFIX = "1757a11c0ffee5ec7e70f7e57ea1e0d0"  # tests/conftest.py pins both secrets
HIDDEN_SEED = "7e57c0ffee5eed0f0a1e09e05c17e00d"


# --- helpers ------------------------------------------------------------------------------------
def _play(actions: list, runs_dir: Path | None = None, end: str | None = "stop") -> tuple[AsyncTrainerEnv, list]:
    """One mock episode of `actions` (each one env.step), ended with `end` if still open."""

    async def go():
        env = AsyncTrainerEnv(backend=make_backend("mock"), runs_dir=runs_dir)
        await env.reset(seed=0, options={"family": FAMILY})
        steps = []
        for action in actions:
            steps.append(await env.step(action))
            if env.episode.done:
                break
        if end and not env.episode.done:
            await env.end(end)
        return env, steps

    env, steps = asyncio.run(go())
    env.close()
    return env, steps


def _endpoint(script: list[tuple[str, str]], refuse=lambda body: None) -> FakeOpenAI:
    """An OpenAI-compatible chat endpoint on 127.0.0.1 that plays `script` (one (tool, arguments
    text) per assistant turn, the last repeated) and answers with `refuse(body)` -> (status,
    payload) instead when that returns one: how a real server refuses some conversations."""

    def policy(body):
        refused = refuse(body)
        if refused:
            return {"refuse": refused}
        turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
        name, args = script[min(turn, len(script) - 1)]
        return {"tool_calls": [{"name": name, "arguments": args}]}

    return FakeOpenAI(policy)


def _llm_batch(url: str, tmp_path: Path):
    """One episode of the shipped LLM agent against `url`, through `run_many` (what `batch` and
    `eval-agent` run); returns its summary and the held-out table."""
    from openai import AsyncOpenAI

    from trainergym.agents.batch import held_out_table, run_many
    from trainergym.agents.llm import LLMAgent, LLMConfig
    from trainergym.infra.costs import Ledger

    ledger = Ledger(tmp_path / "ledger.db")

    def make():
        cfg = LLMConfig(model="fake-model", base_url=url, api_key_env="FAKE_KEY", max_retries=1, timeout=10.0)
        return LLMAgent(cfg, ledger, client=AsyncOpenAI(base_url=url, api_key="k", max_retries=1, timeout=10.0))

    summaries = asyncio.run(run_many(make, make_backend("mock"), 1, {"family": FAMILY}, concurrency=1,
                                     runs_dir=tmp_path / "runs"))
    return summaries[0], held_out_table(summaries)


def _has_malformed_tool_call(body: dict) -> bool:
    for m in body.get("messages", []):
        for call in m.get("tool_calls") or []:
            try:
                json.loads(call["function"]["arguments"] or "{}")
            except json.JSONDecodeError:
                return True
    return False


# A job that goes nowhere after the attack: submit the untouched template until the attempts run out
# (job.toml parses, taskset/ is missing: refused before any sandbox starts).
SUBMIT = ("submit_job", "{}")


# === 1. Measured baselines ======================================================================
def test_job_code_in_the_probe_cannot_read_the_secrets_nor_forge_the_measured_file(tmp_path, monkeypatch):
    """Job code runs at import in the probe's sandbox: it looks for the installation secret (which
    keys the measured file's MAC) and the hidden seed in its environment, the data directory and
    PID 1's environment, tries to write a forged `baselines.toml` (a low calc_chain bar) into the
    data directory, and sends what it found back to the agent in its import error, which the probe
    report shows. Refused: nothing of the secrets reaches the agent, nothing lands in the data
    directory, best_pre does not move."""
    monkeypatch.setenv("TRAINERGYM_DATA_DIR", str(tmp_path / "data"))
    data = data_dir()
    canary = secrets.token_hex(16)
    (data / "canary-secret").write_text(canary)
    before = baselines.best_pre(FAMILY)
    forged = ('version = 1\\nmac = "00"\\n[[baseline]]\\nfamily = "calc_chain"\\nmodel = "Qwen/Qwen3-1.7B"\\n'
              'score = 0.01\\nn = 200\\nsource = "measured"\\ndate = "x"\\nstack = "x"\\nbackend = "local"\\n')
    import platformdirs

    default = platformdirs.user_data_dir("trainergym")  # the real installation's, outside /tmp
    snoop = f'''
import os
DATA = {str(data)!r}
loot = []
for p in [{default!r} + "/install-secret", {default!r} + "/hidden-seed"]:
    try:
        open(p, "rb").close()
        loot.append(p + " READABLE")  # never its content: the test must not handle a real secret
    except Exception as e:
        loot.append(p + "!" + type(e).__name__)
for k, v in sorted(os.environ.items()):
    loot.append(f"ENV {{k}}={{v}}")
for p in [DATA + "/canary-secret", DATA + "/install-secret", DATA + "/hidden-seed", "/proc/1/environ",
          "/proc/self/environ"]:
    try:
        with open(p, "rb") as f:
            loot.append(p + "=" + f.read(4000).decode("utf-8", "replace"))
    except Exception as e:
        loot.append(p + "!" + type(e).__name__)
try:
    with open(DATA + "/baselines.toml", "w") as f:
        f.write({forged!r})
    os.chmod(DATA + "/baselines.toml", 0o600)
    loot.append("WROTE")
except Exception as e:
    loot.append("nowrite " + type(e).__name__)
raise RuntimeError("LOOT " + " | ".join(loot))
'''
    files = reference_job_files(FAMILY)
    files["taskset/__init__.py"] = snoop + files["taskset/__init__.py"]
    actions = [{"name": "write_file", "arguments": {"path": p, "content": c}} for p, c in files.items()]
    env, steps = _play(actions + [{"name": "submit_job", "arguments": {}}])
    report = steps[-1][0]
    assert "LOOT" in report  # the channel back to the agent works: the attempt was real
    for secret in (canary, INSTALL_SECRET_PREFIX, HIDDEN_SEED):
        assert secret not in report
    assert "READABLE" not in report  # homes (and the default data directory in them) are masked
    assert not (data / "baselines.toml").exists()
    assert baselines.best_pre(FAMILY) == before


def test_a_row_measured_on_another_stack_is_not_the_bar(tmp_path, monkeypatch):
    """A measured row records the stack that scored it, but nothing compares it with the stack the
    jobs' pre and post scores now come from: after an upgrade (or with an older release's file) a
    row from another scorer keeps paying rewards against its figure. Here the other stack scored
    the strong model low, so every calc_chain episode's uplift is measured against 0.52 (the
    0.6B row, now the best), not the reported 0.742."""
    from trainergym.backends.measure import short_stack

    monkeypatch.setenv("TRAINERGYM_DATA_DIR", str(tmp_path / "data"))
    other = "prime-rl 0000000, verifiers 0.0.1 (0000000), python 3.10"
    assert other != short_stack()
    baselines.write_measured([baselines.Baseline(
        family=FAMILY, model="Qwen/Qwen3-1.7B", score=0.30, n=200, source="measured",
        date=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), stack=other, backend="local")])
    assert baselines.best_pre(FAMILY).score == 0.742  # the bar is not moved by another stack's measurement
    assert baselines.score(FAMILY, "Qwen/Qwen3-1.7B").stack in (None, short_stack())


# === 2. Crash accounting ========================================================================
def test_malformed_tool_call_history_that_a_server_500s_on_is_not_a_crash(tmp_path):
    """llama.cpp's server answers HTTP 500 ("Failed to parse tool call arguments as JSON") to a
    conversation whose earlier assistant message holds tool-call arguments that are not JSON, and
    repeats it on every retry. A model that emits one such call (cut-off JSON) after a bad start
    thus gets its episode counted as crashed: excluded from mean reward, validated share and
    worst episode, in batch, eval-agent, compare and report."""
    refuse = lambda body: (500, {"error": {"code": 500, "message": "Failed to parse tool call arguments as JSON"}}) \
        if _has_malformed_tool_call(body) else None  # noqa: E731
    with _endpoint([("read_file", '{"path": "INSTRUCTIONS.md"'), SUBMIT], refuse) as ep:
        summary, table = _llm_batch(ep.url, tmp_path)
    assert summary.error is None, summary.error  # the agent's own doing: scored, not set apart
    assert table["crashed"] == 0 and table["mean_reward"] is not None


def test_a_conversation_refused_by_moderation_is_the_agents_failure(tmp_path):
    """The LLM agent's default endpoint is OpenRouter, whose documented 403 means "your chosen
    model requires moderation and your input was flagged". The agent controls its input: it
    writes flagged text to a file (and reads it back); the next request is refused with 403,
    which `act` treats as an endpoint failure, so a doomed episode leaves the agent's record."""
    def refuse(body):
        agent_text = json.dumps(body["messages"][2:])
        if "FLAGGED" in agent_text:
            return 403, {"error": {"code": 403, "message": "Input was flagged by moderation",
                                   "metadata": {"reasons": ["harassment"], "flagged_input": "FLAGGED ..."}}}
        return None

    script = [("write_file", json.dumps({"path": "notes.md", "content": "FLAGGED text"})), SUBMIT]
    with _endpoint(script, refuse) as ep:
        summary, table = _llm_batch(ep.url, tmp_path)
    assert summary.error is None, summary.error
    assert table["crashed"] == 0


def test_deeply_nested_dict_arguments_do_not_make_the_episode_a_crash(tmp_path):
    """Agents that act with dicts (the Agent protocol allows them; the OpenEnv and TRL faces hand
    over JSON-decoded or keyword arguments) can nest their arguments 1,000 deep. parse_action
    refuses such JSON text, but a dict's arguments go straight to validate_args, whose recursive
    UTF-8 scan overflows the stack; the env raises instead of answering with an error, and the
    batch sets the episode apart as crashed (reward NaN, out of every mean)."""
    from trainergym.agents.batch import held_out_table, run_many

    nested: list = []
    for _ in range(1200):
        nested = [nested]

    class Nester:
        def reset(self, observation, info):
            self.turn = 0

        def act(self, observation, info):
            self.turn += 1
            return {"name": "read_file", "arguments": {"path": nested}} if self.turn == 1 else \
                {"name": "submit_job", "arguments": {}}

    summaries = asyncio.run(run_many(Nester, make_backend("mock"), 1, {"family": FAMILY}, concurrency=1,
                                     runs_dir=tmp_path / "runs"))
    assert summaries[0].error is None, summaries[0].error
    assert held_out_table(summaries)["crashed"] == 0


def test_deeply_nested_json_text_is_answered_not_raised():
    """The same nesting sent as JSON text (what a model's tool call is) is refused by the parser
    with an error observation at every depth around the recursion limit: the episode goes on."""
    actions = []
    for depth in (900, 975, 980, 990, 1000, 3000):
        args = '{"path": ' + "[" * depth + "]" * depth + "}"
        actions.append({"role": "assistant", "content": "", "tool_calls": [
            {"id": f"c{depth}", "type": "function", "function": {"name": "read_file", "arguments": args}}]})
    env, steps = _play(actions)
    assert len(steps) == len(actions)
    assert all(not info["ok"] for _, _, _, _, info in steps)


# === 3. Run records and what a researcher reads ==================================================
ESCAPES = "\x1b]52;c;cHduZWQ=\x1b\\\x1b[2A\x1b[2Ktotal: 0.999\x1b[8m"  # clipboard write, cursor up, erase, conceal


@pytest.fixture
def escaped_run(tmp_path):
    """A saved run in which the agent wrote terminal control sequences and markup to a file and
    read it back (the tool result is its content)."""
    content = ESCAPES + "<script>alert(1)</script>[bold red]markup[/]"
    env, _ = _play([{"name": "write_file", "arguments": {"path": "notes.md", "content": content}},
                    {"name": "read_file", "arguments": {"path": "notes.md"}}], runs_dir=tmp_path / "runs")
    return env.run_path


def test_show_does_not_pass_the_agents_terminal_escapes_through(escaped_run):
    from trainergym.cli import app

    out = CliRunner().invoke(app, ["show", str(escaped_run)])
    assert out.exit_code == 0, out.output
    assert "notes.md" in out.output
    assert "\x1b" not in out.output


def test_show_html_escapes_the_agents_markup(escaped_run, tmp_path):
    """The HTML page of a run shows the agent's `<script>` and Rich-looking markup as text."""
    from trainergym.cli import app

    page = tmp_path / "run.html"
    out = CliRunner().invoke(app, ["show", str(escaped_run), "--html", str(page)])
    assert out.exit_code == 0, out.output
    html = page.read_text()
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "[bold red]markup[/]" in html  # shown literally, not interpreted


@pytest.mark.parametrize("args", ['{"path": ' + "[" * 5000 + "]" * 5000 + "}", '{"path": ' + "7" * 5000 + "}"],
                         ids=["nested", "long-int"])
def test_show_renders_a_run_whatever_arguments_the_agent_sent(tmp_path, args):
    """The env answers such a call with an error observation, and saves it; reading the run back
    must not fail, or a researcher cannot see what the agent did (nor the reward section, printed
    after the transcript)."""
    from trainergym.cli import app

    call = {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": args}}]}
    env, steps = _play([call], runs_dir=tmp_path / "runs")
    assert not steps[0][4]["ok"]  # the env refused it and went on
    out = CliRunner().invoke(app, ["show", str(env.run_path)])
    assert out.exception is None or isinstance(out.exception, SystemExit), repr(out.exception)
    assert "the reward" in out.output


def test_batch_table_shows_the_agents_text_literally(tmp_path, monkeypatch):
    """OpenRouter's moderation error carries `metadata.flagged_input` (the agent's own text), and the
    openai SDK puts the error body into the exception's message, which becomes the episode's crash
    reason. The batch table prints it as Rich markup: `[/]` closes nothing and the command dies
    after the run with a traceback (a `[link=...]` would make a clickable link)."""
    from trainergym.cli import app

    def refuse(body):
        agent_text = json.dumps(body["messages"][2:])
        if "FLAGGED" in agent_text:
            return 403, {"error": {"code": 403, "message": "Input was flagged by moderation",
                                   "metadata": {"reasons": ["harassment"], "flagged_input": "FLAGGED [/] [link=x]"}}}
        return None

    monkeypatch.setenv("FAKE_KEY", "k")
    script = [("write_file", json.dumps({"path": "notes.md", "content": "FLAGGED [/] [link=x]"})), SUBMIT]
    with _endpoint(script, refuse) as ep:
        out = CliRunner().invoke(app, ["batch", "--agent", "llm", "--model", "fake-model", "--base-url", ep.url,
                                       "--api-key-env", "FAKE_KEY", "--n", "1", "--concurrency", "1",
                                       "--runs-dir", str(tmp_path / "runs")])
    assert out.exception is None or isinstance(out.exception, SystemExit), repr(out.exception)
    assert "[/]" in out.output  # the agent's text, shown as text


def test_a_task_id_cannot_put_the_run_outside_runs(tmp_path):
    """A task file's id names the run's folder; `..`, slashes and NULs are folded away, so a run is
    always written inside runs/."""
    from trainergym.task.spec import load_task

    spec = load_task(FAMILY).model_copy(update={"id": "../../../escape/..\\x"})

    async def go():
        env = AsyncTrainerEnv(backend=make_backend("mock"), runs_dir=tmp_path / "runs")
        await env.reset(seed=0, options={"task": spec})
        await env.end("stop")
        env.close()
        return env

    env = asyncio.run(go())
    assert env.run_path.parent == tmp_path / "runs" and env.run_path.is_dir()
    assert not (tmp_path / "escape").exists()


# === 4. The reward path ==========================================================================
def test_a_narrower_task_does_not_lower_the_bar():
    """A task (a reset option's TaskSpec or task file) that allows only the weaker base model is
    still paid against the family's best untrained model: narrowing the task does not lower best_pre
    to the 0.6B's 0.52."""
    from trainergym.task.spec import load_task

    base = load_task(FAMILY)
    spec = base.model_copy(update={"id": "narrow", "bounds": base.bounds.model_copy(
        update={"base_models": ["Qwen/Qwen3-0.6B"]})})

    async def go():
        env = AsyncTrainerEnv(backend=make_backend("mock"))
        await env.reset(seed=0, options={"task": spec})
        obs, *_ = await env.step({"name": "get_baseline_scores", "arguments": {}})
        info = await env.end("stop")
        env.close()
        return json.loads(obs), info

    shown, info = asyncio.run(go())
    assert shown["best_pre"] == info["reward_breakdown"]["best_pre"] == 0.742


def test_the_speed_bonus_does_not_pay_a_job_that_teaches_nothing():
    """The reference calc_chain job's own files with max_steps = 1 and lr = 1e-12 (a valid job that
    trains nothing: post == best_pre on the noise-free surrogate). It still earns validation and
    0.25 * post, and on top of them the largest speed bonus there is, for not training: 0.51 in
    all against the reference job's 0.59 (reward_noise off). The per-episode eval noise (sd ~0.05
    of total) is of the size of what teaching adds."""
    files = reference_job_files(FAMILY)
    files["job.toml"] = (files["job.toml"].replace("max_steps = 60", "max_steps = 1").replace("lr = 3e-6", "lr = 1e-12")
                         .replace("warmup_steps = 10", "warmup_steps = 0"))

    async def go():
        env = AsyncTrainerEnv(backend=make_backend("mock"), reward_noise=False)
        await env.reset(seed=0, options={"family": FAMILY})
        for path, content in files.items():
            await env.step({"name": "write_file", "arguments": {"path": path, "content": content}})
        *_, info = await env.step({"name": "submit_job", "arguments": {}})
        env.close()
        return info["reward_breakdown"]

    r = asyncio.run(go())
    assert r["validated"] and r["post"] is not None and r["uplift"] <= 0.0  # a job that taught nothing
    assert r["speed"] == 0.0


def test_report_html_shows_a_crash_reason_quoting_the_agent_as_text(tmp_path):
    """A crash reason can quote the agent's text (OpenRouter's moderation error carries its flagged
    input); `trainergym report` puts it in the decomposition table escaped, never as markup."""
    import_extra("matplotlib", "trainergym report", "report")
    from trainergym.agents.batch import write_summary
    from trainergym.agents.report import report

    def refuse(body):
        if "FLAGGED" in json.dumps(body["messages"][2:]):
            return 403, {"error": {"code": 403, "message": "Input was flagged by moderation",
                                   "metadata": {"flagged_input": "FLAGGED <script>alert(1)</script>"}}}
        return None

    script = [("write_file", json.dumps({"path": "n.md", "content": "FLAGGED <script>alert(1)</script>"})), SUBMIT]
    with _endpoint(script, refuse) as ep:
        summary, _ = _llm_batch(ep.url, tmp_path)
    assert "<script>" in (summary.note or "")  # the agent's text is in the record (its failure, not a crash)
    # A reason that still counts as a crash may quote it as well (the report's crash column shows it).
    summary = dataclasses.replace(summary, error=f"the model endpoint failed: {summary.note}")
    write_summary(tmp_path / "runs", [summary], {"agent": "llm:fake-model"})
    html = report([tmp_path / "runs"], tmp_path / "out")[-1].read_text()
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
