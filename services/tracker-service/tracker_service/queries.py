"""Read side: the tracker's rows as the API's models, always within one tenant.

(Over 400 lines: one query function per `/v1/tracker` route, sharing the tenant filter,
cursor pagination and row-to-model mapping defined at the top.)
"""

from __future__ import annotations

import base64
import binascii
from collections import defaultdict
from datetime import datetime
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from soorma_common import events as wire
from soorma_common.errors import PlanNotFound, TaskNotFound, ValidationFailed
from soorma_common.tracker import (
    DelegationGroup,
    DurationStats,
    PlanSummary,
    ProjectorStats,
    StateStep,
    StatusCounts,
    TaskDetail,
    TaskSummary,
    TimelineEntry,
    TrackerMetrics,
    Wait,
)
from tracker_service.models import correlations, counters, events, plans, tasks, waits
from tracker_service.timeutil import utc, utc_or_none

METRICS_WINDOW = 20_000  # newest plans / actions the duration percentiles look at


# -- cursors -------------------------------------------------------------------------------


def encode_cursor(*parts: Any) -> str:
    return base64.urlsafe_b64encode(orjson.dumps(list(parts))).decode().rstrip("=")


def decode_cursor(cursor: str, size: int) -> list[Any]:
    """The parts of a cursor this API issued; 422 naming ``cursor`` otherwise."""
    try:
        parts = orjson.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if not isinstance(parts, list) or len(parts) != size:
            raise ValueError("wrong shape")
    except (ValueError, binascii.Error, orjson.JSONDecodeError):
        raise ValidationFailed(
            f"invalid cursor {cursor[:40]!r}: pass back the next_cursor of a previous page",
            details={"field": "cursor"},
        ) from None
    return parts


def _ts(value: str, field: str = "cursor") -> datetime:
    try:
        return datetime.fromisoformat(value)
    except (TypeError, ValueError):
        raise ValidationFailed(f"invalid {field}", details={"field": field}) from None


# -- rows to models ------------------------------------------------------------------------


def plan_summary(row: Any) -> PlanSummary:
    m = row._mapping if hasattr(row, "_mapping") else row
    started, ended = utc_or_none(m["started_at"]), utc_or_none(m["ended_at"])
    duration = (ended - started).total_seconds() * 1000 if started and ended else None
    return PlanSummary(
        plan_id=m["plan_id"],
        tenant_id=m["tenant_id"],
        status=m["status"],
        goal_event=m["goal_event"],
        goal_event_id=m["goal_event_id"],
        goal_correlation_id=m["goal_correlation_id"],
        session_id=m["session_id"],
        parent_plan_id=m["parent_plan_id"],
        planner=m["planner"],
        current_state=m["current_state"],
        reason=m["reason"],
        created_at=utc(m["created_at"]),
        started_at=started,
        updated_at=utc(m["updated_at"]),
        ended_at=ended,
        duration_ms=duration,
        event_count=m["event_count"],
        took_timeout_branch=any(
            isinstance(step, dict) and step.get("trigger_event") in TIMEOUT_EVENTS
            for step in (m.get("state_path") or [])
        ),
    )


TIMEOUT_EVENTS = frozenset({wire.PLAN_WAIT_TIMEOUT, wire.TASK_TIMEOUT})


async def _mark_cancellers(conn: AsyncConnection, tenant: str, page: list[PlanSummary]) -> None:
    """Who cancelled the cancelled plans of ``page`` (their ``plan.cancelled`` says)."""
    ids = [p.plan_id for p in page if p.status == "cancelled"]
    if not ids:
        return
    rows = await conn.execute(
        sa.select(events.c.plan_id, events.c.data).where(
            events.c.tenant_id == tenant,
            events.c.type == wire.PLAN_CANCELLED,
            events.c.plan_id.in_(ids),
        )
    )
    by = {
        plan_id: data.get("cancelled_by")
        for plan_id, data in rows
        if isinstance(data, dict) and isinstance(data.get("cancelled_by"), str)
    }
    for plan in page:
        plan.cancelled_by = by.get(plan.plan_id, plan.cancelled_by)


