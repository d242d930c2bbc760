"""The event service on a Redis Cluster of three masters, two replicas in front.

One cluster for the module (started by :mod:`redis_cluster`); each test gets its own
key prefix on it. The contract tests of tests/event_service run here unchanged, through
the two-replica balancer of conftest.py, exercising every multi-key path the backend
has: batch appends in one MULTI (one tenant's topics), the tap copy (another shard),
group reads over several topics, dead-lettering and replay (MULTI over the topic, its
DLQ and its nack reasons), lease renewal and consumer clean-up (Lua scripts).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from event_sse_client import SSEStream
from event_stack import Service, make_settings
from redis.asyncio import RedisCluster
from redis_cluster import redis_cluster
from test_event_broadcast import (
    test_resume_of_a_multi_topic_stream_delivers_every_missed_event_per_topic,
)
from test_event_groups import (
    test_an_event_that_always_fails_lands_in_the_dlq_and_replay_reinjects_it,
    test_an_event_unacked_by_a_killed_consumer_is_redelivered_to_another,
    test_another_tenant_cannot_ack_list_or_replay_dead_letters,
    test_visibility_expiry_dead_letters_after_max_deliveries,
)
from test_event_publish import test_batch_returns_ids_in_order_and_events_arrive_in_that_order
from test_event_recovery import (
    test_a_consumer_id_reconnecting_gets_its_pending_deliveries_at_once,
    test_extend_keeps_a_delivery_from_being_redelivered_while_it_is_worked_on,
)
from test_event_started_deliveries import (
    test_a_delivery_whose_handler_ran_in_max_deliveries_deliveries_is_dead_lettered,
    test_nacks_count_as_started_deliveries,
)
from test_event_tap import test_tap_group_stream_acks_and_nacks_with_tenant_star
from test_scaleout_event_replicas import test_publish_on_one_replica_consume_and_ack_on_the_other

from event_service.settings import Settings

__all__ = [
    "test_a_consumer_id_reconnecting_gets_its_pending_deliveries_at_once",
    "test_a_delivery_whose_handler_ran_in_max_deliveries_deliveries_is_dead_lettered",
    "test_an_event_that_always_fails_lands_in_the_dlq_and_replay_reinjects_it",
    "test_an_event_unacked_by_a_killed_consumer_is_redelivered_to_another",
    "test_another_tenant_cannot_ack_list_or_replay_dead_letters",
    "test_batch_returns_ids_in_order_and_events_arrive_in_that_order",
    "test_extend_keeps_a_delivery_from_being_redelivered_while_it_is_worked_on",
    "test_nacks_count_as_started_deliveries",
    "test_publish_on_one_replica_consume_and_ack_on_the_other",
    "test_resume_of_a_multi_topic_stream_delivers_every_missed_event_per_topic",
    "test_tap_group_stream_acks_and_nacks_with_tenant_star",
    "test_visibility_expiry_dead_letters_after_max_deliveries",
]

pytestmark = pytest.mark.asyncio


@pytest.fixture(scope="module")
def cluster_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with redis_cluster(Path(tmp_path_factory.mktemp("redis-cluster"))) as url:
        yield url


@pytest.fixture
def settings(request: pytest.FixtureRequest, cluster_url: str) -> Settings:
    """Both replicas on the cluster, under a prefix of this test's own."""
    return make_settings(
        "memory",
        request,
        event_backend="redis",
        redis_cluster=True,
        redis_url=cluster_url,
        redis_prefix=f"scale-{uuid.uuid4().hex[:8]}",
    )


async def test_tenants_spread_over_the_shards_and_each_tenant_stays_on_one(
    service: Service, cluster_url: str
) -> None:
    """The hash tag at work: many tenants use all three masters; one tenant's topics
    (and its DLQ) share a slot, which MULTI and the Lua scripts rely on."""
    tenants = [f"tenant-{i}" for i in range(12)]
    for tenant in tenants:
        await service.publish_batch(
            [{"topic": t, "type": "x", "data": {}} for t in ("task-events", "plan-events")],
            tenant=tenant,
        )
    prefix = service.settings.redis_prefix
    r = RedisCluster.from_url(cluster_url)
    try:
        owners: set[str] = set()
        for tenant in tenants:
            keys = [f"{prefix}:{{{tenant}}}:t:{t}" for t in ("task-events", "plan-events")]
            slots = {r.keyslot(k) for k in keys}
            assert len(slots) == 1, (tenant, slots)
            assert [await r.xlen(k) for k in keys] == [1, 1]
            node = r.get_node_from_key(keys[0])
            owners.add(f"{node.host}:{node.port}")
        assert len(owners) == 3, owners
    finally:
        await r.aclose()


async def test_a_closed_group_stream_drops_its_idle_consumer_on_the_cluster(
    service: Service, cluster_url: str
) -> None:
    """The clean-up Lua script runs on the tenant's shard (XGROUP DELCONSUMER)."""
    group = {"topics": "action-requests", "group": "tidy"}
    async with SSEStream(service.client, consumer="keeps", **group) as keeps:
        await service.publish("action-requests", "job")
        await keeps.next()  # "keeps" now owns an unacked delivery
        async with SSEStream(service.client, consumer="leaves", **group):
            pass
    key = f"{service.settings.redis_prefix}:{{default}}:t:action-requests"
    r = RedisCluster.from_url(cluster_url)
    try:
        for _ in range(100):
            names = {c["name"] for c in await r.xinfo_consumers(key, "tidy")}
            if "leaves" not in names:
                break
            await asyncio.sleep(0.05)
        assert names == {b"keeps"} or names == {"keeps"}, names
    finally:
        await r.aclose()
