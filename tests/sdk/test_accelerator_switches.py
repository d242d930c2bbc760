"""The SDK's two request-saving accelerators answer like the plain paths they replace.

Each is switched in one place, :class:`soorma.PlatformSettings` (``SOORMA_PUBLISH_COALESCE``,
``SOORMA_ACK_BATCHING``; docs/architecture.md, "Accelerators"). Each test runs one scenario
through the accelerator and through the plain path against the real event service (memory
and Redis backends) and requires the same observable outcome; the requests seen in the
SDK's HTTP transport show that the two paths really differ.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import Any

import httpx
import pytest

from soorma import Agent, AgentOptions, PlatformContext, PlatformSettings
from soorma.agents._acks import AckBatcher, DirectAcks
from soorma_common.errors import PayloadTooLarge
from testsupport.server import LiveServer

pytestmark = pytest.mark.asyncio

PATHS = [pytest.param(True, id="accelerated"), pytest.param(False, id="plain")]


class RecordingTransport(httpx.AsyncBaseTransport):
    """Passes requests on; records each POST's path, ids sent and the service's count."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.posts: Counter[str] = Counter()
        self.settled: list[tuple[str, list[str], str | None, int]] = []
        self.changed = asyncio.Condition()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        if request.method != "POST":
            return response
        self.posts[request.url.path] += 1
        kind = request.url.path.rsplit("/", 1)[-1]
        if kind in ("ack", "nack"):
            await response.aread()
            body = json.loads(request.content)
            count = json.loads(response.content)["count"]
            self.settled.append((kind, body["ids"], body.get("reason"), count))
            async with self.changed:
                self.changed.notify_all()
        return response

    def ids(self, kind: str) -> list[str]:
        return [i for k, ids, _, _ in self.settled if k == kind for i in ids]

    async def wait_for(self, predicate, within: float = 15.0) -> None:
        async with asyncio.timeout(within), self.changed:
            await self.changed.wait_for(predicate)

    async def aclose(self) -> None:
        await self.inner.aclose()


def settings_for(service: LiveServer, **switches: bool) -> PlatformSettings:
    return PlatformSettings(event_service_url=service.url, **switches)


# -- publish coalescer ------------------------------------------------------------------


async def publish_scenario(service: LiveServer, coalesce: bool) -> tuple[Any, Counter[str]]:
    """40 concurrent publishes, one of them too large; what each caller and a subscriber saw."""
    transport = RecordingTransport()
    async with httpx.AsyncClient(transport=transport) as http:
        context = PlatformContext.from_env(
            settings=settings_for(service, publish_coalesce=coalesce), http=http
        )
        assert context.bus.coalesce is coalesce
        payloads: list[dict[str, Any]] = [{"n": n} for n in range(40)]
        payloads[17] = {"n": 17, "blob": "x" * 8192}  # over the test service's 4 KiB limit
        async with context.bus.subscribe(["business-facts"], event_types=["item.added"]) as sub:
            await sub.wait_ready(10)
            outcomes = await asyncio.gather(
                *(
                    context.bus.announce("item.added", data, event_id=f"item-{data['n']}")
                    for data in payloads
                ),
                return_exceptions=True,
            )
            delivered: list[int] = []
            async with asyncio.timeout(15):
                async for event in sub:
                    delivered.append(event.data["n"])
                    if len(delivered) == len(payloads) - 1:
                        break
    answers = [
        type(o).__name__ if isinstance(o, BaseException) else o for o in outcomes
    ]  # an id, or the error's class
    return (answers, sorted(delivered)), transport.posts