async def _mark_people_waits(conn: AsyncConnection, tenant: str, page: list[PlanSummary]) -> None:
    """Flag the plans of ``page`` that wait on a person, with the earliest deadline."""
    if not page:
        return
    rows = await conn.execute(
        sa.select(waits.c.plan_id, sa.func.min(waits.c.deadline))
        .where(
            waits.c.tenant_id == tenant,
            waits.c.kind == "human_input",
            waits.c.status == "waiting",
            waits.c.plan_id.in_([p.plan_id for p in page]),
        )
        .group_by(waits.c.plan_id)
    )
    pending = {plan_id: deadline for plan_id, deadline in rows}
    for plan in page:
        if plan.plan_id in pending:
            plan.waiting_on_person = True
            plan.waiting_until = utc_or_none(pending[plan.plan_id])


def state_path(row: Any) -> list[StateStep]:
    return [StateStep.model_validate(s) for s in row._mapping["state_path"] or []]


def task_summary(row: Any) -> TaskSummary:
    m = row._mapping if hasattr(row, "_mapping") else row
    req, resp = utc_or_none(m["requested_at"]), utc_or_none(m["responded_at"])
    latency = (resp - req).total_seconds() * 1000 if req and resp else None
    return TaskSummary(
        task_id=m["task_id"],
        correlation_id=m["correlation_id"],
        kind=m["kind"],
        plan_id=m["plan_id"],
        event_type=m["event_type"],
        response_event=m["response_event"],
        answer_type=m["answer_type"],
        status=m["status"],
        reason=m["reason"],
        error=m["error"],
        requester=m["requester"],
        agent=m["agent"],
        parent_task_id=m["parent_task_id"],
        delegation_group_id=m["delegation_group_id"],
        progress=m["progress"],
        requested_at=req,
        responded_at=resp,
        latency_ms=latency,
        result=m["result"],
    )


def wait_model(row: Any) -> Wait:
    m = row._mapping
    return Wait(
        wait_id=m["wait_id"],
        kind=m["kind"],
        plan_id=m["plan_id"],
        task_id=m["task_id"],
        sub_task_id=m["sub_task_id"],
        expected_event=m["expected_event"],
        timeout_seconds=m["timeout_seconds"],
        deadline=utc_or_none(m["deadline"]),
        status=m["status"],
        created_at=utc(m["created_at"]),
        answered_at=utc_or_none(m["answered_at"]),
        timed_out_at=utc_or_none(m["timed_out_at"]),
        timeout_event_id=m["timeout_event_id"],
        late_answer_at=utc_or_none(m["late_answer_at"]),
    )


def summarize(type_: str, topic: str, source: str | None, data: dict[str, Any]) -> str:
    """One line a person can read for a timeline entry."""
    who = source or "?"
    if type_ == wire.PLAN_STATE_CHANGED:
        return f"{data.get('from_state') or '(start)'} -> {data.get('to_state')}" + (
            f" on {data['trigger_event']}" if data.get("trigger_event") else ""
        )
    if type_ in {wire.PLAN_FAILED, wire.PLAN_PAUSED} and data.get("reason"):
        return f"{type_.split('.', 1)[1]}: {data['reason']}"
    by = f" by {data['timed_out_by']}" if data.get("timed_out_by") else ""
    if type_.startswith("plan."):
        return f"plan {type_.split('.', 1)[1].replace('_', ' ')}{by}"
    if type_ == wire.HUMAN_INPUT:
        return f"{who} asks a human: {data.get('question', '')}"[:200]
    if type_ == wire.TASK_PROGRESS:
        pct = data.get("progress")
        return (
            f"{who}: {int(pct * 100) if isinstance(pct, int | float) else '?'}% "
            f"{data.get('message') or ''}".strip()
        )
    if type_ == wire.TASK_CANCELLED:
        return f"{who} cancelled {data.get('event_type') or 'a task'}: {data.get('reason')}"[:200]
    if type_ == wire.TASK_CANCEL_REQUESTED:
        return f"cancel requested for task {data.get('task_id')}"
    if type_ == wire.TASK_TIMEOUT:
        return f"human input timed out{by} ({data.get('reason', 'hitl_timeout')})"
    if topic == wire.ACTION_REQUESTS:
        return f"{who} requests {type_}"
    failed = data.get("status") == "failed" or data.get("success") is False
    return f"{who} answers {type_}" + (f" (failed: {data.get('error')})" if failed else "")


