"""Projecting a batch of events in one transaction.

1. New events are inserted into ``tracker_events`` (unique per tenant and event id: a
   redelivered or duplicated event is dropped here and changes nothing else).
2. The rows the batch touches (plans, tasks, waits) are loaded once, the events are applied
   to them in memory, and the changed rows are written back with one upsert per table.

Applying is order-independent: statuses move by ``(class, event time)`` (pending < active <
terminal; within a class the later event wins), paths are sorted by time, a result that
arrives before its request waits in its task row for the request, and a sub-task or
sub-plan before its parent links up when the parent arrives.

Batches of several replicas are serialized (a transaction-scoped advisory lock on
PostgreSQL; SQLite's single writer lock, taken at the start), so a read-modify-write never
loses another replica's update.

(Over 400 lines: a batch is loaded, applied and written in one transaction; the apply
side is one small function per platform event kind, dispatched by ``_apply``.)
"""

from __future__ import annotations

import logging
import uuid
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from soorma_common import events as wire
from soorma_common.tracker import TERMINAL_PLAN_STATUSES, TERMINAL_TASK_STATUSES
from tracker_service import events as et
from tracker_service.db import lock_writes, upsert
from tracker_service.models import correlations, counters, events, plans, sessions, tasks, waits
from tracker_service.timeutil import utc

log = logging.getLogger("tracker_service.projection")

MAX_STORED_DATA = 64 * 1024
_CLASS = {
    "pending": 0,
    "running": 1,
    "paused": 1,
    "delegated": 1,
    "waiting": 1,
    "completed": 2,
    "failed": 2,
    "cancelled": 2,
}
_PLAN_STATUS_BY_TYPE = {
    wire.PLAN_STARTED: "running",
    wire.PLAN_PAUSED: "paused",
    wire.PLAN_RESUMED: "running",
    wire.PLAN_COMPLETED: "completed",
    wire.PLAN_FAILED: "failed",
    wire.PLAN_CANCELLED: "cancelled",
}
# Statuses whose ``reason`` says why (kept until the row moves on).
REASONED_STATUSES = frozenset({"failed", "paused", "cancelled"})
_PLAN_ENDS = frozenset(
    {wire.PLAN_COMPLETED, wire.PLAN_FAILED, wire.PLAN_CANCELLED, wire.PLAN_RESUMED}
)

Key = tuple[str, str]


@dataclass
class BatchResult:
    """What one batch did (for counters and tests)."""

    projected: int = 0
    duplicates: int = 0
    malformed: int = 0
    timeouts_fired: int = 0
    plan_keys: set[Key] = field(default_factory=set)


_TIMEOUT_NAMESPACE = uuid.UUID("6f1d3c52-8a0e-4b7e-9a43-2c5d0e7b9f10")


def timeout_event_id(tenant: str, wait_id: str) -> str:
    """The id of the tracker's timeout event of one wait (the same on every attempt)."""
    return str(uuid.uuid5(_TIMEOUT_NAMESPACE, f"{tenant}/{wait_id}"))


def _time_out(b: _Batch, w: dict[str, Any], e: et.Ev) -> None:
    """``w`` ended by the timeout event ``e``. The tracker's own timeout (its id) is
    counted by whichever comes first, this projection or the firing replica marking the
    wait (both only from ``waiting``, under the write lock): once either way."""
    w.update(status="timed_out", timed_out_at=e.time, timeout_event_id=e.id)
    if e.id == timeout_event_id(e.tenant, w["wait_id"]):
        b.timeouts_fired += 1


def _set_status(row: dict[str, Any], status: str, at: datetime, reason: str | None = None) -> bool:
    """Move ``row`` to ``status`` if ``(class, at)`` is not older than the current one.

    ``reason`` belongs to the status it came with: a row moving to a status that carries
    none (running, completed, ...) drops the reason of an earlier pause or failure.
    """
    new = (_CLASS[status], at)
    old = (_CLASS[row["status"]], utc(row["status_time"]))
    if new < old:
        return False
    row["status"], row["status_rank"], row["status_time"] = status, _CLASS[status], at
    if reason is not None:
        row["reason"] = reason
    elif status not in REASONED_STATUSES:
        row["reason"] = None
    return True


def _trim(data: Any) -> Any:
    import orjson

    try:
        size = len(orjson.dumps(data))
    except TypeError:
        return {"_unserializable": True}
    return data if size <= MAX_STORED_DATA else {"_truncated": True, "size": size}


