"""The multi_hop eval tool interface as a verifiers v1 `Toolset`.

The trained model sees exactly these tools at eval time (`people_get_relation`,
`people_get_attribute`, `people_list_relations`). They answer from the rollout task's `world`
(see `trainergym_multi_hop.people` for its format), so a job's TaskData must carry a `world: dict` field.
"""

import verifiers.v1 as vf
from trainergym_kit.toolset import WorldToolset

from trainergym_multi_hop import people


class MultiHopToolset(WorldToolset):
    TOOL_PREFIX = "people"

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
