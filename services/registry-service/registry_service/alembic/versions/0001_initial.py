"""Registry tables: agents, their capability/event index, event definitions.

Revision ID: 0001_initial
Revises:
Create Date: 2025-01-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0001_initial"
down_revision = None
branch_labels = None
depends_on = None


def _agent_fk() -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["tenant_id", "agent_id"],
        ["registry_agents.tenant_id", "registry_agents.agent_id"],
        ondelete="CASCADE",
    )


def upgrade() -> None:
    op.create_table(
        "registry_agents",
        sa.Column("tenant_id", sa.String(128), primary_key=True),
        sa.Column("agent_id", sa.String(256), primary_key=True),
        sa.Column("name", sa.String(256), nullable=False),
        sa.Column("definition", sa.JSON, nullable=False),
        sa.Column("ttl_seconds", sa.Integer, nullable=False),
        sa.Column("registration_id", sa.String(32), nullable=False),
        sa.Column("registered_at", sa.Float, nullable=False),
        sa.Column("last_heartbeat", sa.Float, nullable=False),
        sa.Column("expires_at", sa.Float, nullable=False),
    )
    op.create_index("ix_registry_agents_name", "registry_agents", ["tenant_id", "name"])
    op.create_index("ix_registry_agents_expires_at", "registry_agents", ["expires_at"])

    op.create_table(
        "registry_agent_capabilities",
        sa.Column("tenant_id", sa.String(128), primary_key=True),
        sa.Column("agent_id", sa.String(256), primary_key=True),
        sa.Column("task_name", sa.String(256), primary_key=True),
        _agent_fk(),
    )
    op.create_index(
        "ix_registry_agent_capabilities_task",
        "registry_agent_capabilities",
        ["tenant_id", "task_name"],
    )

    op.create_table(
        "registry_agent_events",
        sa.Column("tenant_id", sa.String(128), primary_key=True),
        sa.Column("agent_id", sa.String(256), primary_key=True),
        sa.Column("direction", sa.String(16), primary_key=True),
        sa.Column("event_name", sa.String(256), primary_key=True),
        _agent_fk(),
    )
    op.create_index(
        "ix_registry_agent_events_name",
        "registry_agent_events",
        ["tenant_id", "event_name", "direction"],
    )

    op.create_table(
        "registry_events",
        sa.Column("tenant_id", sa.String(128), primary_key=True),
        sa.Column("event_name", sa.String(256), primary_key=True),
        sa.Column("topic", sa.String(64), nullable=False),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("payload_schema", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("response_schema", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("owner_agent_id", sa.String(256), nullable=True),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )
    op.create_index("ix_registry_events_topic", "registry_events", ["tenant_id", "topic"])
    op.create_index(
        "ix_registry_events_owner", "registry_events", ["tenant_id", "owner_agent_id"]
    )


def downgrade() -> None:
    op.drop_table("registry_events")
    op.drop_table("registry_agent_events")
    op.drop_table("registry_agent_capabilities")
    op.drop_table("registry_agents")
