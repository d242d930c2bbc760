"""Planner + PlanContext against real event, memory and registry services."""

from __future__ import annotations

import asyncio

import pytest
import pytest_asyncio
from planner_support import responder, wait_for

from soorma import PlanContext
from soorma.agents.planner import GoalContext, Planner, TransitionContext
from soorma_common.memory import PlanStatus
from soorma_common.state import PlanDefinition, StateAction, StateConfig, StateTransition
from testsupport.capture import capture

# One set of services for the module; each test is a tenant of its own on them.
pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(loop_scope="module")
async def platform(tenant_platform):
    return tenant_platform


def research_states() -> dict[str, StateConfig]:
    """The research machine of the Planner design (research, analyze, report)."""
    return {
        "start": StateConfig(state_name="start", default_next="searching"),
        "searching": StateConfig(
            state_name="searching",
            action=StateAction(
                event_type="web.search.requested",
                response_event="web.search.completed",
                data={"query": "{goal_data.topic}", "details": "{results.ask_user.details}"},
            ),
            transitions=[
                StateTransition(on_event="web.search.completed", to_state="analyzing"),
                StateTransition(on_event="web.search.failed", to_state="retry_search"),
                StateTransition(on_event="web.search.no_results", to_state="ask_user"),
            ],
        ),
        "retry_search": StateConfig(
            state_name="retry_search",
            action=StateAction(
                event_type="web.search.requested",
                response_event="web.search.completed",
                data={"query": "{goal_data.topic}", "broad": True},
            ),
            transitions=[
                StateTransition(on_event="web.search.completed", to_state="analyzing"),
                StateTransition(on_event="web.search.failed", to_state="failed"),
            ],
        ),
        "ask_user": StateConfig(
            state_name="ask_user",
            action=StateAction(
                event_type="notification.human_input",
                response_event="user.clarification.provided",
                data={"question": "No results for {goal_data.topic}. More details?"},
            ),
            transitions=[
                StateTransition(on_event="user.clarification.provided", to_state="searching")
            ],
        ),
        "analyzing": StateConfig(
            state_name="analyzing",
            action=StateAction(
                event_type="content.analyze.requested",
                response_event="content.analyze.completed",
                data={"pages": "{results.searching.pages}{results.retry_search.pages}"},
            ),
            transitions=[StateTransition(on_event="content.analyze.completed", to_state="done")],
        ),
        "done": StateConfig(state_name="done", is_terminal=True),
        "failed": StateConfig(state_name="failed", is_terminal=True),
    }


def search_answer(event):
    """Answers by query: 'flaky' fails once (then a broad search works), 'broken' always
    fails, 'obscure' has no results until the user adds details."""
    query, data = event.data.get("query"), event.data
    if query == "broken" or (query == "flaky" and not data.get("broad")):
        return "web.search.failed", {"error": "search backend down"}
    if query == "obscure" and not data.get("details"):
        return "web.search.no_results", {"count": 0}
    return "web.search.completed", {"pages": f"pages-about-{query}", "count": 3}


async def start_research_agents(platform, *, planner_name="research-planner"):
    planner = Planner(
        name=planner_name,
        context=platform.context(),
        plan_definition=PlanDefinition(plan_type="research.goal", states=research_states()),
    )
    await platform.start(planner)
    await platform.start(responder(platform, "searcher", "web.search.requested", search_answer))
    await platform.start(
        responder(
            platform,
            "analyzer",
            "content.analyze.requested",
            lambda e: ("content.analyze.completed", {"summary": f"summary of {e.data['pages']}"}),
        )
    )
    await platform.start(
        responder(
            platform,
            "user",
            "notification.human_input",
            lambda e: ("user.clarification.provided", {"details": "the 1970s paper"}),
        )
    )
    return planner


async def run_goal(context, topic):
    answer = await context.bus.call(
        "research.goal", {"topic": topic}, response_event="research.done", timeout=30
    )
    plan = await PlanContext.restore(answer.data["plan_id"], context)
    return answer, plan