# -- plans ---------------------------------------------------------------------------------


async def get_plan_row(conn: AsyncConnection, tenant: str, plan_id: str) -> Any:
    row = (
        await conn.execute(
            sa.select(plans).where(plans.c.tenant_id == tenant, plans.c.plan_id == plan_id)
        )
    ).first()
    if row is None:
        raise PlanNotFound(f"plan {plan_id!r} not found", details={"plan_id": plan_id})
    return row


def _matches_id(tenant: str, text: str) -> Any:
    """Plans whose id, one of whose correlation ids, or one of whose events' ids is
    ``text`` or starts with it."""
    pattern = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    by_correlation = sa.select(correlations.c.plan_id).where(
        correlations.c.tenant_id == tenant,
        correlations.c.correlation_id.like(pattern, escape="\\"),
    )
    by_event = sa.select(events.c.plan_id).where(
        events.c.tenant_id == tenant,
        events.c.plan_id.is_not(None),
        events.c.event_id.like(pattern, escape="\\"),
    )
    return sa.or_(
        plans.c.plan_id.like(pattern, escape="\\"),
        plans.c.goal_correlation_id.like(pattern, escape="\\"),
        plans.c.goal_event_id.like(pattern, escape="\\"),
        plans.c.plan_id.in_(by_correlation),
        plans.c.plan_id.in_(by_event),
    )


async def list_plans(
    conn: AsyncConnection,
    tenant: str,
    *,
    limit: int,
    cursor: str | None = None,
    filters: dict[str, Any] | None = None,
) -> tuple[list[PlanSummary], str | None]:
    """Newest first (``created_at``, then ``plan_id``, descending)."""
    query = sa.select(plans).where(plans.c.tenant_id == tenant)
    for name, value in (filters or {}).items():
        if value is None:
            continue
        if name == "q":
            query = query.where(_matches_id(tenant, str(value)))
        elif name == "since":
            query = query.where(plans.c.created_at >= value)
        elif name == "until":
            query = query.where(plans.c.created_at < value)
        elif isinstance(value, list):
            query = query.where(plans.c[name].in_(value))
        else:
            query = query.where(plans.c[name] == value)
    if cursor:
        at, plan_id = decode_cursor(cursor, 2)
        when = _ts(at)
        query = query.where(
            sa.or_(
                plans.c.created_at < when,
                sa.and_(plans.c.created_at == when, plans.c.plan_id < plan_id),
            )
        )
    query = query.order_by(plans.c.created_at.desc(), plans.c.plan_id.desc()).limit(limit + 1)
    rows = (await conn.execute(query)).all()
    more = len(rows) > limit
    rows = rows[:limit]
    page = [plan_summary(r) for r in rows]
    await _mark_people_waits(conn, tenant, page)
    await _mark_cancellers(conn, tenant, page)
    next_cursor = None
    if more and rows:
        last = rows[-1]._mapping
        next_cursor = encode_cursor(utc(last["created_at"]).isoformat(), last["plan_id"])
    return page, next_cursor


