"""A planner SIGKILLed in the middle of a cancellation: after the cancelled end was stored,
before it was announced. The redelivered request announces it; the plan ends cancelled
once, its goal is answered once, and an answer arriving afterwards moves nothing."""

from __future__ import annotations

import asyncio

import pytest
from crash_support import sigkill, start_agent, until

from testsupport.capture import capture

pytestmark = [pytest.mark.asyncio, pytest.mark.redis, pytest.mark.postgres]

READY = "agent buyer ready"


async def test_a_planner_killed_mid_cancel_ends_the_plan_cancelled_once(services, context):
    bus = context.bus
    first = await start_agent("cancelling_planner.py", services, READY, CRASH_HOLD="mid_cancel")
    second = None
    try:
        async with (
            capture(context, ["action-requests"], ["quote.requested"]) as quotes,
            capture(context, ["action-results"], ["purchase.done"]) as answers,
            capture(
                context, ["system-events"], ["plan.cancelled", "plan.state_changed"]
            ) as lifecycle,
        ):
            await bus.request("purchase.goal", {}, "purchase.done", correlation_id="order-9")
            await until(lambda: len(quotes) == 1)
            plan_id = quotes[0].plan_id
            assert plan_id
            await context.cancel_plan(plan_id, "customer called")
            await first.wait_for("cancel stored ")
            await sigkill(first)
            stored = await context.memory.get_plan_context(plan_id)
            assert stored is not None and stored.status == "cancelled"
            assert answers == [] and not [e for e in lifecycle if e.type == "plan.cancelled"]

            second = await start_agent("cancelling_planner.py", services, READY)
            await until(lambda: len(answers) >= 1)
            await bus.respond("quote.done", {"price": 1}, correlation_id=quotes[0].correlation_id)
            await asyncio.sleep(3.0)  # past a redelivery: still one end, nothing moved
        # At-least-once delivery may repeat an announcement; a repeat carries the same id
        # (consumers drop it), so "once" means one event id.
        assert len({a.id for a in answers}) == 1
        assert answers[0].correlation_id == "order-9"
        assert answers[0].data["status"] == "cancelled"
        assert answers[0].data["error"] == "customer called"
        ends = [e for e in lifecycle if e.type == "plan.cancelled"]
        assert len({e.id for e in ends}) == 1 and ends[0].plan_id == plan_id
        moves = [e.data["to_state"] for e in lifecycle if e.type == "plan.state_changed"]
        assert moves == ["quoting"]
        assert len(quotes) == 1
        stored = await context.memory.get_plan_context(plan_id)
        assert stored is not None and stored.status == "cancelled"
        assert stored.current_state == "quoting"
    finally:
        await first.kill()
        if second is not None:
            await second.kill()
