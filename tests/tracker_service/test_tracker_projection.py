"""The projection through the real tap: lifecycle, actions, tasks, by-correlation, isolation."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from tracker_stack import Stack

pytestmark = pytest.mark.asyncio


def lifecycle(plan_id: str, type_: str, **data: Any) -> dict[str, Any]:
    return {
        "topic": "system-events",
        "type": type_,
        "correlation_id": plan_id,
        "plan_id": plan_id,
        "data": {"plan_id": plan_id, **data},
    }


async def test_plan_lifecycle_actions_and_goal_correlation(stack: Stack) -> None:
    plan_id, goal_cid = str(uuid.uuid4()), f"goal-{uuid.uuid4()}"
    goal_id = await stack.publish(
        {
            "topic": "action-requests",
            "type": "research.goal",
            "correlation_id": goal_cid,
            "response_event": "research.done",
            "session_id": "s1",
            "data": {"topic": "x"},
        }
    )
    await stack.publish(
        {
            **lifecycle(plan_id, "plan.started", status="running", current_state="search"),
            "parent_event_id": goal_id,
            "session_id": "s1",
            "source": "planner-a",
        }
    )
    await stack.publish(
        lifecycle(
            plan_id,
            "plan.state_changed",
            from_state=None,
            to_state="search",
            status="running",
            trigger_event=None,
        )
    )
    req = await stack.publish(
        {
            "topic": "action-requests",
            "type": "web.search",
            "correlation_id": "c-1",
            "response_event": "web.search.done",
            "plan_id": plan_id,
            "source": "planner-a",
            "data": {"q": "x"},
        }
    )
    await stack.publish(
        {
            "topic": "action-results",
            "type": "web.search.done",
            "correlation_id": "c-1",
            "plan_id": plan_id,
            "source": "searcher",
            "data": {"status": "completed", "success": True, "result": [1, 2]},
        }
    )
    await stack.publish(
        lifecycle(
            plan_id,
            "plan.state_changed",
            from_state="search",
            to_state="done",
            status="running",
            trigger_event="web.search.done",
        )
    )
    await stack.publish(
        lifecycle(plan_id, "plan.completed", status="completed", current_state="done")
    )
    plan = await stack.plan_when(plan_id, lambda p: p["status"] == "completed")
    assert plan["goal_event"] == "research.goal"
    assert plan["goal_correlation_id"] == goal_cid
    assert plan["planner"] == "planner-a" and plan["session_id"] == "s1"
    assert plan["current_state"] == "done"
    assert [s["to_state"] for s in plan["state_path"]] == ["search", "done"]
    assert plan["duration_ms"] is not None and plan["ended_at"]
    actions = (await stack.ok(f"/plans/{plan_id}/actions"))["actions"]
    assert len(actions) == 1
    action = actions[0]
    assert (action["task_id"], action["status"], action["agent"]) == (req, "completed", "searcher")
    assert action["latency_ms"] is not None and action["result"] == [1, 2]
    found = await stack.ok(f"/plans/by-correlation/{goal_cid}")
    assert found["plan_id"] == plan_id
    timeline = (await stack.ok(f"/plans/{plan_id}/timeline"))["entries"]
    # The timeline is in the order the tracker saw the events. Within a topic that is the
    # order they were published; across topics (plan events, requests, results) the
    # streams are read side by side, so only each topic's own order is fixed.
    types = [e["type"] for e in timeline]
    published = ["plan.started", "plan.state_changed", "web.search", "web.search.done"]
    published += ["plan.state_changed", "plan.completed"]
    assert sorted(types) == sorted(published)
    assert [t for t in types if t.startswith("plan.")] == [
        "plan.started",
        "plan.state_changed",
        "plan.state_changed",
        "plan.completed",
    ]
    (answer,) = [e for e in timeline if e["type"] == "web.search.done"]
    assert answer["duration_ms"] is not None
    assert (await stack.ok("/sessions/s1/plans"))["plans"][0]["plan_id"] == plan_id
    listed = await stack.ok("/plans", status="completed", goal_event="research.goal")
    assert [p["plan_id"] for p in listed["plans"]] == [plan_id]
    metrics = await stack.ok("/metrics")
    assert metrics["plans"]["by_status"] == {"completed": 1}
    assert metrics["agents"][0]["key"] == "searcher"


async def test_a_pause_reason_ends_with_the_pause(stack: Stack) -> None:
    """A plan that paused with a reason and then completed shows no reason."""
    plan_id = str(uuid.uuid4())
    await stack.publish(lifecycle(plan_id, "plan.started", status="running"))
    await stack.publish(
        lifecycle(plan_id, "plan.paused", status="paused", reason="need input from a person")
    )
    paused = await stack.plan_when(plan_id, lambda p: p["status"] == "paused")
    assert paused["reason"] == "need input from a person"
    await stack.publish(lifecycle(plan_id, "plan.resumed", status="running"))
    await stack.publish(lifecycle(plan_id, "plan.completed", status="completed"))
    done = await stack.plan_when(plan_id, lambda p: p["status"] == "completed")
    assert done["reason"] is None
    cancelled_id = str(uuid.uuid4())
    await stack.publish(lifecycle(cancelled_id, "plan.started", status="running"))
    await stack.publish(
        lifecycle(cancelled_id, "plan.cancelled", status="cancelled", reason="by ada")
    )
    cancelled = await stack.plan_when(cancelled_id, lambda p: p["status"] == "cancelled")
    assert cancelled["reason"] == "by ada"


async def test_tenant_b_sees_nothing_of_tenant_a(stack: Stack) -> None:
    plan_id = str(uuid.uuid4())
    await stack.publish(lifecycle(plan_id, "plan.started", status="running"), tenant="acme")
    await stack.plan_when(plan_id, lambda p: p["status"] == "running")
    for path in (
        f"/plans/{plan_id}",
        f"/plans/{plan_id}/timeline",
        f"/plans/{plan_id}/actions",
        f"/plans/{plan_id}/stream",
        f"/plans/by-correlation/{plan_id}",
    ):
        r = await stack.get(path, tenant="globex")
        assert r.status_code == 404, path
        assert plan_id in r.json()["error"]["message"]
    assert (await stack.ok("/plans", tenant="globex"))["plans"] == []
    assert (await stack.ok("/metrics", tenant="globex"))["plans"]["total"] == 0


async def test_bad_input_names_the_id_or_field(stack: Stack) -> None:
    r = await stack.get("/plans/nope")
    assert r.status_code == 404 and "'nope'" in r.json()["error"]["message"]
    r = await stack.get("/tasks/nope")
    assert r.status_code == 404 and "'nope'" in r.json()["error"]["message"]
    for params, field in (
        ({"status": "sleeping"}, "status"),
        ({"cursor": "!!"}, "cursor"),
        ({"limit": 0}, "limit"),
        ({"since": "yesterday"}, "since"),
    ):
        r = await stack.get("/plans", **params)
        assert r.status_code == 422, params
        assert field in r.text, r.text


async def test_a_cancelled_task_stays_cancelled_whatever_order_its_events_arrive_in(
    stack: Stack,
) -> None:
    plan_id = str(uuid.uuid4())
    request = {
        "topic": "action-requests",
        "type": "report.write",
        "response_event": "report.written",
        "plan_id": plan_id,
        "data": {},
    }
    early, late = str(uuid.uuid4()), str(uuid.uuid4())
    # One task is cancelled before its request is projected, the other after.
    for task_id, first in ((early, "cancelled"), (late, "request")):
        cancelled = {
            "topic": "system-events",
            "type": "task.cancelled",
            "correlation_id": task_id,
            "plan_id": plan_id,
            "source": "writer",
            "data": {"task_id": task_id, "reason": "plan cancelled", "event_type": "report.write"},
        }
        asked = {**request, "id": task_id, "correlation_id": task_id}
        ask_human = {
            "topic": "notification-events",
            "type": "notification.human_input",
            "correlation_id": f"ask-{task_id}",
            "plan_id": plan_id,
            "source": "writer",
            "data": {
                "task_id": task_id,
                "sub_task_id": f"ask-{task_id}",
                "question": "which template?",
                "response_event": "template.chosen",
                "timeout_seconds": 3600,
            },
        }
        order = [cancelled, asked] if first == "cancelled" else [asked, ask_human, cancelled]
        for event in order:
            await stack.publish(event)
        # The worker's late answer (after the cancel) does not end it otherwise.
        await stack.publish(
            {
                "topic": "action-results",
                "type": "report.written",
                "correlation_id": task_id,
                "plan_id": plan_id,
                "source": "writer",
                "data": {"status": "completed", "success": True, "result": 1},
            }
        )

    async def both_cancelled() -> list[dict[str, Any]] | None:
        r = await stack.get(f"/plans/{plan_id}/actions")
        rows = r.json()["actions"] if r.status_code == 200 else []
        answered = [r for r in rows if r["answer_type"] == "report.written"]
        asked = [r for r in rows if r["task_id"] == f"ask-{late}" and r["status"] != "waiting"]
        return rows if len(answered) == 2 and asked else None

    rows = await stack.until(both_cancelled)
    assert {(r["task_id"], r["status"], r["reason"]) for r in rows} == {
        (early, "cancelled", "plan cancelled"),
        (late, "cancelled", "plan cancelled"),
        (f"ask-{late}", "cancelled", "plan cancelled"),
    }
    detail = await stack.ok(f"/tasks/{late}")
    assert detail["status"] == "cancelled"
    # Its open human input ended with it: nothing left to time out.
    assert [(w["sub_task_id"], w["status"]) for w in detail["waits"]] == [
        (f"ask-{late}", "answered")
    ]