async def plan_by_correlation(conn: AsyncConnection, tenant: str, cid: str) -> PlanSummary:
    """The plan a goal's correlation id (or any correlation id of the plan) leads to."""
    row = (
        await conn.execute(
            sa.select(plans)
            .where(plans.c.tenant_id == tenant, plans.c.goal_correlation_id == cid)
            .order_by(plans.c.created_at)
            .limit(1)
        )
    ).first()
    if row is None:
        found = (
            await conn.execute(
                sa.select(plans)
                .join(
                    correlations,
                    sa.and_(
                        correlations.c.tenant_id == plans.c.tenant_id,
                        correlations.c.plan_id == plans.c.plan_id,
                    ),
                )
                .where(correlations.c.tenant_id == tenant, correlations.c.correlation_id == cid)
                .order_by(plans.c.created_at)
                .limit(1)
            )
        ).first()
        row = found
    if row is None:
        # A goal whose plan is known by its goal event id only.
        goal = sa.select(events.c.event_id).where(
            events.c.tenant_id == tenant,
            events.c.correlation_id == cid,
            events.c.topic == "action-requests",
        )
        row = (
            await conn.execute(
                sa.select(plans)
                .where(plans.c.tenant_id == tenant, plans.c.goal_event_id.in_(goal))
                .order_by(plans.c.created_at)
                .limit(1)
            )
        ).first()
    if row is None:
        raise PlanNotFound(f"no plan with correlation id {cid!r}", details={"correlation_id": cid})
    return plan_summary(row)


async def sub_plan_ids(conn: AsyncConnection, tenant: str, plan_id: str) -> list[str]:
    rows = await conn.execute(
        sa.select(plans.c.plan_id)
        .where(plans.c.tenant_id == tenant, plans.c.parent_plan_id == plan_id)
        .order_by(plans.c.created_at)
    )
    return [r[0] for r in rows]


async def plan_correlation_ids(conn: AsyncConnection, tenant: str, plan_id: str) -> list[str]:
    rows = await conn.execute(
        sa.select(correlations.c.correlation_id)
        .where(correlations.c.tenant_id == tenant, correlations.c.plan_id == plan_id)
        .order_by(correlations.c.first_seen)
    )
    return [r[0] for r in rows]


async def plan_waits(conn: AsyncConnection, tenant: str, plan_id: str) -> list[Wait]:
    rows = await conn.execute(
        sa.select(waits)
        .where(waits.c.tenant_id == tenant, waits.c.plan_id == plan_id)
        .order_by(waits.c.created_at)
    )
    return [wait_model(r) for r in rows]


# -- timeline and actions ------------------------------------------------------------------


async def timeline(
    conn: AsyncConnection,
    tenant: str,
    plan_id: str,
    *,
    limit: int,
    after_seq: int = 0,
) -> tuple[list[TimelineEntry], str | None]:
    """A plan's events in the order the tracker saw them (``seq``), after ``after_seq``."""
    rows = (
        await conn.execute(
            sa.select(events)
            .where(
                events.c.tenant_id == tenant, events.c.plan_id == plan_id, events.c.seq > after_seq
            )
            .order_by(events.c.seq)
            .limit(limit + 1)
        )
    ).all()
    more = len(rows) > limit
    rows = rows[:limit]
    answers = {}
    if rows:
        found = await conn.execute(
            sa.select(tasks.c.answer_event_id, tasks.c.requested_at, tasks.c.responded_at).where(
                tasks.c.tenant_id == tenant,
                tasks.c.answer_event_id.in_([r._mapping["event_id"] for r in rows]),
            )
        )
        for answer_id, req, resp in found:
            if req and resp:
                answers[answer_id] = (utc(resp) - utc(req)).total_seconds() * 1000
    entries = [
        TimelineEntry(
            seq=m["seq"],
            event_id=m["event_id"],
            type=m["type"],
            topic=m["topic"],
            time=utc(m["time"]),
            source=m["source"],
            correlation_id=m["correlation_id"],
            summary=summarize(m["type"], m["topic"], m["source"], m["data"] or {}),
            duration_ms=answers.get(m["event_id"]),
            data=m["data"] or {},
        )
        for m in (r._mapping for r in rows)
    ]
    next_cursor = encode_cursor(entries[-1].seq) if more and entries else None
    return entries, next_cursor


