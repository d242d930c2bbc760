"""A ChoreographyPlanner plan shows its goal_event and planner, as a state-machine plan does.

The events are the ones such a plan publishes (published by hand): ``plan.started`` from
``PlanContext.announce_start`` (source = the planner, ``goal_event`` in its data, no
``parent_event_id`` outside a handler), requests, and ``plan.completed``.
"""

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
        "source": "research-planner",
        "data": {"plan_id": plan_id, "current_state": "choreography", **data},
    }


async def test_choreography_plan_lists_goal_event_and_planner(stack: Stack) -> None:
    plan_id, ended_only = str(uuid.uuid4()), str(uuid.uuid4())
    await stack.publish(
        lifecycle(plan_id, "plan.started", status="running", goal_event="research.goal")
    )
    await stack.publish(
        {
            "topic": "action-requests",
            "type": "web.search.requested",
            "correlation_id": f"c-{uuid.uuid4()}",
            "plan_id": plan_id,
            "response_event": "web.search.completed",
            "source": "research-planner",
            "data": {"q": "x"},
        }
    )
    await stack.publish(lifecycle(plan_id, "plan.completed", status="completed"))
    # A plan whose plan.started was not seen: its other lifecycle events name the planner.
    await stack.publish(lifecycle(ended_only, "plan.completed", status="completed"))
    for pid in (plan_id, ended_only):
        await stack.plan_when(pid, lambda p: p["status"] == "completed")
    listed = {p["plan_id"]: p for p in (await stack.ok("/plans"))["plans"]}
    assert (listed[plan_id]["goal_event"], listed[plan_id]["planner"]) == (
        "research.goal",
        "research-planner",
    )
    assert listed[ended_only]["planner"] == "research-planner"
    found = await stack.ok("/plans", goal_event="research.goal", planner="research-planner")
    assert [p["plan_id"] for p in found["plans"]] == [plan_id]