async def test_publishes_mean_the_same_with_and_without_the_coalescer(
    event_service: LiveServer,
) -> None:
    outcome_on, posts_on = await publish_scenario(event_service, coalesce=True)
    outcome_off, posts_off = await publish_scenario(event_service, coalesce=False)
    answers, delivered = outcome_on
    assert answers[17] == PayloadTooLarge.__name__
    assert [a for i, a in enumerate(answers) if i != 17] == [
        f"item-{n}" for n in range(40) if n != 17
    ]
    assert delivered == [n for n in range(40) if n != 17]
    assert outcome_off == outcome_on
    # The two paths are different: shared requests on (a refused batch is then sent again
    # one event at a time), one request per publish off.
    assert posts_off["/v1/events/publish"] == 40 and posts_off["/v1/events/publish-batch"] == 0
    assert posts_on["/v1/events/publish-batch"] >= 1


# -- ack batcher ------------------------------------------------------------------------


async def settle_scenario(service: LiveServer, batched: bool, group: str) -> tuple[Any, Any]:
    """20 events, every fifth failing once; what the handlers did and the service settled."""
    transport = RecordingTransport()
    async with httpx.AsyncClient(transport=transport) as http:
        context = PlatformContext.from_env(
            settings=settings_for(service, ack_batching=batched), http=http
        )
        agent = Agent(name=group, context=context, options=AgentOptions(max_concurrency=8))
        attempts: Counter[int] = Counter()
        names = list(range(20))
        failing = [n for n in names if n % 5 == 0]

        @agent.on_event(topic="business-facts", event_type="job.posted")
        async def handle(event, ctx):
            n = event.data["n"]
            attempts[n] += 1
            if n in failing and attempts[n] == 1:
                raise RuntimeError(f"job {n} failed once")

        await agent.start()
        try:
            kind = AckBatcher if batched else DirectAcks
            assert isinstance(agent._acks, kind)
            events = [
                context.bus.build_event("business-facts", "job.posted", {"n": n}) for n in names
            ]
            await context.bus.publish_batch(events)
            await transport.wait_for(lambda: len(transport.ids("ack")) == len(names))
        finally:
            await agent.stop()
    acked = sum(count for kind, _, _, count in transport.settled if kind == "ack")
    nacks = sorted(
        (reason, count) for kind, _, reason, count in transport.settled if kind == "nack"
    )
    outcome = (dict(sorted(attempts.items())), acked, nacks)
    requests = [(kind, len(ids)) for kind, ids, _, _ in transport.settled]
    return outcome, requests


@pytest.mark.parametrize("batched", PATHS)
async def test_settle_scenario_is_served_by_the_chosen_path(
    event_service: LiveServer, batched: bool
) -> None:
    _, requests = await settle_scenario(event_service, batched, f"settler-{batched}")
    if batched:
        assert any(size > 1 for _, size in requests), requests
    else:
        assert all(size == 1 for _, size in requests), requests
        assert len(requests) == 20 + 4  # one per delivery: 20 acks, 4 nacks


async def test_settlements_mean_the_same_with_and_without_the_batcher(
    event_service: LiveServer,
) -> None:
    batched, _ = await settle_scenario(event_service, True, "settles-batched")
    plain, _ = await settle_scenario(event_service, False, "settles-plain")
    attempts, acked, nacks = batched
    assert attempts == {n: 2 if n % 5 == 0 else 1 for n in range(20)}
    assert acked == 20  # the service settled every delivery
    assert nacks == sorted((f"RuntimeError: job {n} failed once", 1) for n in (0, 5, 10, 15))
    assert plain == batched


# -- the switches are read from the environment, in one place -------------------------


async def test_the_switches_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOORMA_PUBLISH_COALESCE", "false")
    monkeypatch.setenv("SOORMA_ACK_BATCHING", "off")
    async with PlatformContext.from_env() as context:
        assert context.bus.coalesce is False
        assert context.settings.ack_batching is False
    monkeypatch.delenv("SOORMA_PUBLISH_COALESCE")
    monkeypatch.delenv("SOORMA_ACK_BATCHING")
    async with PlatformContext.from_env() as context:
        assert context.bus.coalesce is True
        assert context.settings.ack_batching is True
