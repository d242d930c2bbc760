"""Projection is idempotent and order-independent (the projector's core, on SQLite and
PostgreSQL): every arrival order of one plan's events ends in the same rows; a duplicated
or redelivered event changes nothing; malformed events are counted and skipped."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import pytest_asyncio
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from soorma.event import Event
from testsupport.services import db_url  # noqa: F401 - fixture
from tracker_service.db import open_engine
from tracker_service.models import counters, plans, tasks, waits
from tracker_service.projection import project

pytestmark = pytest.mark.asyncio
T0 = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)


@pytest_asyncio.fixture
async def engine(db_url: str) -> AsyncIterator[AsyncEngine]:  # noqa: F811
    found = await open_engine(db_url)
    yield found
    await found.dispose()


def ev(n: int, type_: str, topic: str = "system-events", **fields: Any) -> Event:
    return Event(
        id=f"e{n}",
        type=type_,
        topic=topic,
        time=T0 + timedelta(seconds=n),
        tenant_id=fields.pop("tenant_id", "acme"),
        **fields,
    )


def scenario(plan: str) -> list[Event]:
    """A parent plan with a sub-plan, a delegated task, a HITL answer and a failed action."""
    lc = {"plan_id": plan, "correlation_id": plan}
    return [
        ev(
            0,
            "goal.asked",
            "action-requests",
            correlation_id=f"g-{plan}",
            response_event="goal.done",
        ),
        ev(
            1,
            "plan.started",
            parent_event_id="e0",
            source="planner",
            session_id="s",
            data={"plan_id": plan, "status": "running", "current_state": "a"},
            **lc,
        ),
        ev(
            2,
            "plan.state_changed",
            data={"plan_id": plan, "from_state": None, "to_state": "a", "status": "running"},
            **lc,
        ),
        ev(
            3,
            "work.do",
            "action-requests",
            correlation_id=f"w-{plan}",
            plan_id=plan,
            response_event="work.done",
            source="planner",
        ),
        ev(
            4,
            "sub.do",
            "action-requests",
            correlation_id=f"s1-{plan}",
            plan_id=plan,
            parent_event_id="e3",
            response_event="sub.done",
            source="worker",
            subject=f"delegation-group:grp-{plan}",
        ),
        ev(
            5,
            "sub.do",
            "action-requests",
            correlation_id=f"s2-{plan}",
            plan_id=plan,
            parent_event_id="e3",
            response_event="sub.done",
            source="worker",
            subject=f"delegation-group:grp-{plan}",
        ),
        ev(
            6,
            "notification.human_input",
            "notification-events",
            correlation_id=f"h-{plan}",
            plan_id=plan,
            data={
                "task_id": "e3",
                "sub_task_id": f"h-{plan}",
                "response_event": "human.said",
                "timeout_seconds": 60,
            },
        ),
        ev(7, "human.said", "notification-events", correlation_id=f"h-{plan}", data={"ok": True}),
        ev(
            8,
            "sub.done",
            "action-results",
            correlation_id=f"s1-{plan}",
            plan_id=plan,
            source="sub-agent",
            data={"status": "completed", "result": 1},
        ),
        ev(
            9,
            "sub.done",
            "action-results",
            correlation_id=f"s2-{plan}",
            plan_id=plan,
            source="sub-agent",
            data={"status": "failed", "success": False, "error": "boom"},
        ),
        ev(
            10,
            "work.done",
            "action-results",
            correlation_id=f"w-{plan}",
            plan_id=plan,
            source="worker",
            data={"status": "completed", "result": {"x": 1}},
        ),
        ev(
            11,
            "plan.started",
            plan_id=f"{plan}-child",
            correlation_id=f"{plan}-child",
            data={"plan_id": f"{plan}-child", "parent_plan_id": plan},
        ),
        ev(
            12,
            "plan.state_changed",
            data={
                "plan_id": plan,
                "from_state": "a",
                "to_state": "b",
                "status": "running",
                "trigger_event": "work.done",
            },
            **lc,
        ),
        ev(
            13,
            "plan.completed",
            data={"plan_id": plan, "status": "completed", "current_state": "b"},
            **lc,
        ),
    ]


async def snapshot(engine: AsyncEngine, plan: str) -> dict[str, Any]:
    async with engine.connect() as conn:
        p = [
            dict(r._mapping)
            for r in await conn.execute(
                sa.select(plans)
                .where(plans.c.plan_id.in_([plan, f"{plan}-child"]))
                .order_by(plans.c.plan_id)
            )
        ]
        t = [
            dict(r._mapping)
            for r in await conn.execute(
                sa.select(tasks)
                .where(tasks.c.correlation_id.like(f"%{plan}"))
                .order_by(tasks.c.correlation_id)
            )
        ]
        w = [
            dict(r._mapping)
            for r in await conn.execute(sa.select(waits).where(waits.c.wait_id.like(f"%{plan}")))
        ]
    for row in p:
        row.pop("event_count")  # the same either way; compared separately below
    return {"plans": p, "tasks": t, "waits": w}


async def run(engine: AsyncEngine, events: list[Event], batch: int) -> None:
    for start in range(0, len(events), batch):
        async with engine.begin() as conn:
            await project(conn, events[start : start + batch])


async def test_every_arrival_order_ends_in_the_same_state(engine: AsyncEngine) -> None:
    rng = random.Random(7)
    reference: dict[str, Any] | None = None
    for attempt in range(6):
        plan = f"p{attempt}"
        events = scenario(plan)
        for e in events:  # unique ids per attempt, same shape
            e.id = f"{plan}-{e.id}"
            if e.parent_event_id:
                e.parent_event_id = f"{plan}-{e.parent_event_id}"
            for key in ("task_id",):
                if key in e.data:
                    e.data[key] = f"{plan}-{e.data[key]}"
        if attempt:
            rng.shuffle(events)
        await run(engine, events, batch=rng.choice([1, 3, 20]))
        snap = await snapshot(engine, plan)
        normal = _normalize(snap, plan)
        if reference is None:
            reference = normal
            parent = snap["plans"][0]
            assert parent["status"] == "completed" and parent["goal_event"] == "goal.asked"
            assert [s["to_state"] for s in parent["state_path"]] == ["a", "b"]
            assert snap["plans"][1]["parent_plan_id"] == plan
            by_cid = {t["correlation_id"]: t for t in snap["tasks"]}
            work = by_cid[f"w-{plan}"]
            assert work["status"] == "completed" and work["agent"] == "worker"
            assert by_cid[f"s1-{plan}"]["parent_task_id"] == f"{plan}-e3"
            assert by_cid[f"s2-{plan}"]["status"] == "failed"
            assert by_cid[f"s2-{plan}"]["delegation_group_id"] == f"grp-{plan}"
            assert by_cid[f"h-{plan}"]["status"] == "completed"
            assert snap["waits"][0]["status"] == "answered"
        else:
            diffs = _diff(normal, reference)
            assert not diffs, f"arrival order {[e.id for e in events]}: {diffs}"


def _normalize(snap: dict[str, Any], plan: str) -> Any:
    return eval(repr(snap).replace(plan, "P"), {"datetime": __import__("datetime")})


def _diff(a: Any, b: Any, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        return [
            d for k in sorted(set(a) | set(b)) for d in _diff(a.get(k), b.get(k), f"{path}.{k}")
        ]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [
            d
            for i, (x, y) in enumerate(zip(a, b, strict=True))
            for d in _diff(x, y, f"{path}[{i}]")
        ]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


async def test_duplicates_and_redeliveries_change_nothing(engine: AsyncEngine) -> None:
    events = scenario("dup")
    await run(engine, events, batch=5)
    before = await snapshot(engine, "dup")
    async with engine.begin() as conn:
        result = await project(conn, events + events[:3])
    assert (result.projected, result.duplicates) == (0, len(events) + 3)
    assert await snapshot(engine, "dup") == before
    async with engine.connect() as conn:
        count = (
            await conn.execute(sa.select(plans.c.event_count).where(plans.c.plan_id == "dup"))
        ).scalar_one()
    assert count == sum(1 for e in events if e.plan_id == "dup")


async def test_malformed_events_are_counted_and_skipped(engine: AsyncEngine) -> None:
    bad = [
        ev(1, "plan.started", data={"status": "running"}),  # no plan id anywhere
        ev(
            2,
            "notification.human_input",
            "notification-events",
            correlation_id="h",
            data={"sub_task_id": "h", "response_event": "x", "timeout_seconds": "soon"},
        ),
        ev(3, "task.timeout", data={"reason": "hitl_timeout"}),  # no sub-task id
    ]
    good = ev(4, "plan.started", plan_id="ok", data={"plan_id": "ok"})
    async with engine.begin() as conn:
        result = await project(conn, [*bad, good])
    assert (result.malformed, result.projected) == (3, 1)
    async with engine.connect() as conn:
        got = dict((await conn.execute(sa.select(counters.c.name, counters.c.value))).all())
        status = (
            await conn.execute(sa.select(plans.c.status).where(plans.c.plan_id == "ok"))
        ).scalar_one()
    assert got["malformed"] == 3 and status == "running"
