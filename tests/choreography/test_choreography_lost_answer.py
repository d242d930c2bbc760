"""A COMPLETE whose goal answer could not be published is announced when the trigger
comes again (found by bench/chaos.py).

The event service was SIGKILLed right after a ChoreographyPlanner stored its plan as
completed and before the goal's answer went out. The step is recorded, so the repeated
trigger (here: the agent running the handler again once the service is back) should
re-announce the answer - but the planner's screening dropped every event of a finished
plan before ``step()`` could replay, and the goal was never answered (3 of 1,000 plans
stuck). The event service is real; only the network between the planner and it fails,
for the publishes that carry the goal's answer.
"""

from __future__ import annotations

import httpx
import pytest
from choreo_helpers import MODEL, ScriptedLLM, Stack, complete, make_searcher, publish

from soorma import PlatformContext
from soorma.ai.choreography import ChoreographyPlanner
from soorma.client import DEFAULT_CONNECT_RETRIES
from testsupport.tenant_services import running

pytestmark = pytest.mark.asyncio


class AnswerBlackout(httpx.AsyncBaseTransport):
    """Refuses (as a connect failure) the first attempts to publish the goal's answer."""

    def __init__(self, failures: int) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.failures = failures
        self.refused = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if (
            request.url.path.startswith("/v1/events/publish")
            and self.refused < self.failures
            and b"research.done" in request.content
        ):
            self.refused += 1
            raise httpx.ConnectError("event service down (test)", request=request)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_goal_answer_lost_at_complete_is_announced_again(
    stack: Stack, context: PlatformContext, llm: ScriptedLLM
) -> None:
    # Every attempt of the first handling fails; the handling after it gets through.
    blackout = AnswerBlackout(failures=DEFAULT_CONNECT_RETRIES + 1)
    http = httpx.AsyncClient(transport=blackout)
    planner = ChoreographyPlanner(
        name="research",
        reasoning_model=MODEL,
        context=PlatformContext.from_env(settings=stack.settings(), http=http),
    )

    @planner.on_goal("research.goal")
    async def on_goal(goal, context):
        plan = await planner.open_plan(goal, context)
        await planner.step(plan, context, trigger=f"new goal: {goal.data}")

    @planner.on_transition()
    async def on_transition(transition, context):
        await planner.step(transition.plan, context, trigger=f"{transition.event.type}")

    llm.say(publish("web.search.requested", {"query": "disco"}), complete({"summary": "ok"}))
    try:
        async with running(make_searcher(stack), planner):
            answer = await context.bus.call(
                "research.goal", {"topic": "disco"}, response_event="research.done", timeout=30
            )
    finally:
        await http.aclose()
    assert blackout.refused == DEFAULT_CONNECT_RETRIES + 1
    assert answer.data["status"] == "completed"
    assert answer.data["result"] == {"summary": "ok"}
    assert len(llm.calls) == 2  # the repeated trigger did not ask the model again
