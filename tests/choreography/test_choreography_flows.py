"""ChoreographyPlanner end to end: live planner and worker agents on the real services.

Each of the four actions is executed for real: PUBLISH reaches a Tool whose answer comes
back as a transition, COMPLETE answers the goal's caller, WAIT pauses until the expected
event (an unexpected one leaves the plan paused), DELEGATE hands a sub-goal to another
planner whose final answer resumes this plan.
"""

from __future__ import annotations

import asyncio

import pytest
from choreo_helpers import (
    MODEL,
    ScriptedLLM,
    Stack,
    complete,
    delegate,
    eventually_paused,
    make_planner,
    make_searcher,
    publish,
    register_event,
    wait,
)

from soorma import PlatformContext
from soorma.ai.choreography import ChoreographyPlanner
from testsupport import tenant_services
from testsupport.tenant_services import running

# One set of services for the module; each test is a tenant of its own on them.
pytestmark = pytest.mark.asyncio(loop_scope="module")
stack, context = tenant_services.stack, tenant_services.context


async def test_publish_then_complete_answers_the_goal(
    stack: Stack, context: PlatformContext, llm: ScriptedLLM
):
    llm.say(publish("web.search.requested", {"query": "disco"}), complete({"summary": "found it"}))
    async with running(make_searcher(stack), make_planner(stack, "research", "research.goal")):
        answer = await context.bus.call(
            "research.goal", {"topic": "disco"}, response_event="research.done", timeout=30
        )

    assert answer.data["status"] == "completed"
    assert answer.data["result"] == {"summary": "found it"}
    # The worker's answer reached the model as the plan's result.
    second_prompt = llm.calls[1]["messages"][1]["content"]
    assert "disco result" in second_prompt
    plan = await context.memory.get_plan_context(answer.data["plan_id"])
    assert plan is not None and plan.results["web.search.requested"] == {
        "request_id": plan.results["web.search.requested"]["request_id"],
        "success": True,
        "result": {"hits": ["disco result"]},
    }


async def test_wait_resumes_only_on_the_expected_event(
    stack: Stack, context: PlatformContext, llm: ScriptedLLM
):
    await register_event(context, "approval.granted")
    await register_event(context, "approval.reminder")
    llm.say(wait("approval.granted"), complete({"approved": True}))
    async with (
        running(make_planner(stack, "orders", "order.received")),
        context.bus.subscribe(["action-results"], event_types=["order.done"]) as done,
    ):
        await done.wait_ready()
        await context.bus.request(
            "order.received",
            {"amount": 12000},
            response_event="order.done",
            correlation_id="order-1",
        )
        paused = await eventually_paused(context)
        plan_id = paused.plan_id

        # An unexpected event for the plan leaves it paused.
        await context.bus.respond("approval.reminder", {"nudge": 1}, correlation_id=plan_id)
        # The expected one resumes it; the model then completes the plan.
        await context.bus.respond("approval.granted", {"by": "manager"}, correlation_id=plan_id)
        async with asyncio.timeout(30):
            answer = await anext(aiter(done))

    assert answer.data["result"] == {"approved": True}
    assert len(llm.calls) == 2  # the reminder reached no model
    plan = await context.memory.get_plan_context(plan_id)
    assert plan is not None and plan.status == "completed"
    assert plan.results["approval.granted"] == {"by": "manager"}
    assert (
        "approval.reminder" not in plan.results
        and plan.bookkeeping.choreography.waiting_for is None
    )


async def test_unexpected_event_while_paused_leaves_the_plan_paused(
    stack: Stack, context: PlatformContext, llm: ScriptedLLM
):
    await register_event(context, "approval.granted")
    planner = ChoreographyPlanner(name="p", reasoning_model=MODEL)
    plan = await planner.open_plan(
        context.bus.build_event(
            "action-requests",
            "order.received",
            {"amount": 1},
            response_event="order.done",
            correlation_id="c-1",
        ),
        context,
    )
    llm.say(wait("approval.granted"))
    decision = await planner.reason_next_action("order", context, plan=plan)
    await planner.execute_decision(decision, context, plan=plan)
    assert (
        plan.status == "paused" and plan.bookkeeping.choreography.waiting_for == "approval.granted"
    )

    stray = context.bus.build_event("action-results", "payment.done", {}, correlation_id="c-1")
    assert await planner.accept_event(stray, plan) is False
    stored = await context.memory.get_plan_context(plan.plan_id)
    assert stored is not None and stored.status == "paused"

    expected = context.bus.build_event(
        "action-results", "approval.granted", {"ok": True}, correlation_id="c-1"
    )
    assert await planner.accept_event(expected, plan) is True
    stored = await context.memory.get_plan_context(plan.plan_id)
    assert stored is not None and stored.status == "running"
    assert stored.results["approval.granted"] == {"ok": True}


async def test_delegate_hands_a_sub_goal_to_another_planner_and_continues(
    stack: Stack, context: PlatformContext, llm: ScriptedLLM
):
    # The sub-planner completes at once; the parent then completes with its result.
    sub = make_planner(stack, "summariser", "summary.goal")
    parent = make_planner(stack, "research", "research.goal")
    async with running(sub, parent):
        # summary.goal is answered with summary.done (the delegate names it).
        llm.say(
            delegate("summariser", "summary.goal", {"text": "long"}) | {},
            complete({"summary": "short"}),
            complete({"report": "done"}),
        )
        llm.answers[0]["next_action"]["response_event"] = "summary.done"
        answer = await context.bus.call(
            "research.goal", {"topic": "x"}, response_event="research.done", timeout=30
        )

    assert answer.data["result"] == {"report": "done"}
    parent_plan = await context.memory.get_plan_context(answer.data["plan_id"])
    assert parent_plan is not None
    sub_answer = parent_plan.results["summary.goal"]
    assert sub_answer["status"] == "completed" and sub_answer["result"] == {"summary": "short"}
    sub_plan = await context.memory.get_plan_context(sub_answer["plan_id"])
    assert sub_plan is not None and sub_plan.parent_plan_id == parent_plan.plan_id
