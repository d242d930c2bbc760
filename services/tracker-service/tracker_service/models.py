"""Tables of the tracker (private to the service; the schema lives in migrations).

Every row carries ``tenant_id`` and every look-up index starts with it: no row is reachable
without the caller's tenant. ``tracker_events`` is both the dedupe set (unique
``(tenant_id, event_id)``) and the timelines (``seq`` orders arrival).
"""

from __future__ import annotations

from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy.engine import Dialect

metadata = sa.MetaData()


class JSONDocument(sa.TypeDecorator[Any]):
    """JSON on Postgres; JSON text in a ``TEXT`` column on SQLite."""

    impl = sa.JSON
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> sa.types.TypeEngine[Any]:
        if dialect.name == "sqlite":
            return dialect.type_descriptor(sa.Text())
        return dialect.type_descriptor(sa.JSON(none_as_null=False))

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        if dialect.name == "sqlite":
            return orjson.dumps(value).decode()
        return value

    def process_result_value(self, value: Any, dialect: Dialect) -> Any:
        if dialect.name == "sqlite" and value is not None:
            return orjson.loads(value)
        return value


ID = sa.String(256)
TENANT = sa.String(128)
TS = sa.DateTime(timezone=True)
SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

events = sa.Table(
    "tracker_events",
    metadata,
    sa.Column("seq", SEQ, primary_key=True, autoincrement=True),
    sa.Column("tenant_id", TENANT, nullable=False),
    sa.Column("event_id", ID, nullable=False),
    sa.Column("plan_id", ID, nullable=True),
    sa.Column("type", sa.String(256), nullable=False),
    sa.Column("topic", sa.String(64), nullable=False),
    sa.Column("time", TS, nullable=False),
    sa.Column("source", sa.String(256), nullable=True),
    sa.Column("correlation_id", ID, nullable=True),
    sa.Column("data", JSONDocument(), nullable=False),
    sa.UniqueConstraint("tenant_id", "event_id", name="uq_tracker_events_id"),
    sa.Index("ix_tracker_events_plan", "tenant_id", "plan_id", "seq"),
    sa.Index("ix_tracker_events_correlation", "tenant_id", "correlation_id"),
)

plans = sa.Table(
    "tracker_plans",
    metadata,
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
    sa.Column("result", JSONDocument(), nullable=True),
    sa.Column("state_path", JSONDocument(), nullable=False),
    sa.Column("created_at", TS, nullable=False),
    sa.Column("started_at", TS, nullable=True),
    sa.Column("updated_at", TS, nullable=False),
    sa.Column("ended_at", TS, nullable=True),
    sa.Column("event_count", sa.Integer, nullable=False),
    sa.Index("ix_tracker_plans_created", "tenant_id", "created_at", "plan_id"),
    sa.Index("ix_tracker_plans_status", "tenant_id", "status", "created_at"),
    sa.Index("ix_tracker_plans_session", "tenant_id", "session_id"),
    sa.Index("ix_tracker_plans_parent", "tenant_id", "parent_plan_id"),
    sa.Index("ix_tracker_plans_goal_id", "tenant_id", "goal_event_id"),
    sa.Index("ix_tracker_plans_goal_correlation", "tenant_id", "goal_correlation_id"),
)

correlations = sa.Table(
    "tracker_correlations",
    metadata,
    sa.Column("tenant_id", TENANT, primary_key=True),
    sa.Column("correlation_id", ID, primary_key=True),
    sa.Column("plan_id", ID, primary_key=True),
    sa.Column("first_seen", TS, nullable=False),
)

# A request (task/action) and its answer, keyed by the correlation id that pairs them.
tasks = sa.Table(
    "tracker_tasks",
    metadata,
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
    sa.Column("result", JSONDocument(), nullable=True),
    sa.Index("ix_tracker_tasks_task", "tenant_id", "task_id"),
    sa.Index("ix_tracker_tasks_plan", "tenant_id", "plan_id", "requested_at"),
    sa.Index("ix_tracker_tasks_parent_event", "tenant_id", "parent_event_id"),
    sa.Index("ix_tracker_tasks_group", "tenant_id", "delegation_group_id"),
)

waits = sa.Table(
    "tracker_waits",
    metadata,
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
    # Exactly-once firing: a replica claims a due wait with a conditional UPDATE that sets
    # ``lease_until``; a claim whose owner died is taken over once the lease ran out.
    sa.Column("lease_owner", sa.String(128), nullable=True),
    sa.Column("lease_until", TS, nullable=True),
    sa.Index("ix_tracker_waits_due", "status", "deadline"),
    sa.Index("ix_tracker_waits_plan", "tenant_id", "plan_id"),
    sa.Index("ix_tracker_waits_task", "tenant_id", "task_id"),
)

sessions = sa.Table(
    "tracker_sessions",
    metadata,
    sa.Column("tenant_id", TENANT, primary_key=True),
    sa.Column("session_id", ID, primary_key=True),
    sa.Column("first_seen", TS, nullable=False),
    sa.Column("last_seen", TS, nullable=False),
    sa.Column("event_count", sa.Integer, nullable=False),
)

# Platform-wide projector counters (events, duplicates, malformed, timeouts_fired).
counters = sa.Table(
    "tracker_counters",
    metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("value", sa.BigInteger, nullable=False),
)

COUNTER_NAMES = ("events", "duplicates", "malformed", "timeouts_fired")
