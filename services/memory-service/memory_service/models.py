"""Tables of the memory-service (private to the service; the schema lives in migrations).

Every table's primary key starts with ``tenant_id``: no row is reachable without the
caller's tenant. Look-up side tables (sub-tasks by id, plans by correlation id) are keyed
``(tenant_id, id, ...)`` so the by-subtask / by-correlation routes are index seeks.
"""

from __future__ import annotations

from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy.engine import Dialect

metadata = sa.MetaData()


class JSONDocument(sa.TypeDecorator[Any]):
    """JSON on Postgres; JSON text in a ``TEXT`` column on SQLite.

    SQLite gives a column declared ``JSON`` numeric affinity, which turns a stored ``1.0``
    into the integer ``1``; a ``TEXT`` column keeps the document byte for byte.
    """

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
# Timestamps are always written as UTC; SQLite hands them back naive (see sql.base.utc).
TS = sa.DateTime(timezone=True)

task_contexts = sa.Table(
    "memory_task_contexts",
    metadata,
    sa.Column("tenant_id", TENANT, primary_key=True),
    sa.Column("task_id", ID, primary_key=True),
    sa.Column("plan_id", ID, nullable=True),
    sa.Column("event_type", sa.Text, nullable=False),
    sa.Column("correlation_id", ID, nullable=True),
    sa.Column("response_event", sa.Text, nullable=True),
    sa.Column("response_topic", sa.Text, nullable=False),
    sa.Column("data", JSONDocument(), nullable=False),
    sa.Column("state", JSONDocument(), nullable=False),
    # The SDK's own fields (soorma_common.bookkeeping.TaskBookkeeping): never user data.
    sa.Column("bookkeeping", JSONDocument(), nullable=False, server_default=sa.text("'{}'")),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("created_at", TS, nullable=False),
    sa.Column("updated_at", TS, nullable=False),
    sa.Index("ix_memory_task_contexts_plan", "tenant_id", "plan_id"),
)

sub_tasks = sa.Table(
    "memory_sub_tasks",
    metadata,
    sa.Column("tenant_id", TENANT, primary_key=True),
    sa.Column("task_id", ID, primary_key=True),
    sa.Column("sub_task_id", ID, primary_key=True),
    # Keeps the sub_tasks mapping in the order the client wrote it.
    sa.Column("position", sa.Integer, nullable=False),
    sa.Column("event_type", sa.Text, nullable=False),
    sa.Column("response_event", sa.Text, nullable=False),
    sa.Column("status", sa.String(32), nullable=False),
    sa.Column("parallel_group_id", ID, nullable=True),
    sa.Column("result", JSONDocument(), nullable=True),
    sa.Column("error", sa.Text, nullable=True),
    sa.ForeignKeyConstraint(
        ["tenant_id", "task_id"],
        ["memory_task_contexts.tenant_id", "memory_task_contexts.task_id"],
        ondelete="CASCADE",
    ),
    sa.Index("ix_memory_sub_tasks_sub_task", "tenant_id", "sub_task_id"),
)

plans = sa.Table(
    "memory_plans",
    metadata,
    sa.Column("tenant_id", TENANT, primary_key=True),
    sa.Column("plan_id", ID, primary_key=True),
    sa.Column("session_id", ID, nullable=True),
    sa.Column("parent_plan_id", ID, nullable=True),
    sa.Column("goal_event", sa.Text, nullable=False),
    sa.Column("goal_data", JSONDocument(), nullable=False),
    sa.Column("response_event", sa.Text, nullable=True),
    sa.Column("status", sa.String(32), nullable=False),
    sa.Column("current_state", sa.Text, nullable=True),
    sa.Column("state_machine", JSONDocument(), nullable=False),
    sa.Column("results", JSONDocument(), nullable=False),
    sa.Column("state", JSONDocument(), nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("created_at", TS, nullable=False),
    sa.Column("updated_at", TS, nullable=False),
    # The ordered list the record returns, so a plan context is one row read; the side
    # table below is the index by-correlation seeks (both written in one transaction).
    sa.Column("correlation_ids", JSONDocument(), nullable=False),
    # The SDK's own fields (soorma_common.bookkeeping.PlanBookkeeping): never user data.
    sa.Column("bookkeeping", JSONDocument(), nullable=False, server_default=sa.text("'{}'")),
    sa.Index("ix_memory_plans_session", "tenant_id", "session_id"),
    sa.Index("ix_memory_plans_parent", "tenant_id", "parent_plan_id"),
    sa.Index("ix_memory_plans_status", "tenant_id", "status", "updated_at"),
    # Retention scans finished plans by age across tenants.
    sa.Index("ix_memory_plans_retention", "status", "updated_at"),
)

plan_correlations = sa.Table(
    "memory_plan_correlations",
    metadata,
    sa.Column("tenant_id", TENANT, primary_key=True),
    sa.Column("correlation_id", ID, primary_key=True),
    sa.Column("plan_id", ID, primary_key=True),
    sa.Column("position", sa.Integer, nullable=False),
    sa.ForeignKeyConstraint(
        ["tenant_id", "plan_id"],
        ["memory_plans.tenant_id", "memory_plans.plan_id"],
        ondelete="CASCADE",
    ),
    sa.Index("ix_memory_plan_correlations_plan", "tenant_id", "plan_id"),
)

sessions = sa.Table(
    "memory_sessions",
    metadata,
    sa.Column("tenant_id", TENANT, primary_key=True),
    sa.Column("session_id", ID, primary_key=True),
    sa.Column("name", sa.Text, nullable=True),
    sa.Column("metadata", JSONDocument(), nullable=False),
    sa.Column("created_at", TS, nullable=False),
    sa.Column("updated_at", TS, nullable=False),
)

# Working memory is scoped by plan id but does not require a plan row: agents key it by
# whatever id their goal carries (e.g. the goal's correlation id).
working_memory = sa.Table(
    "memory_working_memory",
    metadata,
    sa.Column("tenant_id", TENANT, primary_key=True),
    sa.Column("plan_id", ID, primary_key=True),
    sa.Column("key", sa.Text, primary_key=True),
    sa.Column("value", JSONDocument(), nullable=True),
    sa.Column("created_at", TS, nullable=False),
    sa.Column("updated_at", TS, nullable=False),
)
