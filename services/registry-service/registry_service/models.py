"""Tables of the registry (private to the service; the schema ships as Alembic migrations).

Times are stored as epoch seconds (floats) so that expiry arithmetic
(``now + ttl_seconds``) and comparisons are the same plain SQL on SQLite and PostgreSQL.
Definitions are kept as JSON; everything a query filters on has its own indexed column
or side-table row.
"""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData()

TENANT_LEN = 128
ID_LEN = 256

agents = sa.Table(
    "registry_agents",
    metadata,
    sa.Column("tenant_id", sa.String(TENANT_LEN), primary_key=True),
    sa.Column("agent_id", sa.String(ID_LEN), primary_key=True),
    sa.Column("name", sa.String(ID_LEN), nullable=False),
    # The AgentDefinition as registered (capabilities, plain event names, metadata...).
    # Side tables below index its capability and event names for the list filters.
    sa.Column("definition", sa.JSON, nullable=False),
    sa.Column("ttl_seconds", sa.Integer, nullable=False),
    # Random per registration, set on insert only: RETURNING it tells whether an upsert
    # created the row, without a racy read beforehand.
    sa.Column("registration_id", sa.String(32), nullable=False),
    sa.Column("registered_at", sa.Float, nullable=False),
    sa.Column("last_heartbeat", sa.Float, nullable=False),
    sa.Column("expires_at", sa.Float, nullable=False),
    sa.Index("ix_registry_agents_name", "tenant_id", "name"),
    sa.Index("ix_registry_agents_expires_at", "expires_at"),
)

agent_capabilities = sa.Table(
    "registry_agent_capabilities",
    metadata,
    sa.Column("tenant_id", sa.String(TENANT_LEN), primary_key=True),
    sa.Column("agent_id", sa.String(ID_LEN), primary_key=True),
    sa.Column("task_name", sa.String(ID_LEN), primary_key=True),
    sa.ForeignKeyConstraint(
        ["tenant_id", "agent_id"],
        ["registry_agents.tenant_id", "registry_agents.agent_id"],
        ondelete="CASCADE",
    ),
    sa.Index("ix_registry_agent_capabilities_task", "tenant_id", "task_name"),
)

CONSUMED = "consumed"
PRODUCED = "produced"

agent_events = sa.Table(
    "registry_agent_events",
    metadata,
    sa.Column("tenant_id", sa.String(TENANT_LEN), primary_key=True),
    sa.Column("agent_id", sa.String(ID_LEN), primary_key=True),
    sa.Column("direction", sa.String(16), primary_key=True),
    sa.Column("event_name", sa.String(ID_LEN), primary_key=True),
    sa.ForeignKeyConstraint(
        ["tenant_id", "agent_id"],
        ["registry_agents.tenant_id", "registry_agents.agent_id"],
        ondelete="CASCADE",
    ),
    sa.Index("ix_registry_agent_events_name", "tenant_id", "event_name", "direction"),
)

events = sa.Table(
    "registry_events",
    metadata,
    sa.Column("tenant_id", sa.String(TENANT_LEN), primary_key=True),
    sa.Column("event_name", sa.String(ID_LEN), primary_key=True),
    sa.Column("topic", sa.String(64), nullable=False),
    sa.Column("description", sa.Text, nullable=False),
    sa.Column("payload_schema", sa.JSON(none_as_null=True), nullable=True),
    sa.Column("response_schema", sa.JSON(none_as_null=True), nullable=True),
    sa.Column("owner_agent_id", sa.String(ID_LEN), nullable=True),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
    sa.Index("ix_registry_events_topic", "tenant_id", "topic"),
    sa.Index("ix_registry_events_owner", "tenant_id", "owner_agent_id"),
)
