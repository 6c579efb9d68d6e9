"""The multi_hop eval tool interface as a verifiers v1 `Toolset`.

The trained model sees exactly these tools at eval time (`people_get_relation`,
`people_get_attribute`, `people_list_relations`). They answer from the rollout task's `world`
(see `multi_hop.people` for its format), so a job's TaskData must carry a `world: dict` field.
"""

import verifiers.v1 as vf

from multi_hop import people


class MultiHopToolset(vf.Toolset[vf.ToolsetConfig]):
    TOOL_PREFIX = "people"

    def __init__(self, config: vf.ToolsetConfig) -> None:
        super().__init__(config)
        self.world: dict = {}

    async def setup_task(self, task) -> None:
        # The tools only read the world, so no copy is needed.
        self.world = getattr(task, "world", None) or {}

    @vf.tool
    def get_relation(self, person: str, relation: str) -> str:
        """Return the full name of a person's manager, mentor, sibling, neighbor or best_friend."""
        return people.get_relation(self.world, person, relation)

    @vf.tool
    def get_attribute(self, person: str, attribute: str) -> str:
        """Return a person's city, employer, birth_year, pet or hobby."""
        return people.get_attribute(self.world, person, attribute)

    @vf.tool
    def list_relations(self, person: str) -> str:
        """Return which relations (manager, mentor, ...) a person has."""
        return people.list_relations(self.world, person)


if __name__ == "__main__":
    MultiHopToolset.run()
