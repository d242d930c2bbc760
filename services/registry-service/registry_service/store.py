"""The registry's storage interface. Routes see only this; the lifespan injects it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

from soorma_common.registry import AgentDefinition, EventDefinition

MatchMode = Literal["any", "all"]


class RegistryStore(Protocol):
    """Tenant-scoped agents and event definitions with TTL-based liveness.

    Every method takes the caller's ``tenant_id``; nothing crosses tenants except
    :meth:`purge_expired`, the housekeeping sweep. Unknown (or other tenants') ids raise
    ``AgentNotFound`` / ``EventDefinitionNotFound``; invalid definitions raise
    ``SchemaInvalid``, ``InvalidTopic`` or ``ValidationFailed``.
    """

    async def upsert_agent(
        self, tenant_id: str, agent: AgentDefinition
    ) -> tuple[AgentDefinition, bool]:
        """Register or replace an agent (heartbeat refreshed); True when it was new."""
        ...

    async def get_agent(
        self, tenant_id: str, agent_id: str, *, include_expired: bool = False
    ) -> AgentDefinition: ...

    async def list_agents(
        self,
        tenant_id: str,
        *,
        name: str | None = None,
        consumed_event: str | None = None,
        produced_event: str | None = None,
        capability: str | None = None,
        include_expired: bool = False,
    ) -> list[AgentDefinition]: ...

    async def discover(
        self, tenant_id: str, requirements: Sequence[str], *, match: MatchMode = "any"
    ) -> list[AgentDefinition]:
        """Live agents with a capability ``task_name`` or consumed event per requirement."""
        ...

    async def heartbeat(self, tenant_id: str, agent_id: str) -> AgentDefinition:
        """Extend a live agent's lease; ``AgentNotFound`` when unknown or already expired."""
        ...

    async def delete_agent(self, tenant_id: str, agent_id: str) -> None: ...

    async def upsert_event(self, tenant_id: str, event: EventDefinition) -> EventDefinition: ...

    async def get_event(self, tenant_id: str, event_name: str) -> EventDefinition: ...

    async def list_events(
        self,
        tenant_id: str,
        *,
        topic: str | None = None,
        event_name: str | None = None,
        owner: str | None = None,
    ) -> list[EventDefinition]: ...

    async def purge_expired(self) -> int:
        """Delete expired agents of every tenant and release their events; return the count."""
        ...

    async def ping(self) -> None: ...

    async def close(self) -> None: ...
