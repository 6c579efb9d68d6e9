"""The validation probe on the reference job and on broken variants of it.

Each case runs agent code in a real child process (paying the verifiers import there)."""

import json
from types import SimpleNamespace

import pytest

from tests.fakes.jobs import write_job
from trainergym.job import stack_env
from trainergym.job.bundle import parse_job
from trainergym.probe.checks import CHARS_PER_TOKEN, TOOL_MESSAGE_TOKENS, probe, rollout_parts

REWARD = "return float(final_integer(trace.last_reply) == int(self.data.answer))"
TOOLS = "return [CalcChainToolset(config.tools)]"


def run(tmp_path, task, files, **kw):
    write_job(tmp_path / "ws", files)
    return probe(tmp_path / "ws", task, tmp_path / "bundle", **kw)


def variant(files, old, new, path="taskset/chains.py"):
    assert old in files[path]
    return {**files, path: files[path].replace(old, new)}


def status(report):
    return {i.check: i.status for i in report.items}


def test_reference_job_passes_and_measures(tmp_path, task, reference_files):
    report, bundle = run(tmp_path, task, reference_files)
    assert report.ok, report.render()
    if stack_env.ensure().pinned:  # prime-rl's stack: its config classes were asked too
        assert set(status(report).values()) == {"pass"}
    else:
        assert set(status(report).values()) == {"pass", "warn", "skip"} and status(report)["stack"] == "warn"
    m = bundle.manifest.probe
    assert m["reward_separation"] == 1.0 and m["tool_parity"] == 1.0 and m["noop_ok"] and m["group_variance"] == 1.0
    assert not m["leakage"] and m["distinct_prompts"] > 1000
    assert m["verified_share"] == 1.0 and m["skill_coverage"] > 0.9 and m["n_tasks"] >= 1000
    assert m["reward_exploits"] == 0 and m["distinct_verified_prompts"] > 1000
    assert report.confinement.startswith(("bubblewrap", "namespaces")) and "totals:" in report.confinement
    assert m["shape_coverage"] > 0.85 and m["mistake_coverage"] > 0.95 and m["reward_margin"] > 0.9


@pytest.mark.parametrize("old, new, check, words", [
    (REWARD, "return 1.0", "rewards.ranking", "only"),
    (REWARD, "return float(final_integer(trace.last_reply) is not None)", "rewards.ranking", "only"),
    (REWARD, "raise KeyError('oops')", "rewards", "KeyError"),
    (REWARD, "return float(len(trace.last_reply) < 5 or final_integer(trace.last_reply) == int(self.data.answer))",
     "rewards.exploit", "an empty reply"),
    (TOOLS, "return []", "tools", "missing ['calc_add'"),
    ("prompt, answer = make_chain(rng, level)", "prompt, answer = make_chain(rng, level)\n            answer += 1",
     "data.verified", "0% of"),
    ("return replay(self.data.prompt_text) == int(self.data.answer)", "return True", "data.verified", "100% of"),
    ("class ChainData(vf.TaskData):\n    answer: str", "class ChainData(vf.TaskData):\n    target: str = ''\n    answer: str = ''", "data", "answer: str"),
])
def test_broken_jobs_fail_the_right_check(tmp_path, task, reference_files, old, new, check, words):
    files = variant(reference_files, old, new)
    if "target" in new:
        files = variant(files, "answer=str(answer)", "target=str(answer)")
    report, bundle = run(tmp_path, task, files)
    item = next(i for i in report.items if i.check == check)
    assert words in item.message, report.render()
    if "return True" in new:  # validate() no longer feeds anything: the job still passes
        assert report.ok, report.render()
        return
    assert bundle is None and not report.ok and item.status == "fail", report.render()


def test_a_rollout_longer_than_seq_len_fails_naming_its_parts(tmp_path, task, reference_files):
    files = {**reference_files, "job.toml": reference_files["job.toml"].replace("seq_len = 6144", "seq_len = 4096")}
    report, bundle = run(tmp_path, task, files)
    item = next(i for i in report.items if i.check == "data")
    assert bundle is None and item.status == "fail", report.render()
    # 10 turns of 384 tokens lead; the prompt counts the eval tools' schemas, and the results come on top
    assert "more than seq_len 4096: max_turns x max_tokens 10 x 384 = 3840, the prompt ~" in item.message, item.message
    assert "eval tools' schemas" in item.message and "tool results ~" in item.message and "9 calls" in item.message
    assert item.hint == "raise seq_len, or lower max_turns or max_tokens"