def _new_plan(tenant: str, plan_id: str, at: datetime) -> dict[str, Any]:
    return {
        "tenant_id": tenant,
        "plan_id": plan_id,
        "status": "pending",
        "status_rank": 0,
        "status_time": at,
        "goal_event": None,
        "goal_event_id": None,
        "goal_correlation_id": None,
        "session_id": None,
        "parent_plan_id": None,
        "planner": None,
        "current_state": None,
        "state_time": None,
        "reason": None,
        "result": None,
        "state_path": [],
        "created_at": at,
        "started_at": None,
        "updated_at": at,
        "ended_at": None,
        "event_count": 0,
    }


def _new_task(tenant: str, key: str, at: datetime, kind: str = "action") -> dict[str, Any]:
    return {
        "tenant_id": tenant,
        "correlation_id": key,
        "task_id": None,
        "kind": kind,
        "plan_id": None,
        "event_type": None,
        "response_event": None,
        "status": "pending",
        "status_rank": 0,
        "status_time": at,
        "reason": None,
        "error": None,
        "requester": None,
        "agent": None,
        "parent_event_id": None,
        "parent_task_id": None,
        "delegation_group_id": None,
        "progress": None,
        "requested_at": None,
        "responded_at": None,
        "answer_type": None,
        "answer_event_id": None,
        "result": None,
    }


def _new_wait(tenant: str, wait_id: str, kind: str, ev: et.Ev) -> dict[str, Any]:
    return {
        "tenant_id": tenant,
        "wait_id": wait_id,
        "kind": kind,
        "plan_id": ev.plan_id,
        "session_id": ev.session_id,
        "task_id": None,
        "sub_task_id": None,
        "expected_event": None,
        "timeout_seconds": ev.timeout_seconds,
        "deadline": ev.deadline,
        "status": "waiting",
        "created_at": ev.time,
        "answered_at": None,
        "timed_out_at": None,
        "late_answer_at": None,
        "timeout_event_id": None,
        "lease_owner": None,
        "lease_until": None,
    }


class _Batch:
    """The rows one batch touches, loaded once and written back once."""

    def __init__(self) -> None:
        self.plans: dict[Key, dict[str, Any]] = {}
        self.tasks: dict[Key, dict[str, Any]] = {}
        self.task_by_id: dict[Key, Key] = {}
        self.children: dict[Key, list[Key]] = defaultdict(list)
        self.waits: dict[Key, dict[str, Any]] = {}
        self.plan_waits: dict[Key, list[Key]] = defaultdict(list)
        self.goal_events: dict[Key, tuple[str, str | None]] = {}
        self.plans_by_goal: dict[Key, list[Key]] = defaultdict(list)
        self.dirty_plans: set[Key] = set()
        self.dirty_tasks: set[Key] = set()
        self.dirty_waits: set[Key] = set()
        self.timeouts_fired = 0
        self.correlations: dict[tuple[str, str, str], datetime] = {}
        self.sessions: dict[Key, list[Any]] = {}
        # Events already stored under a correlation id a request of this batch uses:
        # an answer that arrived before its request.
        self.answers: dict[Key, list[et.Ev]] = defaultdict(list)

    # -- row access ----------------------------------------------------------------------

    def plan(self, tenant: str, plan_id: str, at: datetime) -> dict[str, Any]:
        key = (tenant, plan_id)
        row = self.plans.get(key)
        if row is None:
            row = self.plans[key] = _new_plan(tenant, plan_id, at)
        self.dirty_plans.add(key)
        return row

    def task(self, tenant: str, key: str, at: datetime, kind: str = "action") -> dict[str, Any]:
        k = (tenant, key)
        row = self.tasks.get(k)
        if row is None:
            row = self.tasks[k] = _new_task(tenant, key, at, kind)
        self.dirty_tasks.add(k)
        return row

    def task_by_task_id(self, tenant: str, task_id: str | None) -> dict[str, Any] | None:
        if task_id is None:
            return None
        key = self.task_by_id.get((tenant, task_id))
        if key is None:
            return None
        self.dirty_tasks.add(key)
        return self.tasks[key]

    def index_task(self, row: dict[str, Any]) -> None:
        key = (row["tenant_id"], row["correlation_id"])
        if row["task_id"]:
            self.task_by_id[(row["tenant_id"], row["task_id"])] = key
        if row["parent_event_id"]:
            self.children[(row["tenant_id"], row["parent_event_id"])].append(key)

    def wait(self, tenant: str, wait_id: str) -> dict[str, Any] | None:
        key = (tenant, wait_id)
        row = self.waits.get(key)
        if row is not None:
            self.dirty_waits.add(key)
        return row

    def add_wait(self, row: dict[str, Any]) -> dict[str, Any]:
        key = (row["tenant_id"], row["wait_id"])
        existing = self.waits.get(key)
        if existing is not None:
            self.dirty_waits.add(key)
            return existing
        self.waits[key] = row
        self.dirty_waits.add(key)
        if row["plan_id"]:
            self.plan_waits[(row["tenant_id"], row["plan_id"])].append(key)
        return row