async def actions(
    conn: AsyncConnection,
    tenant: str,
    plan_id: str,
    *,
    limit: int,
    cursor: str | None,
) -> tuple[list[TaskSummary], str | None]:
    """The plan's requests (and human-input asks), oldest first."""
    query = sa.select(tasks).where(
        tasks.c.tenant_id == tenant, tasks.c.plan_id == plan_id, tasks.c.task_id.is_not(None)
    )
    if cursor:
        at, key = decode_cursor(cursor, 2)
        when = _ts(at)
        query = query.where(
            sa.or_(
                tasks.c.requested_at > when,
                sa.and_(tasks.c.requested_at == when, tasks.c.correlation_id > key),
            )
        )
    rows = (
        await conn.execute(
            query.order_by(tasks.c.requested_at, tasks.c.correlation_id).limit(limit + 1)
        )
    ).all()
    more = len(rows) > limit
    rows = rows[:limit]
    next_cursor = None
    if more and rows:
        last = rows[-1]._mapping
        next_cursor = encode_cursor(utc(last["requested_at"]).isoformat(), last["correlation_id"])
    return [task_summary(r) for r in rows], next_cursor


async def task_detail(conn: AsyncConnection, tenant: str, task_id: str) -> TaskDetail:
    row = (
        await conn.execute(
            sa.select(tasks).where(tasks.c.tenant_id == tenant, tasks.c.task_id == task_id).limit(1)
        )
    ).first()
    if row is None:
        raise TaskNotFound(f"task {task_id!r} not found", details={"task_id": task_id})
    subs = await conn.execute(
        sa.select(tasks)
        .where(tasks.c.tenant_id == tenant, tasks.c.parent_task_id == task_id)
        .order_by(tasks.c.requested_at)
    )
    wait_rows = await conn.execute(
        sa.select(waits).where(
            waits.c.tenant_id == tenant,
            sa.or_(waits.c.task_id == task_id, waits.c.wait_id == task_id),
        )
    )
    return TaskDetail(
        **task_summary(row).model_dump(),
        sub_tasks=[task_summary(r) for r in subs],
        waits=[wait_model(r) for r in wait_rows],
    )


async def pending_wait(
    conn: AsyncConnection, tenant: str, ident: str
) -> tuple[Any, dict[str, Any]]:
    """The wait ``ident`` names, a pending one first: a human input (by its sub-task id or
    the task that asked) or a planner WAIT (by its id or its plan's), with the data of
    the human-input request that opened it (``response_topic``; empty for a WAIT).

    Raises:
        TaskNotFound: the caller's tenant has no wait by that id.
    """
    row = (
        await conn.execute(
            sa.select(waits)
            .where(
                waits.c.tenant_id == tenant,
                sa.or_(
                    waits.c.wait_id == ident,
                    waits.c.task_id == ident,
                    sa.and_(waits.c.kind == "plan_wait", waits.c.plan_id == ident),
                ),
            )
            .order_by(sa.case((waits.c.status == "waiting", 0), else_=1), waits.c.created_at)
            .limit(1)
        )
    ).first()
    if row is None:
        raise TaskNotFound(f"nothing waits as {ident!r} in this tenant", details={"task_id": ident})
    if row.kind != "human_input":
        return row, {}
    asked = (
        await conn.execute(
            sa.select(events.c.data)
            .where(
                events.c.tenant_id == tenant,
                events.c.type == wire.HUMAN_INPUT,
                events.c.correlation_id == row.wait_id,
            )
            .order_by(events.c.seq.desc())
            .limit(1)
        )
    ).scalar()
    return row, dict(asked) if isinstance(asked, dict) else {}


async def delegation_group(conn: AsyncConnection, tenant: str, group_id: str) -> DelegationGroup:
    rows = (
        await conn.execute(
            sa.select(tasks)
            .where(tasks.c.tenant_id == tenant, tasks.c.delegation_group_id == group_id)
            .order_by(tasks.c.requested_at, tasks.c.correlation_id)
        )
    ).all()
    if not rows:
        raise TaskNotFound(
            f"delegation group {group_id!r} not found", details={"group_id": group_id}
        )
    members = [task_summary(r) for r in rows]
    counts: dict[str, int] = defaultdict(int)
    for m in members:
        counts[m.status.value] += 1
    return DelegationGroup(
        group_id=group_id,
        parent_task_id=members[0].parent_task_id,
        plan_id=members[0].plan_id,
        sub_tasks=members,
        counts=dict(counts),
        complete=all(m.responded_at is not None for m in members),
    )


