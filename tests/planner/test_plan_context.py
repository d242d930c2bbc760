"""PlanContext persistence and concurrency against the real memory service."""

from __future__ import annotations

import asyncio

import pytest
import pytest_asyncio
from planner_support import wait_for

from soorma import PlanContext
from soorma._propagation import handling
from soorma.event import Event
from soorma_common.errors import VersionConflict
from soorma_common.memory import PlanStatus
from soorma_common.state import StateAction, StateConfig, StateTransition
from testsupport.capture import capture

# One set of services for the module; each test is a tenant of its own on them.
pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(loop_scope="module")
async def platform(tenant_platform):
    return tenant_platform


STATES = {
    "start": StateConfig(state_name="start", default_next="searching"),
    "searching": StateConfig(
        state_name="searching",
        action=StateAction(
            event_type="web.search.requested",
            response_event="web.search.completed",
            data={"query": "{goal_data.topic}"},
        ),
        transitions=[
            StateTransition(on_event="web.search.completed", to_state="done"),
            StateTransition(on_event="web.search.failed", to_state="failed"),
        ],
    ),
    "done": StateConfig(state_name="done", is_terminal=True),
    "failed": StateConfig(state_name="failed", is_terminal=True),
}


def answer(plan: PlanContext, event_type: str, data: dict, event_id: str | None = None) -> Event:
    corr = next(c for c, s in plan._steps.pending.items() if s == plan.current_state)
    fields = {"type": event_type, "topic": "action-results", "data": data, "correlation_id": corr}
    if event_id:
        fields["id"] = event_id
    return Event(**fields)


async def new_plan(context, **kwargs) -> PlanContext:
    return await PlanContext.create(
        context,
        goal_event="research.goal",
        goal_data={"topic": "owls"},
        state_machine=STATES,
        response_event="research.done",
        correlation_id="goal-1",
        **kwargs,
    )


async def test_plan_is_stored_and_restored_by_id_and_by_action_correlation(platform):
    context = platform.context()
    plan = await new_plan(context, session_id="s-1")
    assert plan.status == PlanStatus.PENDING and plan.version == 1
    assert await plan.execute_next() == "searching"

    by_id = await PlanContext.restore(plan.plan_id, context)
    corr = next(iter(by_id._steps.pending))
    by_corr = await PlanContext.restore_by_correlation(corr, context)
    assert by_corr.plan_id == by_id.plan_id == plan.plan_id
    assert by_corr.current_state == "searching" and by_corr.status == PlanStatus.RUNNING
    assert by_corr.goal_data == {"topic": "owls"} and by_corr.session_id == "s-1"
    assert by_corr.correlation_id == "goal-1" and by_corr.response_event == "research.done"
    assert isinstance(by_corr.state_machine["searching"], StateConfig)
    # C3: the goal's correlation id finds the plan (callers look plans up by it).
    by_goal = await PlanContext.restore_by_correlation("goal-1", context)
    assert by_goal is not None and by_goal.plan_id == plan.plan_id
    assert await PlanContext.restore_by_correlation("nobody", context) is None


async def test_unknown_state_in_a_machine_is_refused_with_its_name(platform):
    broken = {"start": StateConfig(state_name="start", default_next="nowhere")}
    with pytest.raises(ValueError, match="nowhere"):
        await PlanContext.create(platform.context(), goal_event="g", state_machine=broken)
    bad_condition = {
        "start": StateConfig(
            state_name="start",
            transitions=[
                StateTransition(on_event="x", to_state="start", condition="__import__('os')")
            ],
        ),
    }
    with pytest.raises(ValueError, match="start"):
        await PlanContext.create(platform.context(), goal_event="g", state_machine=bad_condition)


async def test_racing_answers_apply_exactly_one_transition(platform):
    context = platform.context()
    plan = await new_plan(context)
    await plan.execute_next()
    # Two copies restored before either answer is applied: a real race.
    a = await PlanContext.restore(plan.plan_id, context)
    b = await PlanContext.restore(plan.plan_id, context)
    ok = answer(a, "web.search.completed", {"pages": 3})
    bad = answer(b, "web.search.failed", {"error": "late"})
    entered = await asyncio.gather(a.execute_next(ok), b.execute_next(bad))

    assert sorted(e for e in entered if e) in (["done"], ["failed"])
    assert entered.count(None) == 1
    final = await PlanContext.restore(plan.plan_id, context)
    assert final.current_state in ("done", "failed")
    assert final.results["searching"] == (ok if final.current_state == "done" else bad).data


async def test_a_redelivered_answer_is_not_applied_twice(platform):
    context = platform.context()
    plan = await new_plan(context)
    await plan.execute_next()
    event = answer(plan, "web.search.completed", {"pages": 1}, event_id="answer-1")
    assert await plan.execute_next(event) == "done"
    again = await PlanContext.restore(plan.plan_id, context)
    version = again.version
    assert await again.execute_next(event) is None
    assert (await PlanContext.restore(plan.plan_id, context)).version == version


async def test_concurrent_updates_keep_every_change(platform):
    context = platform.context()
    plan = await new_plan(context)
    copies = [await PlanContext.restore(plan.plan_id, context) for _ in range(8)]

    def bump(p: PlanContext) -> None:
        p.state["counter"] = p.state.get("counter", 0) + 1

    await asyncio.gather(*(c.update(bump) for c in copies))
    assert (await PlanContext.restore(plan.plan_id, context)).state["counter"] == 8


