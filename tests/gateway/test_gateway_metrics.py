"""The gateway's ``GET /metrics``: open tasks by state, requests by route; no API key needed
(the endpoint has its own access rule) and no tenant in any label."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from a2a.types.a2a_pb2 import GetTaskRequest, TaskState
from prometheus_client.parser import text_string_to_metric_families

from soorma.client import verified_tls
from testsupport.a2a import a2a_client, collect, send_request, user_message
from testsupport.gateway_platform import HEADERS_A, Platform

pytestmark = pytest.mark.asyncio(loop_scope="module")

OPEN = "soorma_gateway_open_tasks"


async def open_tasks(client: httpx.AsyncClient, state: str) -> float:
    r = await client.get("/metrics")  # no API key: /metrics is answered before auth
    assert r.status_code == 200, r.text
    assert "tenant-a" not in r.text
    for family in text_string_to_metric_families(r.text):
        for sample in family.samples:
            if sample.name == OPEN and sample.labels == {"state": state}:
                return sample.value
    raise AssertionError(f"no {OPEN} sample for {state}")


async def until(client: httpx.AsyncClient, state: str, expected: float) -> None:
    async with asyncio.timeout(10):
        while await open_tasks(client, state) != expected:  # noqa: ASYNC110 (polling HTTP)
            await asyncio.sleep(0.05)


async def test_open_tasks_by_state_follow_a_task(platform: Platform) -> None:
    # A second replica on the same database that refreshes its gauges on every scrape.
    scraper = await platform.start_gateway(
        gateway_replica_id="replica-metrics", metrics_cache_seconds=0
    )
    try:
        async with (
            httpx.AsyncClient(verify=verified_tls(), base_url=scraper.url, timeout=15) as metrics,
            a2a_client(platform.url, "JSONRPC", headers=HEADERS_A) as client,
        ):
            assert await open_tasks(metrics, "input_required") == 0
            events = await collect(
                client,
                send_request(user_message(data={"doc": "m1", "mode": "hitl"}, skill="review")),
            )
            task_id = events[-1].status_update.task_id
            await until(metrics, "input_required", 1)
            answer = user_message(data={"approved": True}, task_id=task_id, message_id="m-ok")
            await collect(client, send_request(answer))
            async with asyncio.timeout(10):
                while True:
                    task = await client.get_task(GetTaskRequest(id=task_id))
                    if task.status.state == TaskState.TASK_STATE_COMPLETED:
                        break
                    await asyncio.sleep(0.05)
            await until(metrics, "input_required", 0)
        async with httpx.AsyncClient(
            verify=verified_tls(), base_url=platform.url, timeout=15
        ) as plain:
            text = (await plain.get("/metrics")).text
        assert 'soorma_http_request_duration_seconds_count{method="POST",route="/"' in text
    finally:
        await scraper.stop()
