"""Registry DTOs: event definitions, capabilities, agents."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import Field

from soorma_common.base import BaseDTO
from soorma_common.events import ACTION_REQUESTS

DEFAULT_AGENT_TTL_SECONDS = 90


class EventDefinition(BaseDTO):
    """A named event with its topic and JSON Schemas (draft 2020-12)."""

    event_name: str = Field(min_length=1, max_length=256)
    topic: str = ACTION_REQUESTS
    description: str = ""
    payload_schema: dict[str, Any] | None = None
    response_schema: dict[str, Any] | None = None
    owner_agent_id: str | None = None


class AgentCapability(BaseDTO):
    """A task an agent performs: the event it consumes and the events it produces."""

    task_name: str = Field(min_length=1)
    description: str = ""
    consumed_event: EventDefinition
    produced_events: list[EventDefinition] = Field(default_factory=list)


class AgentDefinition(BaseDTO):
    """An agent as registered with the registry service."""

    agent_id: str = Field(min_length=1, max_length=256)
    name: str = Field(min_length=1, max_length=256)
    description: str = ""
    version: str = "1.0.0"
    agent_type: str = "agent"
    capabilities: list[AgentCapability] = Field(default_factory=list)
    events_consumed: list[str] = Field(default_factory=list)
    events_produced: list[str] = Field(default_factory=list)
    ttl_seconds: int = Field(default=DEFAULT_AGENT_TTL_SECONDS, ge=1)
    tenant_id: str | None = None
    last_heartbeat: datetime | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class DiscoveredAgent(BaseDTO):
    """An agent returned by discovery, with the schemas needed to talk to it."""

    agent_id: str
    name: str
    description: str = ""
    version: str = "1.0.0"
    capabilities: list[AgentCapability] = Field(default_factory=list)

    def get_consumed_event_schema(self, capability: str) -> EventDefinition | None:
        """The request event definition for invoking ``capability``."""
        for cap in self.capabilities:
            if cap.task_name == capability:
                return cap.consumed_event
        return None

    def get_produced_event_schema(self, capability: str) -> EventDefinition | None:
        """The (first) response event definition for ``capability``."""
        for cap in self.capabilities:
            if cap.task_name == capability and cap.produced_events:
                return cap.produced_events[0]
        return None


__all__ = [
    "DEFAULT_AGENT_TTL_SECONDS",
    "AgentCapability",
    "AgentDefinition",
    "DiscoveredAgent",
    "EventDefinition",
]