async def test_concurrent_saves_merge_changes_to_different_keys(platform):
    context = platform.context()
    plan = await new_plan(context)
    copies = [await PlanContext.restore(plan.plan_id, context) for _ in range(6)]
    for i, copy in enumerate(copies):
        copy.results[f"part{i}"] = {"n": i}
    await asyncio.gather(*(c.save() for c in copies))
    stored = await PlanContext.restore(plan.plan_id, context)
    assert {k: v["n"] for k, v in stored.results.items()} == {f"part{i}": i for i in range(6)}


async def test_a_stale_write_without_retries_is_a_version_conflict(platform):
    context = platform.context()
    plan = await new_plan(context)
    stale = await PlanContext.restore(plan.plan_id, context)
    plan.state["x"] = 1
    await plan.save()
    stale.state["x"] = 2
    with pytest.raises(VersionConflict):
        await stale.save(retries=0)


async def test_answers_arriving_while_paused_are_replayed_on_resume(platform):
    context = platform.context()
    plan = await new_plan(context)
    await plan.execute_next()
    await plan.pause("legal_review")
    paused = await PlanContext.restore(plan.plan_id, context)
    assert paused.status == PlanStatus.PAUSED
    assert await paused.execute_next(answer(paused, "web.search.completed", {"n": 1})) is None
    assert (await PlanContext.restore(plan.plan_id, context)).current_state == "searching"

    resumed = await PlanContext.restore(plan.plan_id, context)
    assert await resumed.resume({"ok": True}) == "done"
    assert resumed.results["searching"] == {"n": 1}
    assert resumed.results["user_input"] == {"ok": True}
    assert resumed.status == PlanStatus.RUNNING
    await resumed.finalize({"answer": 42})
    assert (await PlanContext.restore(plan.plan_id, context)).status == PlanStatus.COMPLETED


async def test_the_trigger_that_ended_a_plan_announces_the_end_again_under_the_same_ids(
    platform,
):
    context = platform.context()
    plan = await new_plan(context)
    await plan.execute_next()
    event = answer(plan, "web.search.completed", {"pages": 2}, event_id="answer-2")
    async with capture(context, ["action-results"], ["research.done"]) as answers:
        assert await plan.execute_next(event, finish=True) == "done"
        await wait_for(lambda: len(answers) == 1)
        # Redelivered (the first handling may have died before announcing): same answer.
        again = await PlanContext.restore(plan.plan_id, context)
        assert await again.execute_next(event, finish=True) is None
        await wait_for(lambda: len(answers) == 2)
    assert answers[0].id == answers[1].id and answers[1].data == answers[0].data
    assert answers[1].data["status"] == "completed"


async def test_a_stale_copy_re_running_the_trigger_that_ended_the_plan_announces_the_end(
    platform,
):
    # The first handling stored the end, then its reply was lost (the memory service was
    # SIGKILLed mid-request) or it died before announcing; the handler is run again with
    # the copy it held before. Its write conflicts, the fresh copy has ended: the end
    # must be announced again, not dropped as "plan already finished".
    context = platform.context()
    plan = await new_plan(context)
    await plan.execute_next()
    stale = await PlanContext.restore(plan.plan_id, context)
    event = answer(plan, "web.search.failed", {"error": "timeout"}, event_id="answer-3")
    async with capture(context, ["action-results"], ["research.done"]) as answers:
        assert await plan.execute_next(event, finish=True) == "failed"
        await wait_for(lambda: len(answers) == 1)
        assert await stale.execute_next(event, finish=True) is None
        await wait_for(lambda: len(answers) == 2)
    assert answers[0].id == answers[1].id and answers[1].data == answers[0].data


async def test_default_next_in_a_handler_is_one_step_per_handled_event(platform):
    context = platform.context()
    plan = await new_plan(context)
    goal = Event(type="research.goal", topic="action-requests", data={}, id="goal-evt-1")
    async with capture(context, ["action-requests"], ["web.search.requested"]) as sent:
        with handling(goal):
            assert await plan.execute_next() == "searching"
            # The same goal again (a redelivery): no second move, the request re-sent.
            again = await PlanContext.restore(plan.plan_id, context)
            assert await again.execute_next() is None
        await wait_for(lambda: len(sent) == 2)
    assert sent[0].id == sent[1].id
    assert (await PlanContext.restore(plan.plan_id, context)).current_state == "searching"


async def test_the_sdk_keeps_its_bookkeeping_out_of_the_users_state(platform):
    context = platform.context()
    plan = await new_plan(context, state={"mine": 1})
    assert await plan.execute_next() == "searching"
    await plan.pause("approval")
    await plan.execute_next(answer(plan, "web.search.completed", {}))  # deferred
    await plan.resume({"ok": True})
    stored = await context.memory.get_plan_context(plan.plan_id)
    assert stored is not None and stored.current_state == "done"
    assert stored.state == {"mine": 1}
    assert stored.bookkeeping.correlation_id == "goal-1"
    assert stored.bookkeeping.applied and stored.bookkeeping.pause_reason is None