async def test_happy_path_goes_searching_analyzing_done_and_answers_the_goal(platform):
    await start_research_agents(platform)
    client = platform.context()
    async with capture(client, ["system-events"], ["plan.*"]) as lifecycle:
        answer, plan = await run_goal(client, "llms")
        await wait_for(lambda: any(e.type == "plan.completed" for e in lifecycle))

    assert answer.data["status"] == "completed"
    assert answer.data["result"]["analyzing"] == {"summary": "summary of pages-about-llms"}
    assert plan.status == PlanStatus.COMPLETED
    assert plan.current_state == "done"
    assert plan.results["searching"]["count"] == 3
    assert plan.results["final"]["analyzing"]["summary"] == "summary of pages-about-llms"

    mine = [e for e in lifecycle if e.plan_id == plan.plan_id]
    assert mine[0].type == "plan.started"
    path = [
        (e.data["from_state"], e.data["to_state"]) for e in mine if e.type == "plan.state_changed"
    ]
    assert path == [("start", "searching"), ("searching", "analyzing"), ("analyzing", "done")]
    assert mine[-1].type == "plan.completed"


async def test_failed_search_is_retried_broadly_then_analyzed(platform):
    await start_research_agents(platform)
    answer, plan = await run_goal(platform.context(), "flaky")
    assert answer.data["status"] == "completed"
    assert plan.results["retry_search"]["pages"] == "pages-about-flaky"
    assert plan.results["searching"] == {"error": "search backend down"}


async def test_search_failing_twice_ends_in_failed_with_plan_failed(platform):
    await start_research_agents(platform)
    client = platform.context()
    async with capture(client, ["system-events"], ["plan.failed"]) as failed:
        answer, plan = await run_goal(client, "broken")
        await wait_for(lambda: bool(failed))
    assert answer.data["status"] == "failed"
    assert plan.status == PlanStatus.FAILED
    assert plan.current_state == "failed"
    assert failed[0].plan_id == plan.plan_id


async def test_no_results_asks_the_user_and_searches_again_with_the_details(platform):
    await start_research_agents(platform)
    answer, plan = await run_goal(platform.context(), "obscure")
    assert answer.data["status"] == "completed"
    assert plan.results["ask_user"] == {"details": "the 1970s paper"}
    assert plan.results["searching"]["pages"] == "pages-about-obscure"


async def test_condition_on_event_data_chooses_the_transition(platform):
    states = {
        "start": StateConfig(state_name="start", default_next="counting"),
        "counting": StateConfig(
            state_name="counting",
            action=StateAction(
                event_type="count.requested",
                response_event="count.done",
                data={"n": "{goal_data.n}"},
            ),
            transitions=[
                StateTransition(
                    on_event="count.done",
                    to_state="many",
                    condition="data.count >= 10 and goal_data.n != 13",
                ),
                StateTransition(on_event="count.done", to_state="few"),
            ],
        ),
        "many": StateConfig(state_name="many", is_terminal=True),
        "few": StateConfig(state_name="few", is_terminal=True),
    }
    await platform.start(
        Planner(
            name="counter-planner",
            context=platform.context(),
            plan_definition=PlanDefinition(plan_type="count.goal", states=states),
        )
    )
    await platform.start(
        responder(
            platform, "counter", "count.requested", lambda e: ("count.done", {"count": e.data["n"]})
        )
    )
    client = platform.context()
    ends = {}
    for n in (3, 12, 13):
        answer = await client.bus.call(
            "count.goal", {"n": n}, response_event="count.finished", timeout=30
        )
        plan = await PlanContext.restore(answer.data["plan_id"], client)
        ends[n] = plan.current_state
    assert ends == {3: "few", 12: "many", 13: "few"}


