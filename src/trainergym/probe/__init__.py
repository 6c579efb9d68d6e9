"""Validation of a submitted job before it may train (`checks`), and the confinement agent
code runs in while it is measured (`sandbox`, `cgroup`; `confine` and `child` run inside it).

Zones: `checks`, `sandbox`, `cgroup`, `adversary`, `giveaway` and `leakage` run in the library;
`confine.py` and `child.py` run inside the sandbox and import nothing of trainergym.
"""
