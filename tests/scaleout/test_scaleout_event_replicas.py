"""The event-service contract tests against two replicas sharing one Redis.

The tests below are the ones of tests/event_service, imported rather than copied; here
their ``service`` fixture (see conftest.py) is two event-service apps behind a
round-robin balancer, so each test publishes on one replica and streams, acks, nacks,
or replays through the other (lease renewal through the other replica runs in
test_scaleout_redis_cluster, also behind two replicas). Plus the cross-replica cases spelled out.
"""

from __future__ import annotations

import httpx
import pytest
from balancer import replica_urls
from event_sse_client import SSEStream
from event_stack import Service
from test_event_broadcast import (
    test_resume_after_dropped_connection_delivers_exactly_the_missed_events,
    test_resume_of_a_multi_topic_stream_delivers_every_missed_event_per_topic,
    test_stream_starts_now_and_delivers_in_publish_order,
)
from test_event_groups import (
    test_a_new_group_starts_at_now_unless_from_earliest,
    test_an_event_that_always_fails_lands_in_the_dlq_and_replay_reinjects_it,
    test_an_event_unacked_by_a_killed_consumer_is_redelivered_to_another,
    test_another_tenant_cannot_ack_list_or_replay_dead_letters,
    test_idle_consumers_take_turns_when_events_arrive_one_at_a_time,
    test_nack_makes_the_event_available_for_redelivery_at_once,
    test_two_consumers_split_1000_events_with_no_loss_and_no_duplicate,
)
from test_event_publish import test_batch_returns_ids_in_order_and_events_arrive_in_that_order
from test_event_recovery import test_a_consumer_id_reconnecting_gets_its_pending_deliveries_at_once
from test_event_tap import test_tap_group_stream_acks_and_nacks_with_tenant_star

from soorma.client import verified_tls

__all__ = [
    "test_a_consumer_id_reconnecting_gets_its_pending_deliveries_at_once",
    "test_a_new_group_starts_at_now_unless_from_earliest",
    "test_an_event_that_always_fails_lands_in_the_dlq_and_replay_reinjects_it",
    "test_an_event_unacked_by_a_killed_consumer_is_redelivered_to_another",
    "test_another_tenant_cannot_ack_list_or_replay_dead_letters",
    "test_batch_returns_ids_in_order_and_events_arrive_in_that_order",
    "test_idle_consumers_take_turns_when_events_arrive_one_at_a_time",
    "test_nack_makes_the_event_available_for_redelivery_at_once",
    "test_resume_after_dropped_connection_delivers_exactly_the_missed_events",
    "test_resume_of_a_multi_topic_stream_delivers_every_missed_event_per_topic",
    "test_stream_starts_now_and_delivers_in_publish_order",
    "test_tap_group_stream_acks_and_nacks_with_tenant_star",
    "test_two_consumers_split_1000_events_with_no_loss_and_no_duplicate",
]

# The imported tests carry their modules' marks only when those are on the function.
pytestmark = pytest.mark.asyncio


async def test_publish_on_one_replica_consume_and_ack_on_the_other(service: Service) -> None:
    """Explicit routing: stream on replica A, publish and ack on B; A sees the ack."""
    url_a, url_b = replica_urls(service.client)
    async with (
        httpx.AsyncClient(verify=verified_tls(), base_url=url_a, timeout=15) as a,
        httpx.AsyncClient(verify=verified_tls(), base_url=url_b, timeout=15) as b,
    ):
        group = {"topics": "task-events", "group": "split", "consumer": "on-a"}
        async with SSEStream(a, **group) as stream:
            r = await b.post(
                "/v1/events/publish",
                json={"event": {"topic": "task-events", "type": "job", "data": {"n": 1}}},
            )
            assert r.status_code == 200, r.text
            frame = await stream.next()
            assert frame.json()["data"] == {"n": 1}
        # The ack goes to the other replica: the group's state is shared.
        r = await b.post("/v1/events/ack", json={"group": "split", "ids": [frame.id]})
        assert r.json()["count"] == 1
        r = await a.post("/v1/events/ack", json={"group": "split", "ids": [frame.id]})
        assert r.json()["count"] == 0
