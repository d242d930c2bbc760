"""Tables of the memory-service as SQLModel models (private to the service; the schema
lives in migrations, and ``tests/memory_service/test_memory_schema_matches_migrations.py``
keeps the two in step).

The stores run prebuilt SQLAlchemy Core statements on each model's table
(``Plan.__table__``, exported below as ``plans`` …; on PostgreSQL straight on asyncpg, see
``sql/driver.py``): no ORM session or model instance sits on the request path.

Every table's primary key starts with ``tenant_id``: no row is reachable without the
caller's tenant. Look-up side tables (sub-tasks by id, plans by correlation id) are keyed
``(tenant_id, id, ...)`` so the by-subtask / by-correlation routes are index seeks.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import registry
from sqlmodel import Field, SQLModel


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


ID_LEN = 256
TENANT_LEN = 128
ID = sa.String(ID_LEN)
TENANT = sa.String(TENANT_LEN)
# Timestamps are always written as UTC; SQLite hands them back naive (see sql.base.utc).
TS = sa.DateTime(timezone=True)


class MemoryTable(SQLModel, registry=registry()):
    """Base of the memory service's tables: their own metadata, apart from other services'."""


metadata = MemoryTable.metadata


def _ts() -> Any:
    return Field(default=None, sa_type=TS, nullable=False)


def _json(*, nullable: bool = False) -> Any:
    return Field(default=None, sa_type=JSONDocument, nullable=nullable)


def _bookkeeping() -> Any:
    # The SDK's own fields (soorma_common.bookkeeping): never user data.
    return Field(
        default=None,
        sa_type=JSONDocument,
        nullable=False,
        sa_column_kwargs={"server_default": sa.text("'{}'")},
    )


def _text(*, nullable: bool) -> Any:
    return Field(default=None, sa_type=sa.Text, nullable=nullable)


class TaskContext(MemoryTable, table=True):
    __tablename__ = "memory_task_contexts"
    __table_args__ = (sa.Index("ix_memory_task_contexts_plan", "tenant_id", "plan_id"),)

    tenant_id: str = Field(primary_key=True, max_length=TENANT_LEN)
    task_id: str = Field(primary_key=True, max_length=ID_LEN)
    plan_id: str | None = Field(default=None, max_length=ID_LEN)
    event_type: str = _text(nullable=False)
    correlation_id: str | None = Field(default=None, max_length=ID_LEN)
    response_event: str | None = _text(nullable=True)
    response_topic: str = _text(nullable=False)
    data: Any = _json()
    state: Any = _json()
    bookkeeping: Any = _bookkeeping()  # soorma_common.bookkeeping.TaskBookkeeping
    version: int
    created_at: datetime = _ts()
    updated_at: datetime = _ts()


class SubTask(MemoryTable, table=True):
    __tablename__ = "memory_sub_tasks"
    __table_args__ = (
        sa.ForeignKeyConstraint(
            ["tenant_id", "task_id"],
            ["memory_task_contexts.tenant_id", "memory_task_contexts.task_id"],
            ondelete="CASCADE",
        ),
        sa.Index("ix_memory_sub_tasks_sub_task", "tenant_id", "sub_task_id"),
    )

    tenant_id: str = Field(primary_key=True, max_length=TENANT_LEN)
    task_id: str = Field(primary_key=True, max_length=ID_LEN)
    sub_task_id: str = Field(primary_key=True, max_length=ID_LEN)
    # Keeps the sub_tasks mapping in the order the client wrote it.
    position: int
    event_type: str = _text(nullable=False)
    response_event: str = _text(nullable=False)
    status: str = Field(max_length=32)
    parallel_group_id: str | None = Field(default=None, max_length=ID_LEN)
    result: Any = _json(nullable=True)
    error: str | None = _text(nullable=True)


class Plan(MemoryTable, table=True):
    __tablename__ = "memory_plans"
    __table_args__ = (
        sa.Index("ix_memory_plans_session", "tenant_id", "session_id"),
        sa.Index("ix_memory_plans_parent", "tenant_id", "parent_plan_id"),
        sa.Index("ix_memory_plans_status", "tenant_id", "status", "updated_at"),
        # Retention scans finished plans by age across tenants.
        sa.Index("ix_memory_plans_retention", "status", "updated_at"),
    )

    tenant_id: str = Field(primary_key=True, max_length=TENANT_LEN)
    plan_id: str = Field(primary_key=True, max_length=ID_LEN)
    session_id: str | None = Field(default=None, max_length=ID_LEN)
    parent_plan_id: str | None = Field(default=None, max_length=ID_LEN)
    goal_event: str = _text(nullable=False)
    goal_data: Any = _json()
    response_event: str | None = _text(nullable=True)
    status: str = Field(max_length=32)
    current_state: str | None = _text(nullable=True)
    state_machine: Any = _json()
    results: Any = _json()
    state: Any = _json()
    version: int
    created_at: datetime = _ts()
    updated_at: datetime = _ts()
    # The ordered list the record returns, so a plan context is one row read; the side
    # table below is the index by-correlation seeks (both written in one transaction).
    correlation_ids: Any = _json()
    bookkeeping: Any = _bookkeeping()  # soorma_common.bookkeeping.PlanBookkeeping


class PlanCorrelation(MemoryTable, table=True):
    __tablename__ = "memory_plan_correlations"
    __table_args__ = (
        sa.ForeignKeyConstraint(
            ["tenant_id", "plan_id"],
            ["memory_plans.tenant_id", "memory_plans.plan_id"],
            ondelete="CASCADE",
        ),
        sa.Index("ix_memory_plan_correlations_plan", "tenant_id", "plan_id"),
    )

    tenant_id: str = Field(primary_key=True, max_length=TENANT_LEN)
    correlation_id: str = Field(primary_key=True, max_length=ID_LEN)
    plan_id: str = Field(primary_key=True, max_length=ID_LEN)
    position: int


class Session(MemoryTable, table=True):
    __tablename__ = "memory_sessions"

    tenant_id: str = Field(primary_key=True, max_length=TENANT_LEN)
    session_id: str = Field(primary_key=True, max_length=ID_LEN)
    name: str | None = _text(nullable=True)
    # ``metadata`` is the column's name; the attribute cannot be (SQLAlchemy's own).
    session_metadata: Any = Field(
        default=None, sa_column=sa.Column("metadata", JSONDocument(), nullable=False)
    )
    created_at: datetime = _ts()
    updated_at: datetime = _ts()


class WorkingMemory(MemoryTable, table=True):
    """Working memory is scoped by plan id but does not require a plan row: agents key it
    by whatever id their goal carries (e.g. the goal's correlation id)."""

    __tablename__ = "memory_working_memory"

    tenant_id: str = Field(primary_key=True, max_length=TENANT_LEN)
    plan_id: str = Field(primary_key=True, max_length=ID_LEN)
    key: str = Field(primary_key=True, sa_type=sa.Text)
    value: Any = _json(nullable=True)
    created_at: datetime = _ts()
    updated_at: datetime = _ts()


# The tables, for the stores' Core statements.
task_contexts: sa.Table = TaskContext.__table__  # type: ignore[assignment]
sub_tasks: sa.Table = SubTask.__table__  # type: ignore[assignment]
plans: sa.Table = Plan.__table__  # type: ignore[assignment]
plan_correlations: sa.Table = PlanCorrelation.__table__  # type: ignore[assignment]
sessions: sa.Table = Session.__table__  # type: ignore[assignment]
working_memory: sa.Table = WorkingMemory.__table__  # type: ignore[assignment]
