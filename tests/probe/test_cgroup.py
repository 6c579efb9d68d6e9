"""A sandbox's own cgroup: processes that join it are counted together and all die with it."""

import subprocess

import pytest

from trainergym.probe.cgroup import Cgroup


def test_a_cgroup_counts_its_processes_and_kills_them_all():
    group = Cgroup.create(256 << 20, 8)
    if group is None:
        pytest.skip("no writable cgroup on this host")
    # The way the sandbox joins: a shell writes its pid, then everything it starts is inside.
    files = " ".join(group.procs_files)
    proc = subprocess.Popen(["/bin/sh", "-c", f'for f in {files}; do echo $$ > "$f"; done; '
                             "sleep 60 & sleep 60 & setsid sleep 60 & wait"])
    try:
        for _ in range(100):
            if len(group.pids()) >= 4:
                break
            subprocess.run(["sleep", "0.05"])
        assert len(group.pids()) >= 4  # the shell and its three sleeps, the setsid one included
        group.remove()
        assert proc.wait(timeout=5) != 0 and not any(d.exists() for d in group.dirs.values())
    finally:
        proc.kill()
