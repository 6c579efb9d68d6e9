"""The dispatch eval tool interface as a verifiers v1 `Toolset`.

The trained model sees exactly these tools at eval time (advertised as `dispatch_get_ticket`,
`dispatch_get_rules`, `dispatch_get_team`). They answer from the rollout's task `world`
(tickets, routing rules, teams), so a job must carry that world in its TaskData's `world`
field and wire this class into its tasks.
"""

import verifiers.v1 as vf
from trainergym_kit.toolset import WorldToolset

from trainergym_dispatch import desk


class DispatchToolset(WorldToolset):
    TOOL_PREFIX = "dispatch"

    @vf.tool
    def get_ticket(self, ticket_id: str) -> str:
        """Return a ticket's fields: category, priority (1-5), region, customer_tier, channel."""
        return desk.get_ticket(self.world, ticket_id)

    @vf.tool
    def get_rules(self, category: str) -> str:
        """Return a ticket category's ordered routing rules (the first rule that matches wins)."""
        return desk.get_rules(self.world, category)

    @vf.tool
    def get_team(self, team: str) -> str:
        """Return a team's status (available or at capacity) and its overflow team."""
        return desk.get_team(self.world, team)


if __name__ == "__main__":
    DispatchToolset.run()
