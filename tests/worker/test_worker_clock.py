"""An agent's wait for a platform service to come back runs on its context's clock: a
handler that met ``ServiceUnavailable`` runs again after a pause slept on
``context.clock``, so a test with a manual clock decides when."""

from __future__ import annotations

import asyncio

import pytest

from soorma import Event, PlatformContext
from soorma.agents._dispatch import call_while_unavailable
from soorma.agents._handlers import HandlerSpec
from soorma_common.clock import ManualClock
from soorma_common.errors import ServiceUnavailable

pytestmark = pytest.mark.asyncio


async def test_a_handler_meeting_an_outage_runs_again_when_the_contexts_clock_says() -> None:
    context = PlatformContext.from_env()
    context.clock = clock = ManualClock()
    runs: list[int] = []

    async def handler(event: Event, ctx: PlatformContext) -> None:
        runs.append(len(runs))
        if len(runs) == 1:
            raise ServiceUnavailable("memory service restarting")

    spec = HandlerSpec(topic="action-requests", event_type="x.requested", func=handler, name="h")
    event = Event(type="x.requested", topic="action-requests", data={})
    try:
        call = asyncio.create_task(call_while_unavailable(spec, event, context, agent="a"))
        await clock.sleeping()  # the pause after the first run
        assert runs == [0] and not call.done()
        await clock.advance(0.5)  # the first pause
        await asyncio.wait_for(call, 10)
        assert runs == [0, 1]
    finally:
        await context.close()
