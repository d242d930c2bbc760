"""Contract C2: a state machine routes on ``plan.wait_timeout`` like any event type.

A declarative planner whose machine names ``plan.wait_timeout`` in a transition also
listens for it on ``system-events``. The tracker is not part of the test: the timeout
is published by hand (correlation_id = plan_id), as the contract describes it.
"""

from __future__ import annotations

import pytest
from planner_support import wait_for

from soorma.agents.planner import Planner
from soorma_common.state import PlanDefinition, StateAction, StateConfig, StateTransition
from testsupport.capture import capture

pytestmark = pytest.mark.asyncio

STATES = {
    "start": StateConfig(state_name="start", default_next="awaiting"),
    "awaiting": StateConfig(
        state_name="awaiting",
        action=StateAction(
            event_type="approval.requested",
            response_event="approval.given",
            data={"amount": "{goal_data.amount}"},
        ),
        transitions=[
            StateTransition(on_event="approval.given", to_state="approved"),
            StateTransition(on_event="plan.wait_timeout", to_state="expired"),
        ],
    ),
    "approved": StateConfig(state_name="approved", is_terminal=True),
    "expired": StateConfig(state_name="expired", is_terminal=True),
}


async def test_a_machine_takes_its_timeout_branch_on_plan_wait_timeout(platform):
    context = platform.context()
    planner = Planner(
        name="approver",
        context=platform.context(),
        plan_definition=PlanDefinition(plan_type="spend.goal", states=STATES),
    )
    assert ("system-events", "plan.wait_timeout") in {
        (h.topic, h.event_type) for h in planner.handlers
    }
    await platform.start(planner)
    async with (
        capture(context, ["action-requests"], ["approval.requested"]) as asks,
        capture(context, ["action-results"], ["spend.done"]) as answers,
        capture(context, ["system-events"], ["plan.state_changed"]) as moves,
    ):
        await context.bus.request(
            "spend.goal", {"amount": 5}, "spend.done", correlation_id="spend-1"
        )
        await wait_for(lambda: len(asks) == 1)
        plan_id = asks[0].plan_id
        await context.bus.publish(
            "system-events",
            "plan.wait_timeout",
            {
                "plan_id": plan_id,
                "expected_event": "approval.given",
                "timeout_seconds": 5,
                "reason": "wait_timeout",
            },
            correlation_id=plan_id,
            plan_id=plan_id,
        )
        # The answer and the state change go to different topics: neither waits for the other.
        await wait_for(lambda: len(answers) == 1 and len(moves) == 2)
    assert answers[0].correlation_id == "spend-1"
    assert answers[0].data["status"] == "completed"
    assert [m.data["to_state"] for m in moves] == ["awaiting", "expired"]
    assert moves[-1].data["trigger_event"] == "plan.wait_timeout"


async def test_a_planner_without_timeout_transitions_does_not_listen_for_them(platform):
    states = {name: cfg for name, cfg in STATES.items() if name != "expired"}
    states["awaiting"] = states["awaiting"].model_copy(
        update={"transitions": states["awaiting"].transitions[:1]}
    )
    planner = Planner(
        name="quiet",
        context=platform.context(),
        plan_definition=PlanDefinition(plan_type="q.goal", states=states),
    )
    assert ("system-events", "plan.wait_timeout") not in {
        (h.topic, h.event_type) for h in planner.handlers
    }
