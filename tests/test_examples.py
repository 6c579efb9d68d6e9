"""The examples run as documented."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_custom_loop_prints_per_episode_rewards():
    out = subprocess.run([sys.executable, str(ROOT / "examples/custom_loop.py"), "--episodes", "3"], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = [line for line in out.stdout.splitlines() if line.startswith("episode ")]
    assert len(lines) == 3
    assert "write the reference job" in lines[0] and float(lines[0].split("reward ")[1].split()[0]) > 0.5
    assert "submit as is" in lines[1] and float(lines[1].split("reward ")[1].split()[0]) <= 0
