"""Initial memory schema: task contexts, sub-tasks, plans, correlations, sessions, memory.

Revision ID: 0001_initial
Revises:
Create Date: 2026-11-22
"""

import sqlalchemy as sa
from alembic import op

revision = "0001_initial"
down_revision = None
branch_labels = None
depends_on = None

ID = sa.String(256)
TENANT = sa.String(128)
TS = sa.DateTime(timezone=True)
# TEXT on SQLite: a column declared JSON there has numeric affinity (1.0 would read back as 1).
JSON = sa.JSON().with_variant(sa.Text(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "memory_task_contexts",
        sa.Column("tenant_id", TENANT, primary_key=True),
        sa.Column("task_id", ID, primary_key=True),
        sa.Column("plan_id", ID, nullable=True),
        sa.Column("event_type", sa.Text, nullable=False),
        sa.Column("correlation_id", ID, nullable=True),
        sa.Column("response_event", sa.Text, nullable=True),
        sa.Column("response_topic", sa.Text, nullable=False),
        sa.Column("data", JSON, nullable=False),
        sa.Column("state", JSON, nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
    )
    op.create_index(
        "ix_memory_task_contexts_plan", "memory_task_contexts", ["tenant_id", "plan_id"]
    )

    op.create_table(
        "memory_sub_tasks",
        sa.Column("tenant_id", TENANT, primary_key=True),
        sa.Column("task_id", ID, primary_key=True),
        sa.Column("sub_task_id", ID, primary_key=True),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("event_type", sa.Text, nullable=False),
        sa.Column("response_event", sa.Text, nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("parallel_group_id", ID, nullable=True),
        sa.Column("result", JSON, nullable=True),
        sa.Column("error", sa.Text, nullable=True),
        sa.ForeignKeyConstraint(
            ["tenant_id", "task_id"],
            ["memory_task_contexts.tenant_id", "memory_task_contexts.task_id"],
            ondelete="CASCADE",
        ),
    )
    op.create_index(
        "ix_memory_sub_tasks_sub_task", "memory_sub_tasks", ["tenant_id", "sub_task_id"]
    )

    op.create_table(
        "memory_plans",
        sa.Column("tenant_id", TENANT, primary_key=True),
        sa.Column("plan_id", ID, primary_key=True),
        sa.Column("session_id", ID, nullable=True),
        sa.Column("parent_plan_id", ID, nullable=True),
        sa.Column("goal_event", sa.Text, nullable=False),
        sa.Column("goal_data", JSON, nullable=False),
        sa.Column("response_event", sa.Text, nullable=True),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("current_state", sa.Text, nullable=True),
        sa.Column("state_machine", JSON, nullable=False),
        sa.Column("results", JSON, nullable=False),
        sa.Column("state", JSON, nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
    )
    op.create_index("ix_memory_plans_session", "memory_plans", ["tenant_id", "session_id"])
    op.create_index("ix_memory_plans_parent", "memory_plans", ["tenant_id", "parent_plan_id"])
    op.create_index("ix_memory_plans_status", "memory_plans", ["tenant_id", "status", "updated_at"])
    op.create_index("ix_memory_plans_retention", "memory_plans", ["status", "updated_at"])

    op.create_table(
        "memory_plan_correlations",
        sa.Column("tenant_id", TENANT, primary_key=True),
        sa.Column("correlation_id", ID, primary_key=True),
        sa.Column("plan_id", ID, primary_key=True),
        sa.Column("position", sa.Integer, nullable=False),
        sa.ForeignKeyConstraint(
            ["tenant_id", "plan_id"],
            ["memory_plans.tenant_id", "memory_plans.plan_id"],
            ondelete="CASCADE",
        ),
    )
    op.create_index(
        "ix_memory_plan_correlations_plan", "memory_plan_correlations", ["tenant_id", "plan_id"]
    )

    op.create_table(
        "memory_sessions",
        sa.Column("tenant_id", TENANT, primary_key=True),
        sa.Column("session_id", ID, primary_key=True),
        sa.Column("name", sa.Text, nullable=True),
        sa.Column("metadata", JSON, nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
    )

    op.create_table(
        "memory_working_memory",
        sa.Column("tenant_id", TENANT, primary_key=True),
        sa.Column("plan_id", ID, primary_key=True),
        sa.Column("key", sa.Text, primary_key=True),
        sa.Column("value", JSON, nullable=True),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("memory_working_memory")
    op.drop_table("memory_sessions")
    op.drop_table("memory_plan_correlations")
    op.drop_table("memory_plans")
    op.drop_table("memory_sub_tasks")
    op.drop_table("memory_task_contexts")