# -- loading -------------------------------------------------------------------------------


def _by_tenant(keys: Iterable[Key]) -> dict[str, list[str]]:
    grouped: dict[str, set[str]] = defaultdict(set)
    for tenant, value in keys:
        grouped[tenant].add(value)
    return {tenant: sorted(values) for tenant, values in grouped.items()}


async def _select(
    conn: AsyncConnection,
    table: sa.Table,
    column: str,
    keys: Iterable[Key],
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for tenant, values in _by_tenant(keys).items():
        for start in range(0, len(values), 500):
            chunk = values[start : start + 500]
            result = await conn.execute(
                sa.select(table).where(table.c.tenant_id == tenant, table.c[column].in_(chunk))
            )
            rows.extend(dict(r._mapping) for r in result)
    return rows


async def _select_any(
    conn: AsyncConnection, table: sa.Table, wanted: dict[str, Iterable[Key]]
) -> list[dict[str, Any]]:
    """Rows of ``table`` matching any ``column IN keys`` of ``wanted``, per tenant, in one
    statement per tenant (each statement is a round trip to the database)."""
    by_tenant: dict[str, dict[str, list[str]]] = defaultdict(dict)
    for column, keys in wanted.items():
        for tenant, values in _by_tenant(keys).items():
            by_tenant[tenant][column] = values
    rows: list[dict[str, Any]] = []
    for tenant, columns in by_tenant.items():
        if max(len(v) for v in columns.values()) > 500:
            for column, values in columns.items():
                rows.extend(await _select(conn, table, column, [(tenant, v) for v in values]))
            continue
        result = await conn.execute(
            sa.select(table).where(
                table.c.tenant_id == tenant,
                sa.or_(*(table.c[column].in_(values) for column, values in columns.items())),
            )
        )
        rows.extend(dict(r._mapping) for r in result)
    return rows


async def _load(conn: AsyncConnection, evs: Sequence[et.Ev]) -> _Batch:
    b = _Batch()
    plan_keys = {(e.tenant, e.plan_id) for e in evs if e.plan_id}
    task_keys: set[Key] = set()
    task_ids: set[Key] = set()
    request_ids: set[Key] = set()
    goal_ids: set[Key] = set()
    wait_ids: set[Key] = set()
    cancelled_ids: set[Key] = set()
    for e in evs:
        if e.correlation_id:
            task_keys.add((e.tenant, e.correlation_id))
            wait_ids.add((e.tenant, e.correlation_id))
        if e.is_request:
            task_keys.add((e.tenant, e.task_key))
            request_ids.add((e.tenant, e.id))
            if e.parent_event_id:
                task_ids.add((e.tenant, e.parent_event_id))
        for name in ("task_id", "sub_task_id"):
            value = e.data.get(name)
            if isinstance(value, str) and value:
                task_ids.add((e.tenant, value))
                task_keys.add((e.tenant, value))
                wait_ids.add((e.tenant, value))
        if e.type == wire.PLAN_STARTED and e.parent_event_id:
            goal_ids.add((e.tenant, e.parent_event_id))
        if e.type == wire.PLAN_WAIT_TIMEOUT and isinstance(e.data.get("wait_id"), str):
            wait_ids.add((e.tenant, e.data["wait_id"]))
        if e.type == wire.TASK_CANCELLED and isinstance(e.data.get("task_id"), str):
            cancelled_ids.add((e.tenant, e.data["task_id"]))  # and its human inputs
    for row in await _select_any(conn, plans, {"plan_id": plan_keys, "goal_event_id": request_ids}):
        b.plans.setdefault((row["tenant_id"], row["plan_id"]), row)
    for key, row in b.plans.items():
        if row["goal_event_id"]:
            b.plans_by_goal[(row["tenant_id"], row["goal_event_id"])].append(key)
    loaded: dict[Key, dict[str, Any]] = {}
    for row in await _select_any(
        conn,
        tasks,
        {
            "correlation_id": task_keys,
            "task_id": task_ids,
            "parent_event_id": request_ids | cancelled_ids,
        },
    ):
        loaded.setdefault((row["tenant_id"], row["correlation_id"]), row)
    # The tasks that asked a human: an answer moves them back to running.
    askers = {
        (r["tenant_id"], r["parent_task_id"])
        for r in loaded.values()
        if r["kind"] == "human_input" and r["parent_task_id"]
    }
    for row in await _select(conn, tasks, "task_id", askers - task_ids):
        loaded.setdefault((row["tenant_id"], row["correlation_id"]), row)
    b.tasks = loaded
    for row in loaded.values():
        b.index_task(row)
    wait_ids |= {
        (r["tenant_id"], r["correlation_id"])
        for r in loaded.values()
        if r["kind"] == "human_input" and (r["tenant_id"], r["parent_task_id"]) in cancelled_ids
    }
    for row in await _select_any(conn, waits, {"wait_id": wait_ids, "plan_id": plan_keys}):
        b.add_wait(row)
    b.dirty_waits.clear()
    asked = {(e.tenant, e.task_key) for e in evs if e.is_request or e.type == wire.HUMAN_INPUT}
    for row in await _select_any(conn, events, {"event_id": goal_ids, "correlation_id": asked}):
        tenant = row["tenant_id"]
        if (tenant, row["event_id"]) in goal_ids:
            b.goal_events[(tenant, row["event_id"])] = (row["type"], row["correlation_id"])
        if (
            (tenant, row["correlation_id"]) in asked
            and row["topic"] != wire.ACTION_REQUESTS
            and row["type"] not in wire.NOT_ANSWERS
        ):
            b.answers[(tenant, row["correlation_id"])].append(_stored_ev(row))
    return b


def _stored_ev(row: dict[str, Any]) -> et.Ev:
    return et.Ev(
        tenant=row["tenant_id"],
        id=row["event_id"],
        type=row["type"],
        topic=row["topic"],
        time=utc(row["time"]),
        source=row["source"],
        plan_id=row["plan_id"],
        correlation_id=row["correlation_id"],
        parent_event_id=None,
        session_id=None,
        response_event=None,
        subject=None,
        data=row["data"] or {},
    )


def _early_answers(b: _Batch, tenant: str, key: str) -> None:
    """Apply an answer stored before its request (or human-input ask) arrived (the
    first one :func:`_answers` accepts)."""
    for answer in sorted(b.answers.get((tenant, key), []), key=lambda a: (a.time, a.id)):
        _apply_answer(b, answer)


def _answers(t: dict[str, Any], e: et.Ev) -> bool:
    """Whether ``e`` (carrying ``t``'s correlation id) is the answer to request ``t``.

    The expected ``response_event``, or any type on a result topic (not
    ``system-events``) from the request's plan: a worker may answer
    ``web.search.requested`` with ``web.search.no_results`` or ``web.search.failed``.
    """
    if not t["response_event"] or e.type == t["response_event"]:
        return True
    return e.topic != wire.SYSTEM_EVENTS and (
        t["plan_id"] is None or e.plan_id is None or t["plan_id"] == e.plan_id
    )


# -- applying ------------------------------------------------------------------------------


def _apply_plan(b: _Batch, e: et.Ev) -> None:
    assert e.plan_id is not None
    p = b.plan(e.tenant, e.plan_id, e.time)
    p["created_at"] = min(utc(p["created_at"]), e.time)
    p["updated_at"] = max(utc(p["updated_at"]), e.time)
    p["event_count"] += 1
    if e.session_id and not p["session_id"]:
        p["session_id"] = e.session_id
    d = e.data
    parent = d.get("parent_plan_id")
    if isinstance(parent, str) and parent and e.type in wire.PLAN_LIFECYCLE_EVENTS:
        p["parent_plan_id"] = parent
    if e.correlation_id:
        b.correlations[(e.tenant, e.correlation_id, e.plan_id)] = e.time
    if e.type in wire.PLAN_LIFECYCLE_EVENTS:
        state = d.get("current_state")
        if isinstance(state, str) and (p["state_time"] is None or e.time >= utc(p["state_time"])):
            p["current_state"], p["state_time"] = state, e.time
    if e.type in wire.PLAN_LIFECYCLE_EVENTS and e.type != wire.PLAN_WAIT_TIMEOUT:
        # The planner publishes its plan's lifecycle (a ChoreographyPlanner plan may
        # show only its end); plan.wait_timeout comes from the tracker itself.
        p["planner"] = (
            e.source if e.type == wire.PLAN_STARTED and e.source else p["planner"] or e.source
        )
    if e.type == wire.PLAN_STARTED:
        p["started_at"] = e.time if p["started_at"] is None else min(utc(p["started_at"]), e.time)
        goal_event = d.get("goal_event")
        if isinstance(goal_event, str) and goal_event and not p["goal_event"]:
            p["goal_event"] = goal_event[:256]
        if e.parent_event_id and not p["goal_event_id"]:
            p["goal_event_id"] = e.parent_event_id
            goal = b.goal_events.get((e.tenant, e.parent_event_id))
            if goal is not None:
                p["goal_event"], p["goal_correlation_id"] = goal
            b.plans_by_goal[(e.tenant, e.parent_event_id)].append((e.tenant, e.plan_id))
    if e.type == wire.PLAN_STATE_CHANGED:
        to_state = d.get("to_state")
        if isinstance(to_state, str) and all(s["event_id"] != e.id for s in p["state_path"]):
            step = {
                "from_state": d.get("from_state"),
                "to_state": to_state,
                "trigger_event": d.get("trigger_event"),
                "at": e.time.isoformat(),
                "event_id": e.id,
            }
            p["state_path"] = sorted(
                [*p["state_path"], step], key=lambda s: (s["at"], s["event_id"])
            )
        status = d.get("status")
        if status in _CLASS and status not in {"delegated", "waiting"}:
            _set_status(p, status, e.time)
    status = _PLAN_STATUS_BY_TYPE.get(e.type)
    if status is not None:
        reason = d.get("reason") if status in REASONED_STATUSES else None
        if (
            _set_status(p, status, e.time, str(reason) if reason is not None else None)
            and status in TERMINAL_PLAN_STATUSES
        ):
            p["ended_at"] = e.time
    if (
        e.topic != wire.ACTION_REQUESTS
        and d.get("plan_id") == e.plan_id
        and "result" in d
        and d.get("status") == "completed"
    ):
        p["result"] = _trim(d.get("result"))
    if e.type in _PLAN_ENDS:
        for key in b.plan_waits.get((e.tenant, e.plan_id), []):
            w = b.waits[key]
            if (
                w["kind"] == "plan_wait"
                and w["status"] == "waiting"
                and utc(w["created_at"]) <= e.time
            ):
                w["status"], w["answered_at"] = "answered", e.time
                b.dirty_waits.add(key)


def _apply_request(b: _Batch, e: et.Ev) -> None:
    t = b.task(e.tenant, e.task_key, e.time)
    t["task_id"] = e.id
    t["event_type"] = e.type
    t["response_event"] = e.response_event
    t["requester"] = e.source
    t["requested_at"] = e.time
    t["plan_id"] = e.plan_id or t["plan_id"]
    t["parent_event_id"] = e.parent_event_id
    t["delegation_group_id"] = e.delegation_group
    if t["answer_type"] and e.response_event and t["answer_type"] != e.response_event:
        # An event taken for the answer before the request arrived may not be it: apply
        # the stored answers again (below) against the request.
        t.update(
            status="pending",
            status_rank=0,
            status_time=e.time,
            answer_type=None,
            answer_event_id=None,
            responded_at=None,
            agent=None,
            result=None,
            error=None,
        )
    b.index_task(t)
    parent = b.task_by_task_id(e.tenant, e.parent_event_id)
    if parent is not None and parent is not t:
        t["parent_task_id"] = e.parent_event_id
        _set_status(parent, "delegated", e.time)
    for child_key in b.children.get((e.tenant, e.id), []):
        child = b.tasks[child_key]
        if child is t:
            continue
        child["parent_task_id"] = e.id
        b.dirty_tasks.add(child_key)
        _set_status(t, "delegated", utc(child["requested_at"] or child["status_time"]))
    _early_answers(b, e.tenant, e.task_key)
    for plan_key in b.plans_by_goal.get((e.tenant, e.id), []):
        p = b.plans[plan_key]
        p["goal_event"], p["goal_correlation_id"] = e.type, e.correlation_id
        b.dirty_plans.add(plan_key)
    b.goal_events[(e.tenant, e.id)] = (e.type, e.correlation_id)


def _answer_status(e: et.Ev) -> tuple[str, str | None]:
    d = e.data
    error = d.get("error")
    failed = (
        d.get("status") == "failed"
        or d.get("success") is False
        or bool(error)
        or e.type.endswith(".failed")
    )
    return ("failed" if failed else "completed"), (str(error)[:2000] if error else None)


def _apply_answer(b: _Batch, e: et.Ev) -> None:
    assert e.correlation_id is not None
    key = (e.tenant, e.correlation_id)
    t = b.tasks.get(key)
    if t is not None and not _answers(t, e):
        return  # carries the correlation id, but is not the answer
    wait = b.waits.get(key)
    if t is None:
        if e.plan_id is None and wait is None:
            return  # not about anything the tracker follows
        t = b.task(e.tenant, e.correlation_id, e.time)
    if t["answer_event_id"] is not None:
        if wait is not None and wait["status"] == "timed_out" and not wait["late_answer_at"]:
            wait["late_answer_at"] = e.time
            b.dirty_waits.add(key)
        return
    b.dirty_tasks.add(key)
    status, error = _answer_status(e)
    t["answer_type"], t["answer_event_id"] = e.type, e.id
    t["responded_at"], t["agent"] = e.time, e.source
    t["plan_id"] = t["plan_id"] or e.plan_id
    t["result"] = _trim(e.data.get("result", e.data))
    t["error"] = error
    if t["kind"] == "human_input" and wait is not None and wait["status"] == "timed_out":
        # Answered after the timeout: recorded, not acted on.
        wait["late_answer_at"] = wait["late_answer_at"] or e.time
        b.dirty_waits.add(key)
        return
    if t["status"] != "cancelled":  # a cancelled task stays cancelled (a late answer)
        _set_status(t, status, e.time, None)
    if wait is not None and wait["status"] == "waiting":
        wait["status"], wait["answered_at"] = "answered", e.time
        b.dirty_waits.add(key)
    if t["kind"] == "human_input":
        parent = b.task_by_task_id(e.tenant, t["parent_task_id"])
        if parent is not None:
            _set_status(parent, "running", e.time)


def _apply_plan_wait_answer(b: _Batch, e: et.Ev) -> None:
    plan_id = e.plan_id or e.correlation_id
    if plan_id is None:
        return
    for key in b.plan_waits.get((e.tenant, plan_id), []):
        w = b.waits[key]
        if w["kind"] != "plan_wait" or w["expected_event"] != e.type:
            continue
        if w["status"] == "waiting" and utc(w["created_at"]) <= e.time:
            w["status"], w["answered_at"] = "answered", e.time
            b.dirty_waits.add(key)
        elif w["status"] == "timed_out" and not w["late_answer_at"]:
            w["late_answer_at"] = e.time
            b.dirty_waits.add(key)


def _apply_progress(b: _Batch, e: et.Ev) -> None:
    key = e.correlation_id or e.data.get("task_id")
    if not isinstance(key, str):
        return
    t = b.task(e.tenant, key, e.time)
    progress = e.data.get("progress")
    if progress is not None:
        t["progress"] = float(progress)
    _set_status(t, "running", e.time)


def _apply_human_input(b: _Batch, e: et.Ev) -> None:
    assert e.correlation_id is not None
    sub = e.correlation_id
    response_event = e.data.get("response_event") or e.response_event
    task_id = e.data.get("task_id") if isinstance(e.data.get("task_id"), str) else None
    t = b.task(e.tenant, sub, e.time, kind="human_input")
    t.update(
        kind="human_input",
        task_id=sub,
        event_type=e.type,
        response_event=response_event,
        requester=e.source,
        requested_at=e.time,
        parent_task_id=task_id,
        parent_event_id=task_id,
    )
    t["plan_id"] = t["plan_id"] or e.plan_id
    answered_early = t["answer_type"] == response_event and t["answer_event_id"] is not None
    if t["answer_type"] and not answered_early:
        t.update(
            answer_type=None,
            answer_event_id=None,
            responded_at=None,
            agent=None,
            result=None,
            error=None,
            status="pending",
            status_rank=0,
            status_time=e.time,
        )
    b.index_task(t)
    if not answered_early:
        _set_status(t, "waiting", e.time)
    w = b.add_wait(_new_wait(e.tenant, sub, "human_input", e))
    w.update(task_id=task_id, sub_task_id=sub, expected_event=response_event)
    if answered_early and w["status"] == "waiting":
        w["status"], w["answered_at"] = "answered", t["responded_at"]
    parent = b.task_by_task_id(e.tenant, task_id)
    if parent is not None and not answered_early:
        _set_status(parent, "waiting", e.time)
    if not answered_early:
        _early_answers(b, e.tenant, sub)
    if parent is not None and parent["status"] == "cancelled":
        _end_with_cancelled(b, parent, (e.tenant, sub), e.time)  # projected after the cancel


def _apply_task_timeout(b: _Batch, e: et.Ev) -> None:
    sub = e.data.get("sub_task_id") or e.correlation_id
    assert isinstance(sub, str)
    reason = str(e.data.get("reason") or "hitl_timeout")
    t = b.task(e.tenant, sub, e.time, kind="human_input")
    _set_status(t, "failed", e.time, reason)
    task_id = e.data.get("task_id")
    parent = b.task_by_task_id(e.tenant, task_id if isinstance(task_id, str) else None)
    if parent is not None and parent["status"] != "cancelled":
        _set_status(parent, "failed", e.time, reason)
    w = b.wait(e.tenant, sub)
    if w is not None and w["status"] == "waiting":
        _time_out(b, w, e)


def _apply_task_cancelled(b: _Batch, e: et.Ev) -> None:
    """A worker ended a task on a cancel request: the task (found by its request id, or
    keyed by its correlation id until its request arrives) is cancelled for good (a
    late answer is recorded, its status stays)."""
    task_id = e.data.get("task_id")
    if not isinstance(task_id, str) or not task_id:
        return
    t = b.task_by_task_id(e.tenant, task_id)
    if t is None:
        t = b.task(e.tenant, e.correlation_id or task_id, e.time)
        t["task_id"] = t["task_id"] or task_id
        t["plan_id"] = t["plan_id"] or e.plan_id
        b.index_task(t)
    reason = e.data.get("reason")
    if t["status"] != "cancelled":
        # Over any other end too: a worker cancels only a task it has not answered, so an
        # answer projected first (another topic's stream) is a late one.
        t.update(status="cancelled", status_rank=_CLASS["cancelled"], status_time=e.time)
        t["reason"] = str(reason)[:2000] if reason else "cancelled"
    # Its open human inputs end with it (as a plan's waits end with the plan): no timeout.
    for key in b.children.get((e.tenant, task_id), []):
        _end_with_cancelled(b, t, key, e.time)


def _end_with_cancelled(b: _Batch, task: dict[str, Any], key: Key, at: datetime) -> None:
    """A human input ``key`` of the cancelled ``task`` ends with it: cancelled, its wait
    closed (nothing left to time out)."""
    ask = b.tasks.get(key)
    if ask is None or ask["kind"] != "human_input" or ask["status"] in TERMINAL_TASK_STATUSES:
        return
    ask.update(status="cancelled", status_rank=_CLASS["cancelled"], status_time=at)
    ask["reason"] = task["reason"]
    b.dirty_tasks.add(key)
    w = b.waits.get(key)
    if w is not None and w["status"] == "waiting":
        w["status"], w["answered_at"] = "answered", at
        b.dirty_waits.add(key)


def _apply_plan_wait(b: _Batch, e: et.Ev) -> None:
    w = b.add_wait(_new_wait(e.tenant, e.id, "plan_wait", e))
    expected = e.data.get("expected_event")
    w["expected_event"] = expected if isinstance(expected, str) else None


def _apply_wait_timeout(b: _Batch, e: et.Ev) -> None:
    wait_id = e.data.get("wait_id")
    candidates = (
        [(e.tenant, wait_id)]
        if isinstance(wait_id, str)
        else b.plan_waits.get((e.tenant, e.plan_id or ""), [])
    )
    for key in candidates:
        w = b.waits.get(key)
        if w is not None and w["kind"] == "plan_wait" and w["status"] == "waiting":
            _time_out(b, w, e)
            b.dirty_waits.add(key)


def _apply(b: _Batch, e: et.Ev) -> None:
    if e.session_id:
        s = b.sessions.setdefault((e.tenant, e.session_id), [e.time, e.time, 0])
        s[0], s[1], s[2] = min(s[0], e.time), max(s[1], e.time), s[2] + 1
    if e.plan_id:
        _apply_plan(b, e)
    if e.is_request:
        _apply_request(b, e)
    elif e.type == wire.TASK_PROGRESS:
        _apply_progress(b, e)
    elif e.type == wire.HUMAN_INPUT:
        _apply_human_input(b, e)
    elif e.type == wire.TASK_TIMEOUT:
        _apply_task_timeout(b, e)
    elif e.type == wire.TASK_CANCELLED:
        _apply_task_cancelled(b, e)
    elif e.type == wire.PLAN_WAITING_FOR_INPUT:
        _apply_plan_wait(b, e)
    elif e.type == wire.PLAN_WAIT_TIMEOUT:
        _apply_wait_timeout(b, e)
    elif e.type not in wire.NOT_ANSWERS:
        if e.correlation_id:
            _apply_answer(b, e)
        _apply_plan_wait_answer(b, e)


# -- writing -------------------------------------------------------------------------------


async def _write(conn: AsyncConnection, b: _Batch) -> None:
    if b.dirty_plans:
        await upsert(
            conn, plans, ["tenant_id", "plan_id"], [b.plans[k] for k in sorted(b.dirty_plans)]
        )
    if b.dirty_tasks:
        await upsert(
            conn,
            tasks,
            ["tenant_id", "correlation_id"],
            [b.tasks[k] for k in sorted(b.dirty_tasks)],
        )
    if b.dirty_waits:
        await upsert(
            conn, waits, ["tenant_id", "wait_id"], [b.waits[k] for k in sorted(b.dirty_waits)]
        )
    if b.correlations:
        await upsert(
            conn,
            correlations,
            ["tenant_id", "correlation_id", "plan_id"],
            [
                {"tenant_id": t, "correlation_id": c, "plan_id": p, "first_seen": at}
                for (t, c, p), at in sorted(b.correlations.items())
            ],
            update=False,
        )
    if b.sessions:
        await upsert(
            conn,
            sessions,
            ["tenant_id", "session_id"],
            [
                {
                    "tenant_id": t,
                    "session_id": s,
                    "first_seen": v[0],
                    "last_seen": v[1],
                    "event_count": v[2],
                }
                for (t, s), v in sorted(b.sessions.items())
            ],
            update={"first_seen": "least", "last_seen": "greatest", "event_count": "add"},
        )


async def bump(conn: AsyncConnection, **amounts: int) -> None:
    """Add to the platform-wide counters (one statement)."""
    changed = {name: amount for name, amount in amounts.items() if amount}
    if not changed:
        return
    delta = sa.case(
        *((counters.c.name == name, amount) for name, amount in changed.items()), else_=0
    )
    await conn.execute(
        counters.update()
        .where(counters.c.name.in_(list(changed)))
        .values(value=counters.c.value + delta)
    )


async def project(conn: AsyncConnection, raw: Sequence[Any]) -> BatchResult:
    """Project ``raw`` events (SDK ``Event`` objects) inside the caller's transaction."""
    await lock_writes(conn)
    result = BatchResult()
    parsed: list[et.Ev] = []
    seen: set[Key] = set()
    for item in raw:
        try:
            ev = et.parse(item)
        except et.Malformed as exc:
            result.malformed += 1
            log.warning("skipping malformed event %s: %s", getattr(item, "id", "?"), exc)
            continue
        if (ev.tenant, ev.id) in seen:
            result.duplicates += 1
            continue
        seen.add((ev.tenant, ev.id))
        parsed.append(ev)
    fresh = await _insert_events(conn, parsed)
    result.duplicates += len(parsed) - len(fresh)
    if fresh:
        batch = await _load(conn, fresh)
        for ev in fresh:
            _apply(batch, ev)
        await _write(conn, batch)
        result.plan_keys = set(batch.dirty_plans)
        result.timeouts_fired = batch.timeouts_fired
    result.projected = len(fresh)
    await bump(
        conn,
        events=result.projected,
        duplicates=result.duplicates,
        malformed=result.malformed,
        timeouts_fired=result.timeouts_fired,
    )
    return result


async def _insert_events(conn: AsyncConnection, evs: list[et.Ev]) -> list[et.Ev]:
    """Store ``evs``; the ones not stored before (one ``INSERT .. ON CONFLICT DO NOTHING
    RETURNING``: a duplicate is dropped by the unique key)."""
    if not evs:
        return []
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    stmt = (
        dialect.insert(events)
        .on_conflict_do_nothing(index_elements=["tenant_id", "event_id"])
        .returning(events.c.tenant_id, events.c.event_id)
    )
    result = await conn.execute(
        stmt,
        [
            {
                "tenant_id": e.tenant,
                "event_id": e.id,
                "plan_id": e.plan_id,
                "type": e.type,
                "topic": e.topic,
                "time": e.time,
                "source": e.source,
                "correlation_id": e.correlation_id,
                "data": _trim(e.data),
            }
            for e in evs
        ],
    )
    stored = {(tenant, event_id) for tenant, event_id in result}
    return [e for e in evs if (e.tenant, e.id) in stored]
