"""An agent settles its deliveries in batches, never before the handlers finished.

Against the real event service (memory and Redis backends); the SDK's requests are
observed in its HTTP transport, and the service's answers (how many deliveries an ack
or nack settled) are the proof that it took them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest
import pytest_asyncio

from soorma import Agent, AgentOptions, PlatformContext, PlatformSettings
from testsupport.server import LiveServer

pytestmark = pytest.mark.asyncio


@dataclass
class Settlement:
    kind: str  # "ack" or "nack"
    ids: list[str]
    reason: str | None
    count: int


class RecordingTransport(httpx.AsyncBaseTransport):
    """Passes requests to the network and records every ack/nack with its answer."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.settlements: list[Settlement] = []
        self.changed = asyncio.Condition()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        kind = request.url.path.rsplit("/", 1)[-1]
        if request.method == "POST" and kind in ("ack", "nack"):
            await response.aread()
            body = json.loads(request.content)
            self.settlements.append(
                Settlement(
                    kind=kind,
                    ids=body["ids"],
                    reason=body.get("reason"),
                    count=json.loads(response.content)["count"],
                )
            )
            async with self.changed:
                self.changed.notify_all()
        return response

    def settled(self, kind: str) -> list[str]:
        return [i for s in self.settlements if s.kind == kind for i in s.ids]

    async def wait_for(self, predicate, within: float = 10.0) -> None:
        async with asyncio.timeout(within), self.changed:
            await self.changed.wait_for(predicate)

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest_asyncio.fixture
async def recorded(
    event_service: LiveServer,
) -> AsyncIterator[tuple[PlatformContext, RecordingTransport]]:
    transport = RecordingTransport()
    async with httpx.AsyncClient(transport=transport) as http:
        context = PlatformContext.from_env(
            settings=PlatformSettings(event_service_url=event_service.url), http=http
        )
        yield context, transport


async def publish_facts(context: PlatformContext, names: list[str]) -> list[str]:
    events = [context.bus.build_event("business-facts", "job.posted", {"name": n}) for n in names]
    return await context.bus.publish_batch(events)


async def test_acks_of_handlers_finishing_together_share_one_request(recorded):
    context, transport = recorded
    agent = Agent(
        name="batcher",
        context=context,
        options=AgentOptions(max_concurrency=32),
    )
    names = [f"job-{i}" for i in range(20)]
    started: list[str] = []
    all_started, release = asyncio.Event(), asyncio.Event()
    delivery_ids: list[str] = []

    @agent.on_event(topic="business-facts", event_type="job.posted")
    async def handle(event, ctx):
        started.append(event.data["name"])
        delivery_ids.append(event.delivery_id)
        if len(started) == len(names):
            all_started.set()
        await release.wait()

    await agent.start()
    try:
        await publish_facts(context, names)
        async with asyncio.timeout(10):
            await all_started.wait()
        assert transport.settled("ack") == []  # nothing is acked while handlers run
        release.set()
        await transport.wait_for(lambda: len(transport.settled("ack")) == len(names))
    finally:
        await agent.stop()
    acks = [s for s in transport.settlements if s.kind == "ack"]
    assert sorted(transport.settled("ack")) == sorted(delivery_ids)
    assert sum(s.count for s in acks) == len(names)  # the service settled every one
    assert len(acks) <= 2, [len(s.ids) for s in acks]  # not one request per event


async def test_an_event_is_acked_only_after_its_handler_finished(recorded):
    context, transport = recorded
    agent = Agent(
        name="patient",
        context=context,
        options=AgentOptions(max_concurrency=4),
    )
    gate = asyncio.Event()
    ids: dict[str, str] = {}

    @agent.on_event(topic="business-facts", event_type="job.posted")
    async def handle(event, ctx):
        ids[event.data["name"]] = event.delivery_id
        if event.data["name"] == "slow":
            await gate.wait()

    await agent.start()
    try:
        await publish_facts(context, ["slow", "fast"])
        await transport.wait_for(lambda: "fast" in ids and ids["fast"] in transport.settled("ack"))
        assert ids["slow"] not in transport.settled("ack")
        gate.set()
        await transport.wait_for(lambda: ids["slow"] in transport.settled("ack"))
    finally:
        await agent.stop()


async def test_a_failing_handler_is_nacked_with_its_reason_and_redelivered(recorded):
    context, transport = recorded
    agent = Agent(name="failing", context=context)
    attempts: list[str] = []
    done = asyncio.Event()

    @agent.on_event(topic="business-facts", event_type="job.posted")
    async def handle(event, ctx):
        attempts.append(event.data["name"])
        if event.data["name"] == "bad" and attempts.count("bad") == 1:
            raise RuntimeError("disk full")
        if attempts.count("bad") == 2 and "good" in attempts:
            done.set()

    await agent.start()
    try:
        await publish_facts(context, ["bad", "good"])
        async with asyncio.timeout(15):
            await done.wait()
        await transport.wait_for(lambda: len(transport.settled("ack")) == 2)
    finally:
        await agent.stop()
    nacks = [s for s in transport.settlements if s.kind == "nack"]
    assert [(s.reason, len(s.ids), s.count) for s in nacks] == [("RuntimeError: disk full", 1, 1)]
    # The redelivery (same stream id) succeeded and was acked.
    assert nacks[0].ids[0] in transport.settled("ack")


async def test_stop_sends_the_acks_still_waiting_for_their_window(recorded):
    context, transport = recorded
    agent = Agent(
        name="lazy",
        context=context,
        options=AgentOptions(ack_window=60.0, max_concurrency=8),
    )
    handled: list[str] = []
    all_handled = asyncio.Event()

    @agent.on_event(topic="business-facts", event_type="job.posted")
    async def handle(event, ctx):
        handled.append(event.delivery_id)
        if len(handled) == 3:
            all_handled.set()

    await agent.start()
    await publish_facts(context, ["a", "b", "c"])
    async with asyncio.timeout(10):
        await all_handled.wait()
    assert transport.settled("ack") == []  # still inside the 60 s window
    await agent.stop()
    assert sorted(transport.settled("ack")) == sorted(handled)
    assert sum(s.count for s in transport.settlements) == 3


async def test_ack_batching_options_are_checked():
    with pytest.raises(ValueError, match="ack_window"):
        Agent(
            name="x",
            options=AgentOptions(ack_window=-1),
        )
    with pytest.raises(ValueError, match="ack_batch_size"):
        Agent(
            name="x",
            options=AgentOptions(ack_batch_size=0),
        )
