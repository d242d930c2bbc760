"""A declarative WAIT state: entering it announces ``plan.waiting_for_input`` (what it
waits for, the timeout); the awaited event (correlated to the plan, e.g. released from
the tracker) and ``plan.wait_timeout`` each lead where the WAIT says."""

from __future__ import annotations

import pytest
from planner_support import Platform, wait_for
from pydantic import ValidationError

from soorma.agents.planner import Planner
from soorma_common.state import PlanDefinition, StateConfig, StateWait
from testsupport.capture import capture

STATES = {
    "start": StateConfig(state_name="start", default_next="approval"),
    "approval": StateConfig(
        state_name="approval",
        wait=StateWait(
            event="manager.approved",
            on_event="approved",
            timeout_seconds=30,
            on_timeout="expired",
            reason="a manager approves spend over 1000",
        ),
    ),
    "approved": StateConfig(state_name="approved", is_terminal=True),
    "expired": StateConfig(state_name="expired", is_terminal=True),
}


def test_a_wait_needs_a_target_for_its_timeout() -> None:
    with pytest.raises(ValidationError, match="go together"):
        StateWait(event="x.y", on_event="a", timeout_seconds=5)
    # Its outcomes are the state's transitions, once (a stored machine reloads as it was).
    config = STATES["approval"]
    again = StateConfig.model_validate(config.model_dump())
    assert [(t.on_event, t.to_state) for t in again.transitions] == [
        ("manager.approved", "approved"),
        ("plan.wait_timeout", "expired"),
    ]


@pytest.mark.asyncio
async def test_a_wait_state_goes_where_its_event_or_its_timeout_says(platform: Platform) -> None:
    context = platform.context()
    planner = Planner(
        name="spender",
        context=platform.context(),
        plan_definition=PlanDefinition(plan_type="spend.goal", states=STATES),
    )
    assert ("system-events", "plan.wait_timeout") in {
        (h.topic, h.event_type) for h in planner.handlers
    }
    await platform.start(planner)
    async with (
        capture(context, ["system-events"], ["plan.waiting_for_input"]) as waits,
        capture(context, ["action-results"], ["spend.done"]) as answers,
    ):
        await context.bus.request("spend.goal", {}, "spend.done", correlation_id="s-1")
        await context.bus.request("spend.goal", {}, "spend.done", correlation_id="s-2")
        await wait_for(lambda: len(waits) == 2)
        by_goal = {}
        for w in waits:
            assert w.data["expected_event"] == "manager.approved"
            assert w.data["timeout_seconds"] == 30
            assert w.data["reason"] == "a manager approves spend over 1000"
            plan = await context.memory.get_plan_context(w.plan_id)
            assert plan is not None and plan.current_state == "approval"
            by_goal[plan.bookkeeping.correlation_id] = w.plan_id
        first, second = by_goal["s-1"], by_goal["s-2"]
        await context.bus.publish(
            "action-results",
            "manager.approved",
            {"by": "erin"},
            correlation_id=first,
            plan_id=first,
        )
        await context.bus.publish(
            "system-events",
            "plan.wait_timeout",
            {"plan_id": second, "expected_event": "manager.approved", "reason": "wait_timeout"},
            correlation_id=second,
            plan_id=second,
        )
        await wait_for(lambda: len(answers) == 2)
    ended = {a.correlation_id: a.data for a in answers}
    assert ended["s-1"]["status"] == ended["s-2"]["status"] == "completed"
    one = await context.memory.get_plan_context(first)
    two = await context.memory.get_plan_context(second)
    assert one is not None and two is not None
    assert (one.current_state, two.current_state) == ("approved", "expired")