async def test_pause_holds_the_plan_until_an_external_event_resumes_it(platform):
    states = {
        "start": StateConfig(state_name="start", default_next="quoting"),
        "quoting": StateConfig(
            state_name="quoting",
            action=StateAction(event_type="quote.requested", response_event="quote.ready"),
            transitions=[StateTransition(on_event="quote.ready", to_state="awaiting_approval")],
        ),
        "awaiting_approval": StateConfig(state_name="awaiting_approval", default_next="ordering"),
        "ordering": StateConfig(
            state_name="ordering",
            action=StateAction(
                event_type="order.requested",
                response_event="order.placed",
                data={"amount": "{results.user_input.amount}"},
            ),
            transitions=[StateTransition(on_event="order.placed", to_state="done")],
        ),
        "done": StateConfig(state_name="done", is_terminal=True),
    }
    planner = Planner(
        name="buyer",
        context=platform.context(),
        transition_topics=["action-results", "business-facts"],
    )

    @planner.on_goal("purchase.goal")
    async def on_goal(goal: GoalContext, context):
        await planner.run_state_machine(goal, states, context)

    @planner.on_transition()
    async def on_transition(transition: TransitionContext, context):
        if transition.event.type == "budget.approved":
            await transition.plan.resume({"amount": transition.event.data["amount"]})
            return
        await planner.advance(transition)
        if transition.plan.current_state == "awaiting_approval":
            await transition.plan.pause("budget_approval_required")

    await platform.start(planner)
    await platform.start(
        responder(platform, "quoter", "quote.requested", lambda e: ("quote.ready", {"price": 100}))
    )
    orders = []

    def order(e):
        orders.append(e.data)
        return "order.placed", {"order_id": "o-1"}

    await platform.start(responder(platform, "orderer", "order.requested", order))

    client = platform.context()
    async with client.bus.subscribe(["action-results"], event_types=["purchase.done"]) as sub:
        await sub.wait_ready()
        await client.bus.request(
            "purchase.goal", {"item": "gpu"}, "purchase.done", event_id="goal-1"
        )
        plan_id = GoalContext(
            goal_id="goal-1", event_type="", data={}, correlation_id=None, response_event=None
        ).plan_id_for()

        async def status():
            plan = await PlanContext.restore(plan_id, client)
            return plan.status if plan else None

        async with asyncio.timeout(20):
            while await status() != PlanStatus.PAUSED:  # noqa: ASYNC110 - polls memory
                await asyncio.sleep(0.05)
        plan = await PlanContext.restore(plan_id, client)
        assert plan.bookkeeping.pause_reason == "budget_approval_required"
        assert orders == []

        await client.bus.announce("budget.approved", {"amount": 90}, correlation_id=plan_id)
        async with asyncio.timeout(20):
            answer = await anext(aiter(sub))
    assert answer.data["status"] == "completed"
    assert orders == [{"amount": 90}]
    plan = await PlanContext.restore(plan_id, client)
    assert plan.results["user_input"] == {"amount": 90}
    assert plan.bookkeeping.pause_reason is None


async def test_sub_plan_finishing_resumes_its_parent(platform):
    parent_states = {
        "start": StateConfig(state_name="start", default_next="delegating"),
        "delegating": StateConfig(
            state_name="delegating",
            action=StateAction(
                event_type="draft.goal",
                response_event="draft.done",
                data={"topic": "{goal_data.topic}"},
            ),
            transitions=[StateTransition(on_event="draft.done", to_state="done")],
        ),
        "done": StateConfig(state_name="done", is_terminal=True),
    }
    child_states = {
        "start": StateConfig(state_name="start", default_next="writing"),
        "writing": StateConfig(
            state_name="writing",
            action=StateAction(
                event_type="write.requested",
                response_event="write.done",
                data={"topic": "{goal_data.topic}"},
            ),
            transitions=[StateTransition(on_event="write.done", to_state="done")],
        ),
        "done": StateConfig(state_name="done", is_terminal=True),
    }
    await platform.start(
        Planner(
            name="report-planner",
            context=platform.context(),
            plan_definition=PlanDefinition(plan_type="report.goal", states=parent_states),
        )
    )
    await platform.start(
        Planner(
            name="draft-planner",
            context=platform.context(),
            plan_definition=PlanDefinition(plan_type="draft.goal", states=child_states),
        )
    )
    await platform.start(
        responder(
            platform,
            "writer",
            "write.requested",
            lambda e: ("write.done", {"text": f"on {e.data['topic']}"}),
        )
    )
    client = platform.context()
    answer = await client.bus.call(
        "report.goal", {"topic": "bees"}, response_event="report.done", timeout=30
    )
    assert answer.data["status"] == "completed"
    parent = await PlanContext.restore(answer.data["plan_id"], client)
    child_result = parent.results["delegating"]
    assert child_result["status"] == "completed"
    assert child_result["result"]["writing"] == {"text": "on bees"}
    child = await PlanContext.restore(child_result["plan_id"], client)
    assert child.parent_plan_id == parent.plan_id
    assert child.status == PlanStatus.COMPLETED
    subs = await client.memory.list_plans(parent_plan_id=parent.plan_id)
    assert [p.plan_id for p in subs] == [child.plan_id]
