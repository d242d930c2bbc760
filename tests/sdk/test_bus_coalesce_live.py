"""Concurrent publishes share requests without changing what each publish means.

Against the real event service (memory and Redis backends); requests are counted in the
SDK's HTTP transport.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator

import httpx
import pytest
import pytest_asyncio

from soorma import PlatformContext, PlatformSettings
from soorma_common.errors import PayloadTooLarge
from testsupport.server import LiveServer

pytestmark = pytest.mark.asyncio


class CountingTransport(httpx.AsyncBaseTransport):
    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.posts: Counter[str] = Counter()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            self.posts[request.url.path] += 1
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest_asyncio.fixture
async def counted(
    event_service: LiveServer,
) -> AsyncIterator[tuple[PlatformContext, CountingTransport]]:
    transport = CountingTransport()
    async with httpx.AsyncClient(transport=transport) as http:
        context = PlatformContext.from_env(
            settings=PlatformSettings(event_service_url=event_service.url), http=http
        )
        yield context, transport


async def collect(sub, count: int) -> list:
    seen = []
    async with asyncio.timeout(15):
        async for event in sub:
            seen.append(event)
            if len(seen) == count:
                return seen
    return seen


async def test_concurrent_publishes_share_requests_and_each_gets_its_own_id(counted):
    context, transport = counted
    names = [f"order-{i}" for i in range(40)]
    async with context.bus.subscribe(["business-facts"], event_types=["order.placed"]) as sub:
        await sub.wait_ready(10)
        ids = await asyncio.gather(
            *(context.bus.announce("order.placed", {"name": n}, event_id=f"id-{n}") for n in names)
        )
        delivered = await collect(sub, len(names))
    assert ids == [f"id-{n}" for n in names]
    assert sorted(e.id for e in delivered) == sorted(ids)
    requests = transport.posts["/v1/events/publish"] + transport.posts["/v1/events/publish-batch"]
    assert requests <= 5, transport.posts  # not one request per publish


async def test_a_refused_event_fails_only_its_own_publish_when_requests_are_shared(counted):
    context, transport = counted
    big = {"blob": "x" * 8192}  # over the test service's 4 KiB limit
    payloads = [{"n": i} for i in range(6)]
    payloads.insert(3, big)
    async with context.bus.subscribe(["business-facts"], event_types=["item.*"]) as sub:
        await sub.wait_ready(10)
        outcomes = await asyncio.gather(
            *(context.bus.announce("item.added", data) for data in payloads),
            return_exceptions=True,
        )
        delivered = await collect(sub, len(payloads) - 1)
    refused = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(refused) == 1 and isinstance(refused[0], PayloadTooLarge)
    assert isinstance(outcomes[3], PayloadTooLarge)
    assert sorted(e.data["n"] for e in delivered) == list(range(6))
    assert transport.posts["/v1/events/publish-batch"] >= 1  # they were shared at first


async def test_publishes_of_different_tenants_never_share_a_request(counted, event_service):
    from soorma.bus import BusClient
    from soorma.client import Identity

    context, _ = counted
    await asyncio.gather(
        *(
            context.bus.announce("order.placed", {"i": i}, tenant_id=f"tenant-{i % 2}")
            for i in range(10)
        )
    )
    for parity in (0, 1):
        tenant = f"tenant-{parity}"
        await context.bus.announce("order.placed", {"i": "end"}, tenant_id=tenant)
        reader = BusClient(
            base_url=event_service.url, http=context.bus.http, identity=Identity(tenant_id=tenant)
        )
        async with reader.subscribe(
            ["business-facts"], event_types=["order.placed"], group="audit", start_from="earliest"
        ) as sub:
            seen = []
            async with asyncio.timeout(15):
                async for event in sub:
                    if event.data["i"] == "end":
                        break
                    seen.append(event.data["i"])
        assert sorted(seen) == [i for i in range(10) if i % 2 == parity], tenant


async def test_coalescing_can_be_turned_off(event_service: LiveServer):
    from soorma.bus import BusClient

    transport = CountingTransport()
    async with httpx.AsyncClient(transport=transport) as http:
        bus = BusClient(base_url=event_service.url, http=http, coalesce=False)
        await asyncio.gather(*(bus.announce("x.happened", {"i": i}) for i in range(5)))
    assert transport.posts == Counter({"/v1/events/publish": 5})
