"""trainergym_kit: what every trainergym task family repeats, kept once.

- `trainergym_kit.items`: the item contract (per-item seeding, the level mix, strict readers).
- `trainergym_kit.answers`: answer extraction (`</think>` stripping, the last match of a pattern).
- `trainergym_kit.schema`: OpenAI function-tool schemas for a family's `EVAL_TOOLS`.
- `trainergym_kit.toolset`: `WorldToolset`, the base of an eval toolset over a task's `world`.
- `trainergym_kit.taskset`: `ItemTask`/`ItemTaskset`, the verifiers v1 taskset shell.

Only `toolset` and `taskset` import verifiers; this module imports nothing, so trainergym can
read a family (and the sandbox can expose `PUBLIC_MODULES`) without paying for it.
"""

# The files of this package job code may import, as a family's PUBLIC_MODULES are for the
# family: what the families' public toolsets import (`toolset.py`) and the answer helpers a
# job's reward may share (`answers.py`). A family that imports the kit from a public module
# names `trainergym_kit` in its PUBLIC_DEPENDENCIES, and the sandbox exposes these too.
PUBLIC_MODULES = ("__init__.py", "answers.py", "toolset.py")
