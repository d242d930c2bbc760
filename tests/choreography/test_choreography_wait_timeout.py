"""Contract C2, SDK side: ``plan.wait_timeout`` resumes a paused ChoreographyPlanner plan.

The tracker that publishes the timeout is not part of these tests: it is published by
hand (system-events, correlation_id = plan_id), as the contract describes it.
"""

from __future__ import annotations

import asyncio

import pytest
from choreo_helpers import (
    ScriptedLLM,
    Stack,
    complete,
    eventually_paused,
    make_planner,
    register_event,
    wait,
)

from soorma import PlatformContext
from testsupport.settle import settled
from testsupport.tenant_services import running

pytestmark = pytest.mark.asyncio


def timeout_data(plan_id: str, expected: str) -> dict:
    return {
        "plan_id": plan_id,
        "expected_event": expected,
        "timeout_seconds": 5,
        "reason": "wait_timeout",
    }


async def test_wait_timeout_resumes_the_paused_plan_and_the_model_sees_it(
    stack: Stack, context: PlatformContext, llm: ScriptedLLM
):
    await register_event(context, "approval.granted")
    llm.say(wait("approval.granted"), complete({"approved": False, "why": "timed out"}))
    planner = make_planner(stack, "orders", "order.received")
    assert ("system-events", "plan.wait_timeout") in {
        (h.topic, h.event_type) for h in planner.handlers
    }
    async with (
        running(planner),
        context.bus.subscribe(["action-results"], event_types=["order.done"]) as done,
    ):
        await done.wait_ready()
        await context.bus.request(
            "order.received",
            {"amount": 12000},
            response_event="order.done",
            correlation_id="order-9",
        )
        plan_id = (await eventually_paused(context)).plan_id
        # Another plan's timeout changes nothing here.
        await context.bus.publish(
            "system-events",
            "plan.wait_timeout",
            timeout_data("some-other-plan", "approval.granted"),
            correlation_id="some-other-plan",
            plan_id="some-other-plan",
        )
        await context.bus.publish(
            "system-events",
            "plan.wait_timeout",
            timeout_data(plan_id, "approval.granted"),
            correlation_id=plan_id,
            plan_id=plan_id,
        )
        async with asyncio.timeout(30):
            answer = await anext(aiter(done))
        # The approval arriving late finds the plan finished: nothing more happens.
        await context.bus.respond("approval.granted", {"by": "manager"}, correlation_id=plan_id)
        await settled(context)  # the planner has handled it

    assert answer.data["result"] == {"approved": False, "why": "timed out"}
    assert len(llm.calls) == 2
    assert "plan.wait_timeout" in llm.calls[1]["messages"][1]["content"]
    plan = await context.memory.get_plan_context(plan_id)
    assert plan is not None and plan.status == "completed"
    assert plan.results["plan.wait_timeout"]["reason"] == "wait_timeout"
    assert "approval.granted" not in plan.results