def test_rollout_parts_count_tool_results_from_the_solver_on_the_jobs_tasks(task, reference_files):
    job, _ = parse_job(reference_files["job.toml"].replace("max_turns = 10", "max_turns = 3"))
    row = SimpleNamespace(prompt="p" * 400, system_prompt="s" * 40)
    session = SimpleNamespace(task=task, loaded=SimpleNamespace(tasks=[row]), solved=[
        None,  # a task the family could not read adds nothing
        {"calls": [{"result": "x" * 2000}], "reply": ""},
        {"calls": [{"result": 7}] * 5, "reply": ""},  # more calls than max_turns - 1 allows one at a time
    ])
    prompt, turns, tools = rollout_parts(session, job)
    assert prompt.tokens == 110 + -(-len(json.dumps(task.eval_tools)) // CHARS_PER_TOKEN)
    assert turns.tokens == 3 * job.prime_rl.max_tokens
    assert tools.tokens == 5 * (500 + TOOL_MESSAGE_TOKENS) and "5 calls" in tools.what and "2000 characters" in tools.what
    assert "worlds" in tools.remedy
    session.solved = [None]
    assert rollout_parts(session, job)[2].tokens == 0


@pytest.mark.parametrize("init, words", [
    ("from .chains import ChainTaskset\n", "__all__"),
    ("from .chains import ChainTaskset, ChainTask\nclass Other(ChainTaskset):\n    pass\n__all__ = ['ChainTaskset', 'Other']\n", "exactly one"),
    ("def broken(:\n", "SyntaxError"),
    ("import sys\nsys.exit(3)\n", "SystemExit"),
])
def test_package_shape_failures(tmp_path, task, reference_files, init, words):
    report, _ = run(tmp_path, task, {**reference_files, "taskset/__init__.py": init})
    item = next(i for i in report.items if i.check == "shape")
    assert item.status == "fail" and words in item.message, report.render()


def test_error_text_says_what_broke_in_the_jobs_files_and_nothing_else(tmp_path, task, reference_files):
    """An error a job raises is a read channel: the author is told the frames in the job's own
    files, the exception and its message, capped; never host paths, other frames, or its output."""
    files = variant(reference_files, "        rng = random.Random(self.config.seed)",
                    "        import sys, verifiers\n"
                    "        print('PRINTED-' * 400, file=sys.stderr)\n"
                    "        raise ValueError(verifiers.__file__ + ' ' + 'x' * 5000)\n"
                    "        rng = random.Random(self.config.seed)")
    report, _ = run(tmp_path, task, files)
    item = next(i for i in report.items if i.check == "data")
    assert item.status == "fail" and "taskset/chains.py:" in item.message and "in load" in item.message, item.message
    assert "ValueError: __init__.py xxx" in item.message and "(cut)" in item.message
    assert "PRINTED" not in item.message and "site-packages" not in item.message and "/" not in item.message.split(
        "taskset/chains.py")[0].split("failed:")[1]
    assert len(item.message) < 1200, len(item.message)


def test_a_verified_share_is_judged_with_its_sampling_error(tmp_path, monkeypatch, task, reference_files):
    """52% of a 500-task sample verified is consistent with under half of the taskset: refused.
    The sample is fixed here (the key is an installation secret), so the 52% is exact."""
    import random

    from trainergym.probe import checks
    from trainergym.task import hidden

    keyed = hidden.probe_key
    monkeypatch.setattr(hidden, "probe_key", lambda fam, purpose: "fixed" if purpose.startswith("verify:") else keyed(fam, purpose))
    sample = sorted(random.Random("fixed").sample(range(2000), checks.VERIFY_SAMPLE))
    wrong = set(sample[:240])  # 260 of the 500 sampled are right
    files = variant(reference_files, "            data = ChainData(", f"            answer += len(tasks) in {sorted(wrong)}\n"
                    "            data = ChainData(")
    report, bundle = run(tmp_path, task, files)
    item = next(i for i in report.items if i.check == "data.verified")
    m = bundle.manifest.probe if bundle else report.measurements
    assert m["verified_share"] == 0.52 and m["verified_share_low"] < 0.5, m
    assert item.status == "fail" and "52% of 500" in item.message and "at 95% confidence" in item.message, item.message


def test_exactly_half_the_answers_wrong_is_refused_when_every_task_is_checked(tmp_path, task, reference_files):
    files = variant(reference_files, "            data = ChainData(", "            answer += len(tasks) % 2 * 7\n"
                    "            data = ChainData(")
    files = variant(files, "num_tasks: int = 2000", "num_tasks: int = 400")
    report, _ = run(tmp_path, task, files)
    item = next(i for i in report.items if i.check == "data.verified")
    assert item.status == "fail" and "50% of 400" in item.message, item.message


def test_missing_files_fail_before_any_child(tmp_path, task, reference_files):
    report, _ = run(tmp_path, task, {"job.toml": reference_files["job.toml"]})
    assert status(report)["shape"] == "fail" and "taskset/__init__.py is missing" in report.render()
    (tmp_path / "empty").mkdir()
    report, _ = probe(tmp_path / "empty", task, tmp_path / "b2")
    assert "job.toml is missing" in report.render()


def test_infinite_loop_times_out(tmp_path, task, reference_files):
    files = {**reference_files, "taskset/__init__.py": "while True:\n    pass\n"}
    report, _ = run(tmp_path, task, files, timeout=20)
    assert status(report)["shape"] == "fail" and "within 20 s" in report.render()


def test_forged_result_lines_are_ignored(tmp_path, task, reference_files):
    forged = ('print("@@trainergym-probe@@" + "0" * 16 + \'{"stage": "done"}\')\n'
              'import sys; sys.stdout.write("@@trainergym-probe@@{}\\n")\n')
    files = {**reference_files, "taskset/__init__.py": forged + "raise ImportError('no')\n"}
    report, _ = run(tmp_path, task, files)
    assert status(report)["shape"] == "fail"


def test_a_sandbox_that_will_not_start_or_goes_silent_is_the_host_failure(monkeypatch, tmp_path, task, reference_files):
    """A host with no sandbox mode, a worker the host cannot start, or one silent past every limit
    the job has, makes a report that says the probe could not judge the job (`infra`); a worker
    that died under a job is the job's crash, as before."""
    import shutil

    from trainergym.probe import sandbox

    with monkeypatch.context() as m:
        m.setattr(shutil, "which", lambda name: None)  # neither bubblewrap nor unshare
        report, bundle = run(tmp_path / "none", task, reference_files, warm=False)
    assert bundle is None and report.infra and "Install bubblewrap" in report.render() and "shape" not in status(report)

    def fails(infra):
        def run(self, package_dir, request, follow=None):
            raise sandbox.WorkerError("the confined worker stopped answering", infra=infra)
        return run

    monkeypatch.setattr(sandbox.WarmWorker, "run", fails(True))
    report, bundle = run(tmp_path / "a", task, reference_files)
    assert bundle is None and report.infra and status(report)["probe"] == "fail" and "shape" not in status(report)
    assert report.render().startswith("NOT JUDGED")
    monkeypatch.setattr(sandbox.WarmWorker, "run", fails(False))
    report, _ = run(tmp_path / "b", task, reference_files)
    assert not report.infra and status(report)["shape"] == "fail" and report.render().startswith("INVALID")


def test_a_forked_child_starts_with_no_warm_workers_and_leaves_the_parents_alone(tmp_path, task, reference_files):
    """A vector env's worker processes are forked from the process that made them: they must not
    share its warm workers (two children on one worker collided, and one child's cleanup killed
    the others'), nor wait on its threads; a child's copy of a worker never touches it."""
    import os

    from trainergym.probe import checks, sandbox

    report, _ = run(tmp_path, task, reference_files)  # the pool holds a started worker
    assert report.ok and checks._idle.qsize() >= 1
    worker = checks._idle.queue[-1]
    pid = os.fork()
    if pid == 0:  # the child: check, then leave at once
        ok = checks._idle.empty() and checks._started == checks._starting == 0 and sandbox._spawner is None
        worker.close()
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0 and worker._proc.poll() is None and worker._spool.is_dir()
