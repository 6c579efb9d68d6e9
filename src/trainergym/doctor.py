"""`trainergym doctor`: what this host has and lacks, for agent code and for training."""

from __future__ import annotations

import json
import stat

from rich.console import Console
from rich.table import Table

from trainergym.paths import data_dir


def run(console: Console, as_json: bool = False) -> int:
    """Print the report (a table, or one JSON object); returns the exit status: 0 when agent code
    can be confined here, else 1. Raises ValueError for an unknown TRAINERGYM_SANDBOX."""
    from trainergym.job import stack_env
    from trainergym.probe.cgroup import Cgroup
    from trainergym.probe.sandbox import Sandbox, requested_mode

    chosen = Sandbox(mode=requested_mode())
    modes = [{"mode": m, "available": (box := Sandbox(mode=m)).kind != "unavailable", "guarantees": box.describe()}
             for m in ("bwrap", "namespaces", "none")]
    group = Cgroup.create(64 << 20, 8)
    if group is not None:
        group.remove()
    data = data_dir()
    files = {p.name: oct(stat.S_IMODE(p.stat().st_mode)) for p in [data, *sorted(data.iterdir())] if p.exists()} \
        if data.is_dir() else {}
    out = {"requested": chosen.requested, "runs": chosen.kind, "confinement": chosen.describe(), "modes": modes,
           "accounting": group.describe() if group else "none: caps per process (and per uid when root)",
           "data_dir": str(data), "data_dir_modes": files, "stack": stack_env.ensure().describe()}
    if as_json:
        print(json.dumps(out))
    else:
        table = Table(title=f"sandbox modes (TRAINERGYM_SANDBOX={chosen.requested} runs: {chosen.kind})")
        for col in ("mode", "available", "guarantees"):
            table.add_column(col)
        for row in modes:
            table.add_row(row["mode"], "yes" if row["available"] else "no", row["guarantees"])
        console.print(table)
        console.print(f"per-sandbox totals: {out['accounting']}")
        console.print(f"data directory {data}: " + ", ".join(f"{k} {v}" for k, v in files.items()))
        console.print(f"agent code runs under {out['stack']}")
    return 0 if chosen.kind != "unavailable" else 1
