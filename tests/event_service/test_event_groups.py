"""Consumer groups: competing consumers, ack/nack, redelivery, dead letters, replay."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis
from event_sse_client import SSEStream
from event_stack import Service, make_settings

from event_service import create_app
from soorma.client import verified_tls
from testsupport.server import serve

pytestmark = pytest.mark.asyncio


async def _dead_letters(
    service: Service, topic: str, n: int, *, tenant: str | None = None
) -> list[dict[str, Any]]:
    """Wait (bounded) until ``topic`` has ``n`` dead letters."""
    headers = {"X-Tenant-ID": tenant} if tenant else {}
    async with asyncio.timeout(15):
        while True:
            r = await service.client.get("/v1/events/dlq", params={"topic": topic}, headers=headers)
            assert r.status_code == 200, r.text
            if len(r.json()["events"]) >= n:
                return list(r.json()["events"])
            await asyncio.sleep(0.05)


async def test_two_consumers_split_1000_events_with_no_loss_and_no_duplicate(
    service: Service,
) -> None:
    group = {"topics": "action-requests", "group": "workers"}
    received: dict[str, list[int]] = {"c1": [], "c2": []}
    async with (
        SSEStream(service.client, consumer="c1", **group) as c1,
        SSEStream(service.client, consumer="c2", **group) as c2,
    ):
        done = asyncio.Event()

        async def consume(name: str, stream: SSEStream) -> None:
            while not done.is_set():
                try:
                    frame = await stream.next(within=0.5)
                except TimeoutError:
                    continue
                received[name].append(frame.json()["data"]["n"])
                assert await service.ack("workers", [frame.id or ""]) == 1
                if len(received["c1"]) + len(received["c2"]) >= 1000:
                    done.set()

        consumers = [asyncio.create_task(consume("c1", c1)), asyncio.create_task(consume("c2", c2))]
        for start in range(0, 1000, 100):
            await service.publish_batch(
                [
                    {"topic": "action-requests", "type": "job", "data": {"n": n}}
                    for n in range(start, start + 100)
                ]
            )
        async with asyncio.timeout(60):
            await done.wait()
        for task in consumers:
            task.cancel()
        await asyncio.gather(*consumers, return_exceptions=True)
    assert received["c1"] and received["c2"], "both consumers should share the work"
    everything = received["c1"] + received["c2"]
    assert sorted(everything) == list(range(1000))
    assert len(set(everything)) == 1000
    # Each consumer sees its share in publish order.
    assert received["c1"] == sorted(received["c1"])
    assert received["c2"] == sorted(received["c2"])


async def test_idle_consumers_take_turns_when_events_arrive_one_at_a_time(
    service: Service,
) -> None:
    group = {"topics": "action-requests", "group": "replicas"}
    handled: asyncio.Queue[tuple[str, int]] = asyncio.Queue()
    async with (
        SSEStream(service.client, consumer="r1", **group) as r1,
        SSEStream(service.client, consumer="r2", **group) as r2,
    ):

        async def consume(name: str, stream: SSEStream) -> None:
            while True:
                frame = await stream.next(within=60)
                assert await service.ack("replicas", [frame.id or ""]) == 1
                handled.put_nowait((name, frame.json()["data"]["n"]))

        consumers = [asyncio.create_task(consume("r1", r1)), asyncio.create_task(consume("r2", r2))]
        try:
            seen = []
            for n in range(8):
                await service.publish("action-requests", "job", {"n": n})
                async with asyncio.timeout(15):
                    seen.append(await handled.get())
        finally:
            for task in consumers:
                task.cancel()
            await asyncio.gather(*consumers, return_exceptions=True)
    assert [n for _, n in seen] == list(range(8))
    assert {name for name, _ in seen} == {"r1", "r2"}


async def test_an_event_unacked_by_a_killed_consumer_is_redelivered_to_another(
    service: Service,
) -> None:
    group = {"topics": "action-requests", "group": "workers", "visibility_timeout": 0.5}
    victim = SSEStream(service.client, consumer="victim", **group)
    async with victim:
        published = await service.publish("action-requests", "job", {"n": 1})
        frame = await victim.next()
        assert frame.json()["id"] == published["event_id"]
        async with SSEStream(service.client, consumer="survivor", **group) as survivor:
            await victim.close()  # dies mid-handler: no ack, no nack
            again = await survivor.next()
            assert again.json()["id"] == published["event_id"]
            assert again.id == frame.id
            assert await service.ack("workers", [again.id or ""]) == 1


async def test_nack_makes_the_event_available_for_redelivery_at_once(service: Service) -> None:
    # The visibility timeout is far beyond the wait below, so only the nack can explain
    # a redelivery.
    async with SSEStream(
        service.client, topics="task-events", group="g", visibility_timeout=600
    ) as stream:
        await service.publish("task-events", "job")
        first = await stream.next()
        assert await service.nack("g", [first.id or ""], "transient failure") == 1
        second = await stream.next(within=10)
    assert second.id == first.id


async def test_an_event_that_always_fails_lands_in_the_dlq_and_replay_reinjects_it(
    service: Service,
) -> None:
    async with SSEStream(
        service.client,
        topics="action-requests",
        group="g",
        max_deliveries=3,
        visibility_timeout=600,
    ) as stream:
        published = await service.publish("action-requests", "poison", {"bad": True})
        for attempt in range(3):
            frame = await stream.next()
            assert frame.json()["id"] == published["event_id"]
            assert await service.nack("g", [frame.id or ""], f"boom {attempt}") == 1

        [dead] = await _dead_letters(service, "action-requests", 1)
        assert dead["event"]["id"] == published["event_id"]
        assert dead["reason"] == "boom 2"
        assert dead["deliveries"] == 3
        assert dead["group"] == "g"
        assert dead["dead_at"]
        # Dead-lettering acked it in the live topic: it is not redelivered.
        assert await service.ack("g", [frame.id or ""]) == 0

        r = await service.client.post(
            "/v1/events/dlq/replay", json={"topic": "action-requests", "ids": [dead["id"]]}
        )
        assert r.status_code == 200, r.text
        [result] = r.json()["results"]
        assert result["event_id"] == published["event_id"]
        replayed = await stream.next()
        assert replayed.id == f"action-requests={result['stream_id']}"
        assert replayed.json()["data"] == {"bad": True}
        assert await service.ack("g", [replayed.id or ""]) == 1

    r = await service.client.get("/v1/events/dlq", params={"topic": "action-requests"})
    assert r.json()["events"] == []
    r = await service.client.post(
        "/v1/events/dlq/replay", json={"topic": "action-requests", "ids": [dead["id"]]}
    )
    assert r.status_code == 404
    assert dead["id"] in r.json()["error"]["message"]


async def test_visibility_expiry_dead_letters_after_max_deliveries(service: Service) -> None:
    async with SSEStream(
        service.client, topics="task-events", group="g", max_deliveries=2, visibility_timeout=0.2
    ) as stream:
        await service.publish("task-events", "ignored")
        await stream.messages(2)  # delivered twice, never acked
        [dead] = await _dead_letters(service, "task-events", 1)
    assert dead["reason"] == "visibility timeout expired after 2 deliveries"
    assert dead["deliveries"] == 2


async def test_a_new_group_starts_at_now_unless_from_earliest(service: Service) -> None:
    await service.publish("plan-events", "old")
    async with SSEStream(service.client, topics="plan-events", group="late") as stream:
        await service.publish("plan-events", "new")
        assert (await stream.next()).json()["type"] == "new"
    async with SSEStream(
        service.client, topics="plan-events", group="history", from_="earliest"
    ) as stream:
        frames = await stream.messages(2)
    assert [f.json()["type"] for f in frames] == ["old", "new"]


async def test_events_outside_the_type_filter_are_acked_for_the_group(service: Service) -> None:
    group = {"topics": "business-facts", "group": "g", "visibility_timeout": 0.2}
    async with SSEStream(service.client, event_types="keep.*", **group) as picky:
        await service.publish("business-facts", "drop.me")
        await service.publish("business-facts", "keep.me")
        kept = await picky.next()
        assert kept.json()["type"] == "keep.me"
        assert await service.ack("g", [kept.id or ""]) == 1
    # An unfiltered consumer of the same group never sees the skipped event again,
    # even after its visibility timeout has long passed.
    async with SSEStream(service.client, **group) as everything:
        await asyncio.sleep(0.5)  # let the claimer scan past the visibility timeout
        await service.publish("business-facts", "marker")
        assert (await everything.next()).json()["type"] == "marker"


async def test_ack_counts_pending_deliveries_and_rejects_malformed_ids(service: Service) -> None:
    async with SSEStream(service.client, topics="task-events", group="g") as stream:
        await service.publish("task-events", "job")
        frame = await stream.next()
    assert await service.ack("g", [frame.id or ""]) == 1
    assert await service.ack("g", [frame.id or ""]) == 0
    assert await service.ack("other-group", [frame.id or ""]) == 0
    r = await service.client.post("/v1/events/ack", json={"group": "g", "ids": ["nonsense"]})
    assert r.status_code == 422
    assert "nonsense" in r.json()["error"]["message"]
    r = await service.client.post("/v1/events/nack", json={"group": "g"})
    assert r.status_code == 422
    assert "ids" in r.json()["error"]["message"]


async def test_another_tenant_cannot_ack_list_or_replay_dead_letters(service: Service) -> None:
    a = {"X-Tenant-ID": "tenant-a"}
    async with SSEStream(
        service.client,
        topics="action-requests",
        group="g",
        max_deliveries=1,
        visibility_timeout=600,
        headers=a,
    ) as stream:
        await service.publish("action-requests", "poison", tenant="tenant-a")
        frame = await stream.next()
        # Tenant B names tenant A's delivery: nothing happens to it.
        assert await service.ack("g", [frame.id or ""], tenant="tenant-b") == 0
        assert await service.nack("g", [frame.id or ""], "x", tenant="tenant-b") == 0
        assert await service.nack("g", [frame.id or ""], "fails", tenant="tenant-a") == 1
        [dead] = await _dead_letters(service, "action-requests", 1, tenant="tenant-a")
    assert dead["reason"] == "fails"

    r = await service.client.get(
        "/v1/events/dlq", params={"topic": "action-requests"}, headers={"X-Tenant-ID": "tenant-b"}
    )
    assert r.json()["events"] == []
    r = await service.client.post(
        "/v1/events/dlq/replay",
        json={"topic": "action-requests", "ids": [dead["id"]]},
        headers={"X-Tenant-ID": "tenant-b"},
    )
    assert r.status_code == 404
    assert r.json()["error"]["code"] == "event_not_found"
    # Still there for its owner.
    assert len(await _dead_letters(service, "action-requests", 1, tenant="tenant-a")) == 1


async def test_dlq_requests_are_validated(service: Service) -> None:
    r = await service.client.get("/v1/events/dlq", params={"topic": "Not A Topic"})
    assert r.status_code == 422
    r = await service.client.post(
        "/v1/events/dlq/replay", json={"topic": "action-requests", "ids": ["x"]}
    )
    assert r.status_code == 422
    assert "stream id" in r.json()["error"]["message"]


@pytest.mark.redis
async def test_closed_group_streams_drop_their_consumer_unless_it_owns_deliveries(
    request: pytest.FixtureRequest,
) -> None:
    settings = make_settings("redis", request)
    key = f"{settings.redis_prefix}:{{default}}:t:action-requests"
    group = {"topics": "action-requests", "group": "tidy"}
    r = aioredis.from_url(settings.redis_url)

    async def consumers() -> dict[str, int]:
        rows = await r.xinfo_consumers(key, "tidy")
        return {row["name"].decode(): int(row["pending"]) for row in rows}

    try:
        async with (
            serve(create_app(settings)) as server,
            httpx.AsyncClient(verify=verified_tls(), base_url=server.url, timeout=15) as client,
        ):
            service = Service(server, client, settings)
            async with SSEStream(client, consumer="holder", **group) as holder:
                await service.publish("action-requests", "job")
                await holder.next()  # delivered, never acked: "holder" owns it
            for _ in range(3):  # random consumer ids, one per connection, all acked
                async with SSEStream(client, **group) as stream:
                    await service.publish("action-requests", "job")
                    assert await service.ack("tidy", [(await stream.next()).id or ""]) == 1
            assert len(await consumers()) >= 1
            # Dropping happens just after a stream closes: poll (bounded) for it.
            async with asyncio.timeout(10):
                while True:
                    found = await consumers()
                    if len(found) == 1:
                        break
                    await asyncio.sleep(0.05)
        assert found == {"holder": 1}
    finally:
        await r.aclose()
