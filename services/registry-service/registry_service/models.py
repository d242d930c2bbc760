"""Tables of the registry as SQLModel models (private to the service; the schema ships as
Alembic migrations, and ``tests/registry_service/test_registry_schema_matches_migrations.py``
keeps the two in step).

The store runs SQLAlchemy Core statements on each model's table (``Agent.__table__``,
exported below as ``agents`` …): the rows are read into the API's own pydantic types, so
no ORM session or model instance sits on the request path.

Times are stored as epoch seconds (floats) so that expiry arithmetic
(``now + ttl_seconds``) and comparisons are the same plain SQL on SQLite and PostgreSQL.
Definitions are kept as JSON; everything a query filters on has its own indexed column
or side-table row.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import registry
from sqlmodel import Field, SQLModel

TENANT_LEN = 128
ID_LEN = 256


class RegistryTable(SQLModel, registry=registry()):
    """Base of the registry's tables: their own metadata, apart from other services'."""


metadata = RegistryTable.metadata


def _agent_fk() -> sa.ForeignKeyConstraint:
    """Rows that belong to an agent go when the agent does."""
    return sa.ForeignKeyConstraint(
        ["tenant_id", "agent_id"],
        ["registry_agents.tenant_id", "registry_agents.agent_id"],
        ondelete="CASCADE",
    )


class Agent(RegistryTable, table=True):
    __tablename__ = "registry_agents"
    __table_args__ = (
        sa.Index("ix_registry_agents_name", "tenant_id", "name"),
        sa.Index("ix_registry_agents_expires_at", "expires_at"),
    )

    tenant_id: str = Field(primary_key=True, max_length=TENANT_LEN)
    agent_id: str = Field(primary_key=True, max_length=ID_LEN)
    name: str = Field(max_length=ID_LEN)
    # The AgentDefinition as registered (capabilities, plain event names, metadata...).
    # Side tables below index its capability and event names for the list filters.
    definition: dict[str, Any] = Field(sa_type=sa.JSON)
    ttl_seconds: int
    # Random per registration, set on insert only: RETURNING it tells whether an upsert
    # created the row, without a racy read beforehand.
    registration_id: str = Field(max_length=32)
    registered_at: float
    last_heartbeat: float
    expires_at: float


class AgentCapability(RegistryTable, table=True):
    __tablename__ = "registry_agent_capabilities"
    __table_args__ = (
        _agent_fk(),
        sa.Index("ix_registry_agent_capabilities_task", "tenant_id", "task_name"),
    )

    tenant_id: str = Field(primary_key=True, max_length=TENANT_LEN)
    agent_id: str = Field(primary_key=True, max_length=ID_LEN)
    task_name: str = Field(primary_key=True, max_length=ID_LEN)


CONSUMED = "consumed"
PRODUCED = "produced"


class AgentEvent(RegistryTable, table=True):
    """An event an agent consumes or produces (``direction``), for discovery by event."""

    __tablename__ = "registry_agent_events"
    __table_args__ = (
        _agent_fk(),
        sa.Index("ix_registry_agent_events_name", "tenant_id", "event_name", "direction"),
    )

    tenant_id: str = Field(primary_key=True, max_length=TENANT_LEN)
    agent_id: str = Field(primary_key=True, max_length=ID_LEN)
    direction: str = Field(primary_key=True, max_length=16)
    event_name: str = Field(primary_key=True, max_length=ID_LEN)


class Event(RegistryTable, table=True):
    """A registered event definition (per tenant)."""

    __tablename__ = "registry_events"
    __table_args__ = (
        sa.Index("ix_registry_events_topic", "tenant_id", "topic"),
        sa.Index("ix_registry_events_owner", "tenant_id", "owner_agent_id"),
    )

    tenant_id: str = Field(primary_key=True, max_length=TENANT_LEN)
    event_name: str = Field(primary_key=True, max_length=ID_LEN)
    topic: str = Field(max_length=64)
    description: str = Field(sa_type=sa.Text)
    payload_schema: dict[str, Any] | None = Field(default=None, sa_type=sa.JSON(none_as_null=True))
    response_schema: dict[str, Any] | None = Field(default=None, sa_type=sa.JSON(none_as_null=True))
    owner_agent_id: str | None = Field(default=None, max_length=ID_LEN)
    created_at: float
    updated_at: float


# The tables, for the store's Core statements.
agents: sa.Table = Agent.__table__  # type: ignore[assignment]
agent_capabilities: sa.Table = AgentCapability.__table__  # type: ignore[assignment]
agent_events: sa.Table = AgentEvent.__table__  # type: ignore[assignment]
events: sa.Table = Event.__table__  # type: ignore[assignment]
