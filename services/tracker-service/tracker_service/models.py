"""Tables of the tracker as SQLModel models (private to the service; the schema lives in
migrations, and ``tests/tracker_service/test_tracker_schema_matches_migrations.py`` keeps
the two in step).

The projection and the queries run SQLAlchemy Core statements on each model's table
(``Plan.__table__``, exported below as ``plans`` …): projecting an event is a handful of
upserts per batch, and no ORM session or model instance sits on that path.

Every row carries ``tenant_id`` and every look-up index starts with it: no row is reachable
without the caller's tenant. ``tracker_events`` is both the dedupe set (unique
``(tenant_id, event_id)``) and the timelines (``seq`` orders arrival).
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


ID = 256
TENANT = 128
TS = sa.DateTime(timezone=True)
SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


class TrackerTable(SQLModel, registry=registry()):
    """Base of the tracker's tables: their own metadata, apart from other services'."""


metadata = TrackerTable.metadata


def _ts(*, nullable: bool = False) -> Any:
    return Field(default=None, sa_type=TS, nullable=nullable)


def _json(*, nullable: bool = False) -> Any:
    return Field(default=None, sa_type=JSONDocument, nullable=nullable)


def _text() -> Any:
    return Field(default=None, sa_type=sa.Text)


class TrackerEvent(TrackerTable, table=True):
    """Every event seen once: the dedupe set and, ordered by ``seq``, the timelines."""

    __tablename__ = "tracker_events"
    __table_args__ = (
        sa.UniqueConstraint("tenant_id", "event_id", name="uq_tracker_events_id"),
        sa.Index("ix_tracker_events_plan", "tenant_id", "plan_id", "seq"),
        sa.Index("ix_tracker_events_correlation", "tenant_id", "correlation_id"),
    )

    seq: int | None = Field(
        default=None, sa_column=sa.Column("seq", SEQ, primary_key=True, autoincrement=True)
    )
    tenant_id: str = Field(max_length=TENANT)
    event_id: str = Field(max_length=ID)
    plan_id: str | None = Field(default=None, max_length=ID)
    type: str = Field(max_length=256)
    topic: str = Field(max_length=64)
    time: datetime = _ts()
    source: str | None = Field(default=None, max_length=256)
    correlation_id: str | None = Field(default=None, max_length=ID)
    data: Any = _json()


class Plan(TrackerTable, table=True):
    __tablename__ = "tracker_plans"
    __table_args__ = (
        sa.Index("ix_tracker_plans_created", "tenant_id", "created_at", "plan_id"),
        sa.Index("ix_tracker_plans_status", "tenant_id", "status", "created_at"),
        sa.Index("ix_tracker_plans_session", "tenant_id", "session_id"),
        sa.Index("ix_tracker_plans_parent", "tenant_id", "parent_plan_id"),
        sa.Index("ix_tracker_plans_goal_id", "tenant_id", "goal_event_id"),
        sa.Index("ix_tracker_plans_goal_correlation", "tenant_id", "goal_correlation_id"),
    )

    tenant_id: str = Field(primary_key=True, max_length=TENANT)
    plan_id: str = Field(primary_key=True, max_length=ID)
    status: str = Field(max_length=16)
    status_rank: int
    status_time: datetime = _ts()
    goal_event: str | None = Field(default=None, max_length=256)
    goal_event_id: str | None = Field(default=None, max_length=ID)
    goal_correlation_id: str | None = Field(default=None, max_length=ID)
    session_id: str | None = Field(default=None, max_length=ID)
    parent_plan_id: str | None = Field(default=None, max_length=ID)
    planner: str | None = Field(default=None, max_length=256)
    current_state: str | None = _text()
    state_time: datetime | None = _ts(nullable=True)
    reason: str | None = _text()
    result: Any = _json(nullable=True)
    state_path: Any = _json()
    created_at: datetime = _ts()
    started_at: datetime | None = _ts(nullable=True)
    updated_at: datetime = _ts()
    ended_at: datetime | None = _ts(nullable=True)
    event_count: int


class Correlation(TrackerTable, table=True):
    __tablename__ = "tracker_correlations"

    tenant_id: str = Field(primary_key=True, max_length=TENANT)
    correlation_id: str = Field(primary_key=True, max_length=ID)
    plan_id: str = Field(primary_key=True, max_length=ID)
    first_seen: datetime = _ts()


class Task(TrackerTable, table=True):
    """A request (task/action) and its answer, keyed by the correlation id that pairs them."""

    __tablename__ = "tracker_tasks"
    __table_args__ = (
        sa.Index("ix_tracker_tasks_task", "tenant_id", "task_id"),
        sa.Index("ix_tracker_tasks_plan", "tenant_id", "plan_id", "requested_at"),
        sa.Index("ix_tracker_tasks_parent_event", "tenant_id", "parent_event_id"),
        sa.Index("ix_tracker_tasks_group", "tenant_id", "delegation_group_id"),
    )

    tenant_id: str = Field(primary_key=True, max_length=TENANT)
    correlation_id: str = Field(primary_key=True, max_length=ID)
    task_id: str | None = Field(default=None, max_length=ID)
    kind: str = Field(max_length=16)
    plan_id: str | None = Field(default=None, max_length=ID)
    event_type: str | None = Field(default=None, max_length=256)
    response_event: str | None = Field(default=None, max_length=256)
    status: str = Field(max_length=16)
    status_rank: int
    status_time: datetime = _ts()
    reason: str | None = _text()
    error: str | None = _text()
    requester: str | None = Field(default=None, max_length=256)
    agent: str | None = Field(default=None, max_length=256)
    parent_event_id: str | None = Field(default=None, max_length=ID)
    parent_task_id: str | None = Field(default=None, max_length=ID)
    delegation_group_id: str | None = Field(default=None, max_length=ID)
    progress: float | None = None
    requested_at: datetime | None = _ts(nullable=True)
    responded_at: datetime | None = _ts(nullable=True)
    answer_type: str | None = Field(default=None, max_length=256)
    answer_event_id: str | None = Field(default=None, max_length=ID)
    result: Any = _json(nullable=True)


class Wait(TrackerTable, table=True):
    __tablename__ = "tracker_waits"
    __table_args__ = (
        sa.Index("ix_tracker_waits_due", "status", "deadline"),
        sa.Index("ix_tracker_waits_plan", "tenant_id", "plan_id"),
        sa.Index("ix_tracker_waits_task", "tenant_id", "task_id"),
    )

    tenant_id: str = Field(primary_key=True, max_length=TENANT)
    wait_id: str = Field(primary_key=True, max_length=ID)
    kind: str = Field(max_length=16)
    plan_id: str | None = Field(default=None, max_length=ID)
    session_id: str | None = Field(default=None, max_length=ID)
    task_id: str | None = Field(default=None, max_length=ID)
    sub_task_id: str | None = Field(default=None, max_length=ID)
    expected_event: str | None = Field(default=None, max_length=256)
    timeout_seconds: float | None = None
    deadline: datetime | None = _ts(nullable=True)
    status: str = Field(max_length=16)
    created_at: datetime = _ts()
    answered_at: datetime | None = _ts(nullable=True)
    timed_out_at: datetime | None = _ts(nullable=True)
    late_answer_at: datetime | None = _ts(nullable=True)
    timeout_event_id: str | None = Field(default=None, max_length=ID)
    # Exactly-once firing: a replica claims a due wait with a conditional UPDATE that sets
    # ``lease_until``; a claim whose owner died is taken over once the lease ran out.
    lease_owner: str | None = Field(default=None, max_length=128)
    lease_until: datetime | None = _ts(nullable=True)


class Session(TrackerTable, table=True):
    __tablename__ = "tracker_sessions"

    tenant_id: str = Field(primary_key=True, max_length=TENANT)
    session_id: str = Field(primary_key=True, max_length=ID)
    first_seen: datetime = _ts()
    last_seen: datetime = _ts()
    event_count: int


class Counter(TrackerTable, table=True):
    """Platform-wide projector counters (events, duplicates, malformed, timeouts_fired)."""

    __tablename__ = "tracker_counters"

    name: str = Field(primary_key=True, max_length=64)
    value: int = Field(sa_type=sa.BigInteger)


COUNTER_NAMES = ("events", "duplicates", "malformed", "timeouts_fired")

# The tables, for the projection's and the queries' Core statements.
events: sa.Table = TrackerEvent.__table__  # type: ignore[assignment]
plans: sa.Table = Plan.__table__  # type: ignore[assignment]
correlations: sa.Table = Correlation.__table__  # type: ignore[assignment]
tasks: sa.Table = Task.__table__  # type: ignore[assignment]
waits: sa.Table = Wait.__table__  # type: ignore[assignment]
sessions: sa.Table = Session.__table__  # type: ignore[assignment]
counters: sa.Table = Counter.__table__  # type: ignore[assignment]
