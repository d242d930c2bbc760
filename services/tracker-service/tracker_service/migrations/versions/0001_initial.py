"""Initial tracker schema: events (timeline + dedupe), plans, correlations, tasks, waits,
sessions, counters.

Revision ID: 0001_initial
Revises:
Create Date: 2026-11-24
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
# TEXT on SQLite: a column declared JSON there has numeric affinity.
JSON = sa.JSON().with_variant(sa.Text(), "sqlite")
SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
COUNTERS = ("events", "duplicates", "malformed", "timeouts_fired")


def upgrade() -> None:
    op.create_table(
        "tracker_events",
        sa.Column("seq", SEQ, primary_key=True, autoincrement=True),
        sa.Column("tenant_id", TENANT, nullable=False),
        sa.Column("event_id", ID, nullable=False),
        sa.Column("plan_id", ID, nullable=True),
        sa.Column("type", sa.String(256), nullable=False),
        sa.Column("topic", sa.String(64), nullable=False),
        sa.Column("time", TS, nullable=False),
        sa.Column("source", sa.String(256), nullable=True),
        sa.Column("correlation_id", ID, nullable=True),
        sa.Column("data", JSON, nullable=False),
        sa.UniqueConstraint("tenant_id", "event_id", name="uq_tracker_events_id"),
    )
    op.create_index("ix_tracker_events_plan", "tracker_events", ["tenant_id", "plan_id", "seq"])
    op.create_index(
        "ix_tracker_events_correlation", "tracker_events", ["tenant_id", "correlation_id"]
    )
    op.create_table(
        "tracker_plans",
        sa.Column("tenant_id", TENANT, primary_key=True),
        sa.Column("plan_id", ID, primary_key=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("status_rank", sa.Integer, nullable=False),
        sa.Column("status_time", TS, nullable=False),
        sa.Column("goal_event", sa.String(256), nullable=True),
        sa.Column("goal_event_id", ID, nullable=True),
        sa.Column("goal_correlation_id", ID, nullable=True),
        sa.Column("session_id", ID, nullable=True),
        sa.Column("parent_plan_id", ID, nullable=True),
        sa.Column("planner", sa.String(256), nullable=True),
        sa.Column("current_state", sa.Text, nullable=True),
        sa.Column("state_time", TS, nullable=True),
        sa.Column("reason", sa.Text, nullable=True),
        sa.Column("result", JSON, nullable=True),
        sa.Column("state_path", JSON, nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("started_at", TS, nullable=True),
        sa.Column("updated_at", TS, nullable=False),
        sa.Column("ended_at", TS, nullable=True),
        sa.Column("event_count", sa.Integer, nullable=False),
    )
    for name, cols in (
        ("ix_tracker_plans_created", ["tenant_id", "created_at", "plan_id"]),
        ("ix_tracker_plans_status", ["tenant_id", "status", "created_at"]),
        ("ix_tracker_plans_session", ["tenant_id", "session_id"]),
        ("ix_tracker_plans_parent", ["tenant_id", "parent_plan_id"]),
        ("ix_tracker_plans_goal_id", ["tenant_id", "goal_event_id"]),
        ("ix_tracker_plans_goal_correlation", ["tenant_id", "goal_correlation_id"]),
    ):
        op.create_index(name, "tracker_plans", cols)
    op.create_table(
        "tracker_correlations",
        sa.Column("tenant_id", TENANT, primary_key=True),
        sa.Column("correlation_id", ID, primary_key=True),
        sa.Column("plan_id", ID, primary_key=True),
        sa.Column("first_seen", TS, nullable=False),
    )
    op.create_table(
        "tracker_tasks",
        sa.Column("tenant_id", TENANT, primary_key=True),
        sa.Column("correlation_id", ID, primary_key=True),
        sa.Column("task_id", ID, nullable=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("plan_id", ID, nullable=True),
        sa.Column("event_type", sa.String(256), nullable=True),
        sa.Column("response_event", sa.String(256), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("status_rank", sa.Integer, nullable=False),
        sa.Column("status_time", TS, nullable=False),
        sa.Column("reason", sa.Text, nullable=True),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("requester", sa.String(256), nullable=True),
        sa.Column("agent", sa.String(256), nullable=True),
        sa.Column("parent_event_id", ID, nullable=True),
        sa.Column("parent_task_id", ID, nullable=True),
        sa.Column("delegation_group_id", ID, nullable=True),
        sa.Column("progress", sa.Float, nullable=True),
        sa.Column("requested_at", TS, nullable=True),
        sa.Column("responded_at", TS, nullable=True),
        sa.Column("answer_type", sa.String(256), nullable=True),
        sa.Column("answer_event_id", ID, nullable=True),
        sa.Column("result", JSON, nullable=True),
    )
    for name, cols in (
        ("ix_tracker_tasks_task", ["tenant_id", "task_id"]),
        ("ix_tracker_tasks_plan", ["tenant_id", "plan_id", "requested_at"]),
        ("ix_tracker_tasks_parent_event", ["tenant_id", "parent_event_id"]),
        ("ix_tracker_tasks_group", ["tenant_id", "delegation_group_id"]),
    ):
        op.create_index(name, "tracker_tasks", cols)
    op.create_table(
        "tracker_waits",
        sa.Column("tenant_id", TENANT, primary_key=True),
        sa.Column("wait_id", ID, primary_key=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("plan_id", ID, nullable=True),
        sa.Column("session_id", ID, nullable=True),
        sa.Column("task_id", ID, nullable=True),
        sa.Column("sub_task_id", ID, nullable=True),
        sa.Column("expected_event", sa.String(256), nullable=True),
        sa.Column("timeout_seconds", sa.Float, nullable=True),
        sa.Column("deadline", TS, nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("answered_at", TS, nullable=True),
        sa.Column("timed_out_at", TS, nullable=True),
        sa.Column("late_answer_at", TS, nullable=True),
        sa.Column("timeout_event_id", ID, nullable=True),
        sa.Column("lease_owner", sa.String(128), nullable=True),
        sa.Column("lease_until", TS, nullable=True),
    )
    op.create_index("ix_tracker_waits_due", "tracker_waits", ["status", "deadline"])
    op.create_index("ix_tracker_waits_plan", "tracker_waits", ["tenant_id", "plan_id"])
    op.create_index("ix_tracker_waits_task", "tracker_waits", ["tenant_id", "task_id"])
    op.create_table(
        "tracker_sessions",
        sa.Column("tenant_id", TENANT, primary_key=True),
        sa.Column("session_id", ID, primary_key=True),
        sa.Column("first_seen", TS, nullable=False),
        sa.Column("last_seen", TS, nullable=False),
        sa.Column("event_count", sa.Integer, nullable=False),
    )
    counters = op.create_table(
        "tracker_counters",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("value", sa.BigInteger, nullable=False),
    )
    op.bulk_insert(counters, [{"name": n, "value": 0} for n in COUNTERS])


def downgrade() -> None:
    for table in (
        "tracker_counters",
        "tracker_sessions",
        "tracker_waits",
        "tracker_tasks",
        "tracker_correlations",
        "tracker_plans",
        "tracker_events",
    ):
        op.drop_table(table)
