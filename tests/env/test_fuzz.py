"""Hundreds of random and malformed actions: the env never raises and never writes outside
the workspace."""

import json
import os
import random
from pathlib import Path

from trainergym import TrainerEnv
from trainergym.env.workspace import Limits

N_ACTIONS = 300


def random_action(rng: random.Random, outside: Path):
    escapes = ["../x", "../../etc/passwd", str(outside / "pwned"), "/tmp/pwned", "a/../../b", "~/.bashrc",
               "link/x", "fifo", "./", "", "a" * 500, "x\x00y", "INSTRUCTIONS.md", "eval_tools.json", "job.toml",
               "notes/deep/" * 9 + "f", "ok.txt", "dir/ok.py"]
    values = [None, 3, 2.5, [], {}, True, "", "x" * rng.choice([1, 10_000, 300_000, 3_000_000]),
              "".join(chr(rng.randint(0, 0x10FFFF)) for _ in range(20) if True).encode("utf-8", "replace").decode("utf-8", "replace")]
    name = rng.choice(["read_file", "write_file", "edit_file", "list_files", "get_baseline_scores", "submit_job",
                       "rm_rf", "", "READ_FILE", None, 7])
    args = {k: rng.choice(escapes + values) for k in rng.sample(["path", "content", "old_string", "new_string", "bogus"], rng.randint(0, 4))}
    call = {"name": name, "arguments": args}
    kind = rng.randint(0, 10)
    if kind == 0:
        return call
    if kind == 1:
        return json.dumps(call, default=str)[: rng.randint(0, 200)]  # truncated JSON
    if kind == 2:
        return "<tool_call>" + json.dumps(call, default=str) + "</tool_call>" * rng.randint(0, 2) + "<tool_call>{bad"
    if kind == 3:
        return {"role": "assistant", "tool_calls": [{"id": "1", "function": {"name": name, "arguments": json.dumps(args, default=str)[:-1]}}]}
    if kind == 4:
        return rng.choice([None, 42, [], [None], {"tool_calls": "x"}, b"\x00\xff", "", " ", "[" * 5000, object()])
    if kind == 5:
        return bytes(rng.randint(0, 255) for _ in range(rng.randint(0, 64))).decode("latin-1")
    if kind == 6:
        return {"name": name, "arguments": rng.choice(values + ["{not json", "[1,2]"])}
    text = [v for v in values if isinstance(v, str)]
    if kind == 7:
        return {"name": "write_file", "arguments": {"path": rng.choice(escapes), "content": rng.choice(text)}}
    if kind == 8:
        return {"name": "edit_file", "arguments": {"path": rng.choice(escapes), "old_string": rng.choice(text + ["x"]),
                                                   "new_string": rng.choice(text)}}
    return json.dumps(call, default=str)


def test_fuzz_never_raises_and_stays_inside(tmp_path):
    rng = random.Random(1234)
    outside = tmp_path / "outside"
    outside.mkdir()
    workdir = tmp_path / "work"
    workdir.mkdir()
    limits = Limits(max_file_bytes=64 * 1024, max_files=30, max_total_bytes=512 * 1024)
    env = TrainerEnv(workdir=workdir, limits=limits)
    env.reset(seed=0)
    ws = env.inner.episode.workspace.root
    os.symlink(outside, ws / "link")
    os.mkfifo(ws / "fifo")
    episodes, seen = 1, []
    for i in range(N_ACTIONS):
        obs, reward, terminated, truncated, info = env.step(random_action(rng, outside))
        seen.append(obs)
        assert isinstance(obs, str) and isinstance(reward, float) and isinstance(info, dict)
        files = env.inner.episode.workspace.files()
        assert len(files) <= limits.max_files and sum(files.values()) <= limits.max_total_bytes
        if terminated or truncated:
            env.reset(seed=i)
            ws = env.inner.episode.workspace.root
            os.symlink(outside, ws / "link")
            episodes += 1
    env.close()
    assert list(outside.iterdir()) == [] and not Path("/tmp/pwned").exists()
    # everything the library wrote lives in an episode directory's workspace/ or bundle/
    for path in workdir.rglob("*"):
        rel = path.relative_to(workdir).parts
        assert rel[0].startswith("tg-episode-") and (len(rel) == 1 or rel[1] in ("workspace", "bundle")), path
    assert episodes >= 2  # attempts and turns ran out along the way
    text = "\n".join(seen)
    for outcome in ("wrote ", "refused: ", "unknown tool", "malformed JSON", "bad arguments", "INVALID"):
        assert outcome in text, f"the fuzz never produced {outcome!r}"
