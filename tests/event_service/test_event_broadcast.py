"""Broadcast streams: live order, filters, resume tokens, fan-out, heartbeats, tenancy."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from event_sse_client import SSEStream
from event_stack import Service, make_settings

from event_service import create_app
from soorma.client import verified_tls
from testsupport.server import serve

pytestmark = pytest.mark.asyncio


def _events(topic: str, type_: str, ns: range) -> list[dict[str, object]]:
    return [{"topic": topic, "type": type_, "data": {"n": n}} for n in ns]


async def test_stream_starts_now_and_delivers_in_publish_order(service: Service) -> None:
    await service.publish("plan-events", "before")
    async with SSEStream(service.client, topics="plan-events") as stream:
        assert stream.ready is not None
        assert stream.ready.json()["topics"] == ["plan-events"]
        for n in range(5):
            await service.publish("plan-events", "single", {"n": n})
        await service.publish_batch(_events("plan-events", "batched", range(5, 30)))
        frames = await stream.messages(30)
    assert [f.json()["data"]["n"] for f in frames] == list(range(30))


async def test_event_type_globs_filter_server_side(service: Service) -> None:
    async with SSEStream(
        service.client, topics="business-facts", event_types="order.*,invoice.paid"
    ) as stream:
        for type_ in [
            "user.created",
            "order.placed",
            "invoice.sent",
            "invoice.paid",
            "order.shipped",
            "orderx",
        ]:
            await service.publish("business-facts", type_)
        await service.publish("business-facts", "order.marker")
        types = [f.json()["type"] for f in await stream.messages(4)]
    assert types == ["order.placed", "invoice.paid", "order.shipped", "order.marker"]


async def test_resume_after_dropped_connection_delivers_exactly_the_missed_events(
    service: Service,
) -> None:
    stream = SSEStream(service.client, topics="action-requests")
    async with stream:
        await service.publish_batch(_events("action-requests", "seen", range(5)))
        seen = await stream.messages(5)
    # Connection dropped; these are missed.
    await service.publish_batch(_events("action-requests", "missed", range(5, 12)))
    async with SSEStream(
        service.client, topics="action-requests", headers={"Last-Event-ID": seen[-1].id or ""}
    ) as resumed:
        missed = await resumed.messages(7)
        await service.publish("action-requests", "marker")
        marker = await resumed.next()
    assert [f.json()["data"]["n"] for f in missed] == list(range(5, 12))
    assert marker.json()["type"] == "marker"


async def test_resume_of_a_multi_topic_stream_delivers_every_missed_event_per_topic(
    service: Service,
) -> None:
    topics = "action-requests,action-results"
    async with SSEStream(service.client, topics=topics) as stream:
        await service.publish("action-requests", "a", {"n": 0})
        await service.publish("action-results", "b", {"n": 0})
        seen = await stream.messages(2)
    token = seen[-1].id
    assert token is not None and "action-requests=" in token and "action-results=" in token
    for n in range(1, 6):
        await service.publish("action-requests", "a", {"n": n})
        await service.publish("action-results", "b", {"n": n})
    async with SSEStream(service.client, topics=topics, last_event_id=token) as resumed:
        missed = await resumed.messages(10)
        await service.publish("action-results", "marker")
        assert (await resumed.next()).json()["type"] == "marker"
    by_topic: dict[str, list[int]] = {}
    for f in missed:
        by_topic.setdefault(f.json()["topic"], []).append(f.json()["data"]["n"])
    assert by_topic == {"action-requests": [1, 2, 3, 4, 5], "action-results": [1, 2, 3, 4, 5]}


async def test_ready_frame_token_resumes_a_stream_that_saw_no_events(service: Service) -> None:
    async with SSEStream(service.client, topics="system-events") as stream:
        assert stream.ready is not None
        token = stream.ready.id
    await service.publish("system-events", "missed")
    async with SSEStream(service.client, topics="system-events", last_event_id=token) as again:
        assert (await again.next()).json()["type"] == "missed"


async def test_filtered_out_events_still_advance_the_resume_position(service: Service) -> None:
    async with SSEStream(
        service.client, topics="task-events", event_types="keep", heartbeat=0.5
    ) as stream:
        await service.publish("task-events", "keep", {"n": 1})
        await service.publish("task-events", "drop", {"n": 2})
        first = await stream.next()
        # Heartbeats carry the position too, which by now covers the dropped event.
        beat = await stream.next("heartbeat")
    assert first.json()["data"]["n"] == 1
    await service.publish("task-events", "keep", {"n": 3})
    async with SSEStream(service.client, topics="task-events", last_event_id=beat.id) as again:
        assert (await again.next()).json()["data"]["n"] == 3


async def test_from_earliest_replays_the_topic_from_its_beginning(service: Service) -> None:
    await service.publish_batch(_events("billing-events", "old", range(3)))
    async with SSEStream(service.client, topics="billing-events", from_="earliest") as stream:
        frames = await stream.messages(3)
    assert [f.json()["data"]["n"] for f in frames] == [0, 1, 2]


async def test_many_subscribers_each_receive_every_event(service: Service) -> None:
    streams = [SSEStream(service.client, topics="notification-events") for _ in range(20)]
    await asyncio.gather(*(s.__aenter__() for s in streams))
    try:
        await service.publish_batch(_events("notification-events", "n", range(100)))
        received = await asyncio.gather(*(s.messages(100) for s in streams))
    finally:
        await asyncio.gather(*(s.close() for s in streams))
    for frames in received:
        assert [f.json()["data"]["n"] for f in frames] == list(range(100))


@pytest.mark.parametrize("backend", ["memory", pytest.param("redis", marks=pytest.mark.redis)])
async def test_a_subscriber_that_falls_behind_rereads_from_the_log_without_gaps(
    backend: str, request: pytest.FixtureRequest
) -> None:
    # A 300-event batch arrives in one fan-out read, overflowing a 100-entry buffer:
    # the stream must fall back to reading the log and still deliver everything once.
    settings = make_settings(backend, request, subscriber_buffer=100)
    async with (
        serve(create_app(settings)) as server,
        httpx.AsyncClient(verify=verified_tls(), base_url=server.url, timeout=15) as client,
    ):
        svc = Service(server, client, settings)
        async with SSEStream(client, topics="task-events") as stream:
            await svc.publish_batch(_events("task-events", "bulk", range(300)))
            await svc.publish_batch(_events("task-events", "bulk", range(300, 600)))
            frames = await stream.messages(600)
    assert [f.json()["data"]["n"] for f in frames] == list(range(600))


async def test_heartbeats_arrive_on_an_idle_stream(service: Service) -> None:
    async with SSEStream(service.client, topics="system-events", heartbeat=0.5) as stream:
        await stream.next("heartbeat")
        await stream.next("heartbeat")
    assert stream.heartbeats >= 2


async def test_a_tenant_never_receives_another_tenants_events(service: Service) -> None:
    async with SSEStream(
        service.client, topics="business-facts", headers={"X-Tenant-ID": "tenant-b"}
    ) as b_stream:
        await service.publish("business-facts", "secret", tenant="tenant-a")
        await service.publish("business-facts", "mine", tenant="tenant-b")
        frame = await b_stream.next()
    assert frame.json()["type"] == "mine"
    assert frame.json()["tenant_id"] == "tenant-b"


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"topics": "Bad!"}, "topics"),
        ({"topics": ""}, "topics"),
        ({"topics": "a", "last_event_id": "garbage"}, "id"),
        ({"topics": "a", "from": "yesterday"}, "from"),
        ({"topics": "a", "group": "g", "visibility_timeout": "0.01"}, "visibility_timeout"),
        ({"topics": "a", "group": "bad group"}, "group"),
    ],
)
async def test_bad_stream_parameters_are_rejected_with_422(
    service: Service, params: dict[str, str], field: str
) -> None:
    r = await service.client.get("/v1/events/stream", params=params)
    assert r.status_code == 422, r.text
    assert field in r.json()["error"]["message"]
