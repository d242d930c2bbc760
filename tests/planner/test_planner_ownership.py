"""A planner steps only its own plans (found by bench/chaos.py).

Plans of every planner of a tenant live in one memory service and answers find their
plan by correlation id. A ChoreographyPlanner's unfiltered ``on_transition()`` (as
docs/choreography.md writes it) therefore also heard the answers of examples/04's
research planner: it restored that planner's plan and asked its model what to do next,
publishing its own tool requests into a plan that was not its own (extra tool runs and
model calls, and two planners writing one plan). Now a planner skips plans whose goal
none of its ``on_goal`` handlers matches.
"""

from __future__ import annotations

import pytest
from planner_support import responder, wait_for

from soorma.agents.planner import Planner
from soorma_common.state import PlanDefinition, StateAction, StateConfig, StateTransition
from testsupport.capture import capture

pytestmark = pytest.mark.asyncio


def one_step_machine() -> dict[str, StateConfig]:
    return {
        "start": StateConfig(state_name="start", default_next="lookup"),
        "lookup": StateConfig(
            state_name="lookup",
            action=StateAction(
                event_type="lookup.requested",
                response_event="lookup.done",
                data={"q": "{goal_data.q}"},
            ),
            transitions=[StateTransition(on_event="lookup.done", to_state="done")],
        ),
        "done": StateConfig(state_name="done", is_terminal=True),
    }


async def test_an_unfiltered_transition_handler_skips_another_planners_plans(platform):
    declarative = Planner(
        name="owner-planner",
        context=platform.context(),
        plan_definition=PlanDefinition(plan_type="owned.goal", states=one_step_machine()),
    )
    other = Planner(name="other-planner", context=platform.context())
    heard: list[tuple[str, str]] = []

    @other.on_goal("other.goal")
    async def on_goal(goal, context):
        pass

    @other.on_transition()
    async def on_transition(transition, context):
        heard.append((transition.event.type, transition.plan.plan_id))

    await platform.start(declarative)
    await platform.start(other)
    await platform.start(
        responder(
            platform,
            "lookup-worker",
            "lookup.requested",
            lambda e: ("lookup.done", {"found": e.data["q"]}),
        )
    )
    client = platform.context()
    async with capture(client, ["action-results"], ["lookup.done"]) as answers:
        answer = await client.bus.call(
            "owned.goal", {"q": "owls"}, response_event="owned.done", timeout=30
        )
        await wait_for(lambda: len(answers) == 1)
    assert answer.data["status"] == "completed"
    assert answer.data["result"]["lookup"] == {"found": "owls"}
    # The other planner's stream gets lookup.done too (it listens to every answer):
    # once it has handled it, its transition handler must not have been called.
    await wait_for(lambda: answers[0].id in other._completed)
    assert [h for h in heard if h[1] == answer.data["plan_id"]] == []
    assert other.owns(await _plan(client, answer.data["plan_id"])) is False
    assert declarative.owns(await _plan(client, answer.data["plan_id"])) is True


async def _plan(context, plan_id):
    from soorma import PlanContext

    plan = await PlanContext.restore(plan_id, context)
    assert plan is not None
    return plan
