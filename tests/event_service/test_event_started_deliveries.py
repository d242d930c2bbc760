"""Counting only started deliveries towards max_deliveries (``count_deliveries=started``).

A client reports the deliveries whose handler started in ``extend``'s ``running`` list
(a nack is a started delivery too). On such a stream a delivery that only waited in the
buffer of a consumer that died costs nothing until a hard cap (``max_deliveries`` times
``delivery_cap_factor``); one whose handler was running in ``max_deliveries`` deliveries
is dead-lettered (a poison event killing its consumers). Streams that do not opt in
count every delivery (test_event_recovery.py).
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from event_sse_client import SSEStream
from event_stack import Service

pytestmark = pytest.mark.asyncio

TOPIC = "action-requests"
MAX = 2
CAP = MAX * 4  # the default delivery_cap_factor


def _group(consumer: str, **extra: Any) -> dict[str, Any]:
    return {
        "topics": TOPIC,
        "group": "g",
        "consumer": consumer,
        "visibility_timeout": 600,
        "max_deliveries": MAX,
        "count_deliveries": "started",
        "from_": "earliest",  # the group starts with the first stream, after publishing
        **extra,
    }


async def _started(service: Service, consumer: str, ids: list[str]) -> httpx.Response:
    body = {"group": "g", "ids": ids, "running": ids, "consumer": consumer}
    return await service.client.post("/v1/events/extend", json=body)


async def _life(service: Service, consumer: str, *, start: bool = False) -> str | None:
    """One life of a consumer process: the delivery it gets (``None``: none), its handler
    reported started if ``start``; then the process dies."""
    async with SSEStream(service.client, **_group(consumer)) as stream:
        try:
            frame = await stream.next(within=1.0)
        except TimeoutError:
            return None
        token = frame.id or ""
        if start:
            r = await _started(service, consumer, [token])
            assert r.status_code == 200 and r.json() == {"extended": 1}, r.text
        return token


async def _dead(service: Service) -> list[dict[str, Any]]:
    r = await service.client.get("/v1/events/dlq", params={"topic": TOPIC})
    assert r.status_code == 200, r.text
    return list(r.json()["events"])


async def test_a_delivery_never_started_survives_restarts_until_the_hard_cap(
    service: Service,
) -> None:
    await service.publish(TOPIC, "buffered")
    # Its holder dies before any handler starts, far more often than max_deliveries.
    tokens = [await _life(service, "crashy") for _ in range(CAP)]
    assert None not in tokens and len(set(tokens)) == 1
    assert await _dead(service) == []
    # The cap still ends it: a delivery that never gets anywhere is dead-lettered.
    assert await _life(service, "crashy") is None
    [dead] = await _dead(service)
    assert dead["deliveries"] == CAP
    assert dead["reason"].startswith(f"delivered {CAP} times and never finished")


async def test_a_delivery_whose_handler_ran_in_max_deliveries_deliveries_is_dead_lettered(
    service: Service,
) -> None:
    await service.publish(TOPIC, "poison")
    # Started, reported twice in one delivery: that is one started delivery.
    token = await _life(service, "crashy", start=True)
    assert token is not None
    assert (await _started(service, "crashy", [token])).status_code == 200
    # Deliveries that never reached a handler do not count ...
    assert await _life(service, "crashy") == token
    # ... the second one that did ...
    assert await _life(service, "crashy", start=True) == token
    # ... ends it: a poison event killing each consumer that runs it.
    assert await _life(service, "crashy") is None
    [dead] = await _dead(service)
    assert dead["deliveries"] == 3
    assert dead["event"]["type"] == "poison"
    assert dead["reason"].startswith(f"handler was running in {MAX} deliveries")


async def test_nacks_count_as_started_deliveries(service: Service) -> None:
    async with SSEStream(service.client, **_group("c")) as stream:
        await service.publish(TOPIC, "failing")
        for _ in range(MAX):
            frame = await stream.next(within=5)
            assert await service.nack("g", [frame.id or ""], "handler raised") == 1
        with pytest.raises(TimeoutError):
            await stream.next(within=0.5)
    [dead] = await _dead(service)
    assert dead["deliveries"] == MAX
    assert dead["reason"] == "handler raised"


async def test_ack_and_dead_lettering_clear_the_started_marks(service: Service) -> None:
    await service.publish(TOPIC, "done")
    token = await _life(service, "c", start=True)
    assert token is not None
    assert await service.ack("g", [token]) == 1
    await service.publish(TOPIC, "poison")
    for _ in range(MAX):
        assert await _life(service, "c", start=True) is not None
    assert await _life(service, "c") is None
    assert len(await _dead(service)) == 1
    if service.settings.event_backend == "redis":
        # Nothing left behind in the per-entry notes (nack reasons, started marks).
        import redis.asyncio as redis

        client = redis.Redis.from_url(service.settings.redis_url)
        try:
            notes = [k async for k in client.scan_iter(f"{service.settings.redis_prefix}:*:nr:*")]
        finally:
            await client.aclose()
        assert notes == []


async def test_marks_for_a_delivery_now_held_by_another_consumer_are_ignored(
    service: Service,
) -> None:
    await service.publish(TOPIC, "job")
    token = await _life(service, "one")
    assert token is not None
    # "one" stopped renewing; "two" takes the delivery over once it expired.
    async with SSEStream(service.client, **_group("two", visibility_timeout=0.3)) as two:
        assert (await two.next(within=5)).id == token
    # A late report from "one" is refused and marks nothing ...
    r = await _started(service, "one", [token])
    assert r.status_code == 409, r.text
    # ... so one started delivery by "two" leaves it below max_deliveries.
    assert await _life(service, "two", start=True) == token
    assert await _life(service, "two") == token
    assert await _dead(service) == []
