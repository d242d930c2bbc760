"""``GET /metrics`` of the event service: counters move with the work, labels stay bounded."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
import pytest_asyncio
from event_sse_client import SSEStream
from event_stack import Service
from prometheus_client.parser import text_string_to_metric_families

from event_service import create_app
from event_service.settings import Settings
from soorma.client import verified_tls
from soorma_common.events import STANDARD_TOPICS
from testsupport.server import serve

pytestmark = pytest.mark.asyncio

TENANT = "tenant-metrics-7"
HEADERS = {"X-Tenant-ID": TENANT}

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


async def scrape(client: httpx.AsyncClient) -> Samples:
    r = await client.get("/metrics")
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(r.text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest_asyncio.fixture
async def live(settings: Settings) -> AsyncIterator[Service]:
    # Gauges refreshed on every scrape (no cache), so the test sees each change.
    fresh = settings.model_copy(update={"metrics_cache_seconds": 0})
    async with serve(create_app(fresh)) as server:
        async with httpx.AsyncClient(
            verify=verified_tls(), base_url=server.url, timeout=15
        ) as client:
            yield Service(server, client, fresh)


async def test_bus_work_moves_the_counters_and_gauges(live: Service) -> None:
    client = live.client
    before = await scrape(client)
    assert value(before, "soorma_events_published_total", topic="action-requests") == 0

    # A group that never reads: everything published after it opened is its lag.
    async with SSEStream(client, topics="action-requests", group="idle", headers=HEADERS):
        pass
    async with (
        SSEStream(
            client,
            topics="action-requests",
            group="workers",
            max_deliveries=2,
            visibility_timeout=600,
            headers=HEADERS,
        ) as group,
        SSEStream(client, topics="business-facts", headers=HEADERS) as broadcast,
    ):
        opened = await scrape(client)
        assert value(opened, "soorma_event_open_streams", mode="group") == 1
        assert value(opened, "soorma_event_open_streams", mode="broadcast") == 1

        for n in range(3):
            await live.publish("action-requests", "job", {"n": n}, tenant=TENANT)
        await live.publish_batch(
            [
                {"topic": "business-facts", "type": "fact"},
                {"topic": "business-facts", "type": "fact"},
                {"topic": "my-own-topic-42", "type": "custom"},
            ],
            tenant=TENANT,
        )
        first, second, third = await group.messages(3)
        await broadcast.messages(2)
        assert await live.ack("workers", [first.id or ""], tenant=TENANT) == 1
        assert await live.nack("workers", [second.id or ""], "boom", tenant=TENANT) == 1
        again = await group.next()  # redelivered at once after the nack
        assert again.id == second.id
        # Its second delivery was the last allowed one: this nack dead-letters it.
        assert await live.nack("workers", [again.id or ""], "boom again", tenant=TENANT) == 1
        samples = await _until(client, "soorma_event_dlq_size", topic="action-requests")

        assert value(samples, "soorma_events_published_total", topic="action-requests") == 3
        assert value(samples, "soorma_events_published_total", topic="business-facts") == 2
        assert value(samples, "soorma_events_published_total", topic="other") == 1
        assert value(samples, "soorma_event_deliveries_total", mode="group") == 4
        assert value(samples, "soorma_event_deliveries_total", mode="broadcast") == 2
        assert value(samples, "soorma_event_redeliveries_total") == 1
        assert value(samples, "soorma_event_acks_total") == 1
        assert value(samples, "soorma_event_nacks_total") == 2
        assert value(samples, "soorma_event_dlq_size", topic="action-requests") == 1
        # "workers" still holds the third delivery; "idle" never read any of the three.
        assert value(samples, "soorma_event_group_pending", group="workers") == 1
        assert value(samples, "soorma_event_group_lag", group="workers") == 0
        assert value(samples, "soorma_event_group_lag", group="idle") == 3
        assert value(samples, "soorma_event_stats_complete") == 1
        assert third.id
        publishes = value(
            samples,
            "soorma_http_request_duration_seconds_count",
            method="POST",
            route="/v1/events/publish",
            status="200",
        )
        assert publishes == 3
        acks = value(
            samples,
            "soorma_http_request_duration_seconds_count",
            method="POST",
            route="/v1/events/ack",
            status="200",
        )
        assert acks == 1

    closed = await _until(client, "soorma_event_open_streams", expect=0.0, mode="group")
    assert value(closed, "soorma_event_open_streams", mode="broadcast") == 0

    # Bounded labels: no tenant, id, raw path or custom topic name in any series.
    labels = {v for (_, pairs) in closed for _, v in pairs}
    assert TENANT not in labels
    assert not any(first.id and first.id.split("=")[1] in v for v in labels)
    assert "my-own-topic-42" not in labels
    topics = {v for (_, pairs) in closed for k, v in pairs if k == "topic"}
    assert topics <= STANDARD_TOPICS | {"other"}


async def test_request_routes_are_templates_and_unmatched_paths_share_one_series(
    live: Service,
) -> None:
    for n in range(5):
        r = await live.client.get(f"/v1/events/no-such-route-{n}")
        assert r.status_code == 404
        r = await live.client.get("/v1/events/dlq", params={"topic": f"t{n}"})
        assert r.status_code == 200
    samples = await scrape(live.client)
    count = "soorma_http_request_duration_seconds_count"
    assert value(samples, count, method="GET", route="unmatched", status="404") == 5
    assert value(samples, count, method="GET", route="/v1/events/dlq", status="200") == 5
    routes = {v for (name, pairs) in samples if name == count for k, v in pairs if k == "route"}
    assert not any("no-such-route" in route for route in routes)


async def _until(
    client: httpx.AsyncClient, name: str, expect: float = 1.0, **labels: str
) -> Samples:
    """Scrape until ``name{labels}`` equals ``expect`` (async work settles), or fail."""
    async with asyncio.timeout(10):
        while True:
            samples = await scrape(client)
            if value(samples, name, **labels) == expect:
                return samples
            await asyncio.sleep(0.05)
