"""Where verifiers is missing (the GPU machine), the toolbox runs the families' toolsets on a stand-in
of verifiers' toolset slice; their answers must be the ones verifiers gives."""

import json
import subprocess
import sys

from trainergym.mini.toolbox import Toolbox
from trainergym.task.spec import get_family

FAMILIES = ["calc_chain", "multi_hop", "string_pipeline", "ledger", "dispatch", "triage"]

SCRIPT = """
import json, sys
sys.modules["verifiers"] = None  # as if not installed
from trainergym.mini.toolbox import Toolbox
from trainergym.task.spec import get_family
out = {}
for fid in %r:
    fam = get_family(fid)
    rows = fam.generate("standin", 3, namespace="public")
    out[fid] = [[Toolbox(fam, r["world"]).call(c["tool"], c["arguments"]) for c in fam.solve(r)["calls"]]
                + [Toolbox(fam, r["world"]).call("nope", "{}")] for r in rows]
assert type(sys.modules["verifiers"]).__name__ == "module" and sys.modules["verifiers"].STANDIN
print(json.dumps(out))
"""


def test_the_standin_answers_as_verifiers_does():
    done = subprocess.run([sys.executable, "-c", SCRIPT % FAMILIES], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    standin = json.loads(done.stdout.strip().splitlines()[-1])
    for fid in FAMILIES:
        fam = get_family(fid)
        rows = fam.generate("standin", 3, namespace="public")
        real = [[Toolbox(fam, r["world"]).call(c["tool"], c["arguments"]) for c in fam.solve(r)["calls"]]
                + [Toolbox(fam, r["world"]).call("nope", "{}")] for r in rows]
        assert standin[fid] == real
