"""Stand-ins for what runs on a GPU host: a fake trainer and a fake scorer (scripts the real
runner executes in place of prime-rl and vLLM), and a poll helper for the pod service."""

import sys
import time

PY = sys.executable
ITEMS = [{"id": f"h{i}", "prompt": f"hidden prompt {i}", "answer": str(i)} for i in range(20)]

FAKE_TRAIN = r"""
import json, os, pathlib, sys, time
root = pathlib.Path.cwd()
mode = sys.argv[1]
# agent code would look for the hidden eval here: it must not exist yet
found = [str(p) for p in root.rglob("items.jsonl")]
(root / "train-saw.json").write_text(json.dumps(found))
run = root / "outputs" / "run"
run.mkdir(parents=True, exist_ok=True)
if mode == "oom":
    print("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"); sys.exit(1)
if mode == "crash":
    print("Traceback: trainer exploded"); sys.exit(2)
if mode == "hang":
    import subprocess
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    (root / "grandchild.pid").write_text(str(child.pid))
    time.sleep(600)
for step in range(3):
    with open(run / "metrics.jsonl", "a") as f:
        f.write(json.dumps({"step": step}) + "\n")
    time.sleep(0.2)
if mode != "no-checkpoint":
    (run / "broadcasts" / "step_3").mkdir(parents=True)
    (run / "broadcasts" / "step_3" / "STABLE").write_text("")
"""

FAKE_SCORE = r"""
import json, sys
args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
items = [json.loads(l) for l in open(args["--items"])]
if args["--mode"] == "bad":
    open(args["--out"], "w").write("{}"); sys.exit(0)
score = 0.5 if args["--weights"].startswith("Qwen/") else 0.75
with open(args["--out"], "w") as f:
    json.dump({"score": score, "n": len(items)}, f)
with open(args["--log"], "a") as f:
    f.write(args["--weights"] + "\n")
"""


def wait_for(client, job_id, phase, limit=30):
    deadline = time.time() + limit
    while time.time() < deadline:
        status = client.status(job_id)
        if status["phase"] == phase or status["done"]:
            return status
        time.sleep(0.1)
    raise AssertionError(f"never reached {phase}: {status}")
