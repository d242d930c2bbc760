"""A plan's waits run on its context's clock: the pause between two writes of a plan that
conflicted is slept on ``context.clock``, so a test with a manual clock decides when the
retry happens instead of waiting for it.

In-process (``PlatformHarness``: the real memory service, no ports).
"""

from __future__ import annotations

import asyncio

import pytest

from soorma import PlanContext
from soorma.testing import PlatformHarness
from soorma_common.clock import ManualClock
from soorma_common.state import StateConfig

pytestmark = pytest.mark.asyncio

STATES = {
    "start": StateConfig(state_name="start", default_next="done"),
    "done": StateConfig(state_name="done", is_terminal=True),
}


def bump(name: str):
    def change(plan: PlanContext) -> None:
        plan.state[name] = plan.state.get(name, 0) + 1

    return change


async def test_the_retry_after_a_conflicting_plan_write_waits_on_the_contexts_clock() -> None:
    async with PlatformHarness() as platform:
        context = platform.new_context()
        context.clock = clock = ManualClock()
        created = await PlanContext.create(
            context, goal_event="g.goal", goal_data={}, state_machine=STATES
        )
        first = await PlanContext.restore(created.plan_id, context)
        second = await PlanContext.restore(created.plan_id, context)
        assert first is not None and second is not None
        await first.update(bump("first"))

        # The second copy is stale: its write conflicts, and the retry waits on the clock.
        retry = asyncio.create_task(second.update(bump("second")))
        await clock.sleeping()
        assert not retry.done()
        await clock.advance(1.0)  # more than any backoff
        await asyncio.wait_for(retry, 10)

        stored = await PlanContext.restore(created.plan_id, context)
        assert stored is not None
        assert (stored.state["first"], stored.state["second"]) == (1, 1)
        await context.close()