# -- metrics -------------------------------------------------------------------------------


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)


def _stats(key: str, rows: list[tuple[str, float | None]]) -> DurationStats:
    done = [d for s, d in rows if d is not None]
    failed = sum(1 for s, _ in rows if s == "failed")
    completed = sum(1 for s, _ in rows if s == "completed")
    finished = failed + completed
    return DurationStats(
        key=key,
        count=len(rows),
        completed=completed,
        failed=failed,
        failure_rate=round(failed / finished, 4) if finished else 0.0,
        p50_ms=_pct(done, 0.5),
        p95_ms=_pct(done, 0.95),
    )


async def _counts(conn: AsyncConnection, table: sa.Table, tenant: str) -> StatusCounts:
    rows = await conn.execute(
        sa.select(table.c.status, sa.func.count())
        .where(table.c.tenant_id == tenant)
        .group_by(table.c.status)
    )
    by = {status: int(n) for status, n in rows}
    return StatusCounts(total=sum(by.values()), by_status=by)


async def metrics(conn: AsyncConnection, tenant: str) -> TrackerMetrics:
    plan_rows = (
        await conn.execute(
            sa.select(plans.c.goal_event, plans.c.status, plans.c.started_at, plans.c.ended_at)
            .where(plans.c.tenant_id == tenant)
            .order_by(plans.c.created_at.desc())
            .limit(METRICS_WINDOW)
        )
    ).all()
    by_goal: dict[str, list[tuple[str, float | None]]] = defaultdict(list)
    for goal, status, started, ended in plan_rows:
        duration = (utc(ended) - utc(started)).total_seconds() * 1000 if started and ended else None
        by_goal[goal or "(unknown)"].append((status, duration))
    task_rows = (
        await conn.execute(
            sa.select(
                tasks.c.agent,
                tasks.c.event_type,
                tasks.c.status,
                tasks.c.requested_at,
                tasks.c.responded_at,
            )
            .where(
                tasks.c.tenant_id == tenant, tasks.c.kind == "action", tasks.c.task_id.is_not(None)
            )
            .order_by(tasks.c.requested_at.desc())
            .limit(METRICS_WINDOW)
        )
    ).all()
    by_agent: dict[str, list[tuple[str, float | None]]] = defaultdict(list)
    by_type: dict[str, list[tuple[str, float | None]]] = defaultdict(list)
    every: list[tuple[str, float | None]] = []
    for agent, event_type, status, req, resp in task_rows:
        latency = (utc(resp) - utc(req)).total_seconds() * 1000 if req and resp else None
        item = (status, latency)
        every.append(item)
        if agent:
            by_agent[agent].append(item)
        by_type[event_type or "(unknown)"].append(item)
    counter_rows = dict((await conn.execute(sa.select(counters.c.name, counters.c.value))).all())
    return TrackerMetrics(
        plans=await _counts(conn, plans, tenant),
        tasks=await _counts(conn, tasks, tenant),
        goal_types=[_stats(k, v) for k, v in sorted(by_goal.items())],
        agents=[_stats(k, v) for k, v in sorted(by_agent.items())],
        event_types=[_stats(k, v) for k, v in sorted(by_type.items())],
        actions=_stats("*", every),
        waits=await _counts(conn, waits, tenant),
        projector=ProjectorStats(
            events=int(counter_rows.get("events", 0)),
            duplicates=int(counter_rows.get("duplicates", 0)),
            malformed=int(counter_rows.get("malformed", 0)),
            timeouts_fired=int(counter_rows.get("timeouts_fired", 0)),
        ),
    )
