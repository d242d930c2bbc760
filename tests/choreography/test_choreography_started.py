"""A ChoreographyPlanner plan announces ``plan.started`` with its goal and planner: what the
tracker shows as the plan's ``goal_event`` and ``planner``."""

from __future__ import annotations

import asyncio

import pytest
from choreo_helpers import ScriptedLLM, Stack, complete, make_planner

from soorma import PlatformContext
from testsupport.tenant_services import running

pytestmark = pytest.mark.asyncio


async def test_plan_started_carries_goal_event_and_planner(
    stack: Stack, context: PlatformContext, llm: ScriptedLLM
):
    llm.say(complete({"ok": True}))
    planner = make_planner(stack, "announcer", "announce.goal")
    async with (
        running(planner),
        context.bus.subscribe(["system-events"], event_types=["plan.started"]) as started,
        context.bus.subscribe(["action-results"], event_types=["announce.done"]) as done,
    ):
        await started.wait_ready()
        await done.wait_ready()
        await context.bus.request(
            "announce.goal",
            {"topic": "x"},
            response_event="announce.done",
            correlation_id="announce-1",
        )
        async with asyncio.timeout(30):
            async for event in started:  # (other tests' plans may start too)
                if event.data.get("goal_event") == "announce.goal":
                    break
            await anext(aiter(done))
    # The planner's bus source: its name unless it was given a context (as here).
    assert event.source == planner.context.bus.source and event.plan_id == event.data["plan_id"]
