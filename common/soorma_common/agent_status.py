"""Wire models of the tracker's connected-agents view (``GET /v1/tracker/agents``): what
the registry knows of each agent beside how far its consumer group is behind."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from soorma_common.base import BaseDTO
from soorma_common.bus import ConsumerGroupStatus


class GroupLag(BaseDTO):
    """One consumer group, summed over its topics (``topics`` has the breakdown)."""

    group: str
    lag: int = Field(description="Events not yet delivered to the group")
    pending: int = Field(description="Events delivered and not yet acknowledged")
    last_delivered_at: datetime | None = Field(
        default=None, description="When the newest event the group took was published"
    )
    topics: list[ConsumerGroupStatus] = Field(default_factory=list)


class ConnectedAgent(BaseDTO):
    """A registered agent: what it does, when it was last seen, how far it is behind."""

    agent_id: str
    name: str
    description: str = ""
    version: str = ""
    agent_type: str = "agent"
    capabilities: list[str] = Field(default_factory=list, description="Capability task names")
    consumes: list[str] = Field(default_factory=list, description="Event types it consumes")
    produces: list[str] = Field(default_factory=list, description="Event types it produces")
    topics: list[str] = Field(
        default_factory=list, description="Topics of the events it consumes (where declared)"
    )
    last_seen: datetime | None = Field(
        default=None, description="Its last heartbeat (or registration)"
    )
    ttl_seconds: int = Field(description="The registry's lease: stale once unseen this long")
    expires_at: datetime | None = None
    stale: bool = Field(description="No heartbeat within ttl_seconds: the agent has gone")
    consumer_group: GroupLag | None = Field(
        default=None,
        description="Its consumer group (its name) in the event service; null when the group "
        "does not exist or the event service could not be asked",
    )


class ConnectedAgentList(BaseDTO):
    """``GET /v1/tracker/agents``: agents ordered by name, then id."""

    agents: list[ConnectedAgent]
    other_groups: list[GroupLag] = Field(
        default_factory=list,
        description="Consumer groups of the tenant that no registered agent is named after "
        "(e.g. an agent that stopped and expired while events still wait for it)",
    )
    checked_at: datetime
    lag_complete: bool = Field(
        default=True, description="False when the event service looked at only some topics"
    )
    errors: list[str] = Field(
        default_factory=list, description="Sources that could not be read (shown, not raised)"
    )


__all__ = ["ConnectedAgent", "ConnectedAgentList", "GroupLag"]
