"""`WorldToolset`: the base of a family's eval toolset whose tools answer from the task's world.

Public (in the kit's PUBLIC_MODULES): the families' public toolsets import it, and job code
imports those.
"""

from __future__ import annotations

import copy
from typing import ClassVar

import verifiers.v1 as vf


class WorldToolset(vf.Toolset[vf.ToolsetConfig]):
    """A `vf.Toolset` that holds the rollout task's `world` in `self.world` for its tools.

    Subclasses set `TOOL_PREFIX` and add `@vf.tool` methods over `self.world`. At the start of
    each rollout `setup_task(task)` reads `task.world` (a job's TaskData must carry a `world:
    dict` field); a task without one gives `{}`. With `MUTABLE_WORLD = False` (the default) the
    tools must only read the world, which is shared, not copied; tools that change it (ledger's
    postings) set `MUTABLE_WORLD = True` and each rollout gets its own deep copy, so no rollout
    sees another's changes and the task's data never changes.
    """

    MUTABLE_WORLD: ClassVar[bool] = False

    def __init__(self, config: vf.ToolsetConfig) -> None:
        super().__init__(config)
        self.world: dict = {}

    async def setup_task(self, task) -> None:
        world = getattr(task, "world", None) or {}
        self.world = copy.deepcopy(world) if self.MUTABLE_WORLD else world
