"""BusClient against the real event service (memory and Redis backends)."""

from __future__ import annotations

import pytest
from sdk_helpers import make_context

from soorma import PlatformContext
from soorma_common.errors import PayloadTooLarge
from testsupport.server import LiveServer

pytestmark = pytest.mark.asyncio


async def test_published_event_carries_response_event_and_reaches_subscribers(
    context: PlatformContext,
):
    bus = context.bus
    async with bus.subscribe("action-requests", event_types=["research.*"]) as sub:
        await sub.wait_ready(10)
        event_id = await bus.request(
            "research.requested", {"topic": "ai"}, response_event="research.completed"
        )
        event = await anext(sub)
    assert event.id == event_id
    assert event.response_event == "research.completed"
    assert event.response_topic == "action-results"
    assert event.correlation_id == event_id
    assert event.data == {"topic": "ai"}
    assert event.tenant_id == "default"


async def test_publish_batch_returns_ids_in_order_and_delivers_in_order(
    context: PlatformContext,
):
    bus = context.bus
    events = [bus.build_event("business-facts", "n.counted", {"n": n}) for n in range(3)]
    async with bus.subscribe("business-facts") as sub:
        await sub.wait_ready(10)
        ids = await bus.publish_batch(events)
        received = [await anext(sub) for _ in range(3)]
    assert ids == [e.id for e in events]
    assert [e.data["n"] for e in received] == [0, 1, 2]


async def test_broadcast_subscription_resumes_after_its_last_event(context: PlatformContext):
    bus = context.bus
    async with bus.subscribe("business-facts") as first:
        await first.wait_ready(10)
        await bus.announce("n.counted", {"n": 1})
        assert (await anext(first)).data == {"n": 1}
        token = first.last_event_id
    await bus.announce("n.counted", {"n": 2})
    await bus.announce("n.counted", {"n": 3})
    async with bus.subscribe("business-facts", last_event_id=token) as resumed:
        assert [(await anext(resumed)).data["n"] for _ in range(2)] == [2, 3]


async def test_service_errors_surface_as_domain_errors(context: PlatformContext):
    with pytest.raises(PayloadTooLarge):
        await context.bus.announce("blob.stored", {"blob": "x" * 10_000})


async def test_call_times_out_with_a_hint_when_nobody_answers(event_service: LiveServer):
    async with make_context(event_service.url) as ctx:
        with pytest.raises(TimeoutError, match=r"is an agent handling 'nobody\.requested'"):
            await ctx.bus.call("nobody.requested", {}, response_event="nobody.done", timeout=0.5)
