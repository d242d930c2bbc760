"""``SOORMA_REDIS_DIRECT`` on and off: the Redis log stores and reads back the same events.

The direct path (hand-packed RESP on raw connections, single appends group-committed)
and the plain one (redis-py's commands) run the same appends, single and batched,
concurrent and with tap copies, each under its own key prefix; what a range read and a
live read return must agree, entry for entry (stream ids compared by order, not value).
"""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio import Redis

from event_service.backends.base import NewEvent
from event_service.backends.redis import RedisEventLog
from event_service.backends.redis_appends import AppendCoalescer
from event_service.settings import TAP_TENANT

pytestmark = [pytest.mark.redis, pytest.mark.asyncio]

PAYLOADS = [b"{}", b'{"x":"\\r\\n$5\\r\\nMULTI"}', '{"s":"été 雪"}'.encode(), b"x" * 9000]


async def _run(log: RedisEventLog) -> tuple[list[tuple[str, str, bytes]], ...]:
    events = [NewEvent(topic=f"t{i % 2}", type=f"e.{i}", payload=p) for i, p in enumerate(PAYLOADS)]
    await log.append("tenant", events[:1])
    await asyncio.gather(*(log.append("tenant", [e]) for e in events))
    await log.append("tenant", [*events, NewEvent("tapped", "e.tap", b"{}")])
    await asyncio.gather(*(log.append("tenant", [NewEvent("tapped", "e.t", p)]) for p in PAYLOADS))
    reads = []
    for tenant, topic in (
        ("tenant", "t0"),
        ("tenant", "t1"),
        ("tenant", "tapped"),
        (TAP_TENANT, "tapped"),
    ):
        stored = await log.read_range(tenant, topic, after="0-0", upto="+", count=100)
        live = await log.read_live(tenant, topic, after="0-0", count=100, block=0.01)
        assert [e.id for e in live] == [e.id for e in stored]
        reads.append(sorted((e.topic, e.type, e.payload) for e in stored))
    return tuple(reads)


async def test_direct_and_plain_redis_paths_store_the_same(
    redis_url: str, redis_prefix: str
) -> None:
    redis = Redis.from_url(redis_url)
    outcomes = []
    try:
        for direct in (True, False):
            log = RedisEventLog(
                redis=redis,
                prefix=f"{redis_prefix}-{direct}",
                max_length=1000,
                tap_topics=["tapped"],
                direct=direct,
            )
            assert isinstance(log._appends, AppendCoalescer) is direct
            try:
                outcomes.append(await _run(log))
            finally:
                await log.close()
    finally:
        await redis.aclose()
    assert outcomes[0] == outcomes[1]
    assert all(outcomes[0])
