"""The triage eval tool interface as a verifiers v1 `Toolset`.

The trained model sees exactly these tools at eval time (advertised as `ops_get_incident`,
`ops_get_service`, `ops_list_deploys`). They answer from the rollout task's `world` (services,
incidents, deploys), read in `setup_task`; a job wires this class into its own tasks and gives
its TaskData a `world: dict` field in the same format.
"""

import verifiers.v1 as vf
from trainergym_kit.toolset import WorldToolset

from trainergym_triage import ops


class TriageToolset(WorldToolset):
    TOOL_PREFIX = "ops"

    @vf.tool
    def get_incident(self, incident_id: str) -> str:
        """Look up an incident (e.g. INC-1234): its service, start time (HH:MM) and symptom."""
        return ops.get_incident(self.world, incident_id)

    @vf.tool
    def get_service(self, service: str) -> str:
        """Look up a service: its owner, the services it depends on and the services that call it."""
        return ops.get_service(self.world, service)

    @vf.tool
    def list_deploys(self, service: str) -> str:
        """List a service's deploys, oldest first, with their ids, times (HH:MM) and authors."""
        return ops.list_deploys(self.world, service)


if __name__ == "__main__":
    TriageToolset.run()
