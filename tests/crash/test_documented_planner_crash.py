"""docs/planner.md's hand-written pattern survives a SIGKILL between its two lines.

``plan = await goal.open_plan(context, STATES); await plan.execute_next()``: killed
right after the plan was stored, the redelivered goal must get the existing plan (not
``VersionConflict``), take the first step, and the goal must be answered once.
"""

from __future__ import annotations

import pytest
from crash_support import sigkill, start_agent, until

from testsupport.capture import capture

pytestmark = [pytest.mark.asyncio, pytest.mark.redis, pytest.mark.postgres]

READY = "agent buyer ready"


async def test_goal_redelivered_after_a_kill_between_create_plan_and_execute_next(
    services,
    context,
):
    bus = context.bus
    first = await start_agent("documented_planner.py", services, READY, CRASH_HOLD="after_create")
    second = None
    try:
        async with (
            capture(context, ["action-requests"], ["quote.requested"]) as quotes,
            capture(context, ["action-results"], ["purchase.done"]) as answers,
        ):
            goal_id = await bus.request(
                "purchase.goal", {"item": "desk"}, "purchase.done", correlation_id="order-7"
            )
            await first.wait_for("created ")
            await sigkill(first)  # the plan is stored; its first step is not taken
            assert quotes == []

            second = await start_agent("documented_planner.py", services, READY)
            await until(lambda: len(quotes) >= 1)  # the redelivered goal took the step
            quote = quotes[0]
            await bus.respond("quote.done", {"price": 120}, correlation_id=quote.correlation_id)
            await until(lambda: len(answers) >= 1)
            await second.wait_for("stepped ")
        assert "VersionConflict" not in second.output, second.output
        assert answers[0].correlation_id == "order-7"
        assert answers[0].data["status"] == "completed"
        assert answers[0].data["result"] == {"quoting": {"price": 120}}
        assert {q.id for q in quotes} == {quote.id}
        plan = await context.memory.get_plan_by_correlation("order-7")  # C3
        assert plan is not None and plan.status == "completed", goal_id
    finally:
        await first.kill()
        if second is not None:
            await second.kill()
