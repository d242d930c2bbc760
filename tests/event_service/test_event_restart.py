"""Restarting the event service on Redis loses nothing: resumes and pending deliveries."""

from __future__ import annotations

import httpx
import pytest
from event_sse_client import SSEStream
from event_stack import Service, make_settings

from event_service import create_app
from soorma.client import verified_tls
from testsupport.server import serve

pytestmark = [pytest.mark.asyncio, pytest.mark.redis]


async def test_a_client_resuming_after_a_restart_gets_every_event_published_meanwhile(
    request: pytest.FixtureRequest,
) -> None:
    settings = make_settings("redis", request)
    async with (
        serve(create_app(settings)) as first,
        httpx.AsyncClient(verify=verified_tls(), base_url=first.url, timeout=15) as client,
    ):
        svc = Service(first, client, settings)
        async with SSEStream(client, topics="business-facts,plan-events") as stream:
            await svc.publish("business-facts", "seen", {"n": 0})
            token = (await stream.next()).id
        await svc.publish("business-facts", "missed", {"n": 1})
        await svc.publish("plan-events", "missed", {"n": 2})

    async with (
        serve(create_app(settings)) as second,
        httpx.AsyncClient(verify=verified_tls(), base_url=second.url, timeout=15) as client,
    ):
        svc = Service(second, client, settings)
        await svc.publish("plan-events", "missed", {"n": 3})
        await svc.publish("business-facts", "missed", {"n": 4})
        async with SSEStream(
            client, topics="business-facts,plan-events", last_event_id=token
        ) as resumed:
            frames = await resumed.messages(4)
            await svc.publish("plan-events", "marker")
            assert (await resumed.next()).json()["type"] == "marker"
    assert sorted(f.json()["data"]["n"] for f in frames) == [1, 2, 3, 4]


async def test_pending_group_deliveries_are_redelivered_after_a_restart(
    request: pytest.FixtureRequest,
) -> None:
    settings = make_settings("redis", request)
    group = {
        "topics": "action-requests",
        "group": "workers",
        "consumer": "w1",
        "visibility_timeout": 0.3,
    }
    async with (
        serve(create_app(settings)) as first,
        httpx.AsyncClient(verify=verified_tls(), base_url=first.url, timeout=15) as client,
    ):
        svc = Service(first, client, settings)
        async with SSEStream(client, **group) as stream:
            published = await svc.publish("action-requests", "job")
            await stream.next()  # taken, then the service goes away before any ack
        queued = await svc.publish("action-requests", "queued")  # nobody connected

    async with (
        serve(create_app(settings)) as second,
        httpx.AsyncClient(verify=verified_tls(), base_url=second.url, timeout=15) as client,
    ):
        svc = Service(second, client, settings)
        async with SSEStream(client, **group) as stream:
            frames = await stream.messages(2)
            ids = {f.json()["id"] for f in frames}
            assert ids == {published["event_id"], queued["event_id"]}
            assert await svc.ack("workers", [f.id or "" for f in frames]) == 2
