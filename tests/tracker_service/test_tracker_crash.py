"""A tracker SIGKILLed mid-stream and restarted loses nothing and counts nothing twice;
two replicas project one stream without duplicates."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest
from tracker_stack import Stack, TrackerProcess, start_stack

from testsupport.server import free_port

pytestmark = pytest.mark.asyncio
PLANS, EVENTS_PER_PLAN = 40, 10


def plan_events(plan_id: str) -> list[dict[str, Any]]:
    out = [
        {
            "topic": "system-events",
            "type": "plan.started",
            "plan_id": plan_id,
            "correlation_id": plan_id,
            "data": {"plan_id": plan_id},
        }
    ]
    for n in range(EVENTS_PER_PLAN - 2):
        out.append(
            {
                "topic": "action-requests",
                "type": "step.do",
                "plan_id": plan_id,
                "correlation_id": f"{plan_id}-{n}",
                "response_event": "step.done",
            }
        )
    out.append(
        {
            "topic": "system-events",
            "type": "plan.completed",
            "plan_id": plan_id,
            "correlation_id": plan_id,
            "data": {"plan_id": plan_id},
        }
    )
    return out


async def publish_all(stack: Stack, plan_ids: list[str]) -> None:
    for plan_id in plan_ids:
        await stack.publish_batch(plan_events(plan_id))
        await asyncio.sleep(0.02)


async def all_projected(
    stack: Stack, base: str, plan_ids: list[str], within: float = 60
) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        r = await stack.client.get(
            f"{base}/v1/tracker/plans", params={"limit": 500}, headers={"X-Tenant-ID": "acme"}
        )
        plans = {p["plan_id"]: p for p in r.json()["plans"]} if r.status_code == 200 else {}
        if len(plans) == len(plan_ids) and all(
            p["status"] == "completed" and p["event_count"] >= EVENTS_PER_PLAN
            for p in plans.values()
        ):
            return plans
        return None

    return await stack.until(probe, within=within)


async def metrics(stack: Stack, base: str) -> dict[str, Any]:
    r = await stack.client.get(f"{base}/v1/tracker/metrics", headers={"X-Tenant-ID": "acme"})
    assert r.status_code == 200, r.text
    return dict(r.json())


@pytest.mark.postgres
@pytest.mark.redis
async def test_sigkilled_tracker_restarts_without_loss_or_double_count(
    postgres_url: str, redis_url: str, redis_prefix: str, tmp_path: object
) -> None:
    # As deployed (PostgreSQL + Redis Streams); two process starts make it the slowest
    # test here, so it runs on this pair only (the replica test covers SQLite).
    backends = {
        "db": postgres_url,
        "events": "redis",
        "redis_url": redis_url,
        "redis_prefix": redis_prefix,
    }
    async with start_stack(backends, tmp_path, trackers=0) as stack:
        port = free_port()
        tracker = TrackerProcess(stack, port, SOORMA_TRACKER_BATCH="25")
        await tracker.start()
        try:
            plan_ids = [str(uuid.uuid4()) for _ in range(PLANS)]
            publisher = asyncio.create_task(publish_all(stack, plan_ids))

            # Kill once some, not all, plans are in.
            async def some() -> bool:
                r = await stack.client.get(
                    f"{tracker.url}/v1/tracker/plans", headers={"X-Tenant-ID": "acme"}
                )
                return len(r.json()["plans"]) >= 5

            await stack.until(some)
            await tracker.kill()
            await asyncio.sleep(0.5)
            restarted = TrackerProcess(stack, port, SOORMA_TRACKER_BATCH="25")
            await restarted.start()
            tracker = restarted
            await publisher
            plans = await all_projected(stack, tracker.url, plan_ids)
            assert {p["event_count"] for p in plans.values()} == {EVENTS_PER_PLAN}
            found = await metrics(stack, tracker.url)
            assert found["projector"]["events"] == PLANS * EVENTS_PER_PLAN
            assert found["tasks"]["total"] == PLANS * (EVENTS_PER_PLAN - 2)
        finally:
            await tracker.stop()


async def test_two_replicas_share_the_stream_without_duplicates(
    backends: dict[str, str], tmp_path: object
) -> None:
    async with start_stack(backends, tmp_path, trackers=2, tracker_batch=20) as stack:
        plan_ids = [str(uuid.uuid4()) for _ in range(PLANS)]
        await publish_all(stack, plan_ids)
        plans = await all_projected(stack, stack.trackers[1].url, plan_ids)
        assert {p["event_count"] for p in plans.values()} == {EVENTS_PER_PLAN}
        found = await metrics(stack, stack.trackers[0].url)
        assert found["projector"]["events"] == PLANS * EVENTS_PER_PLAN
        timeline = (await stack.ok(f"/plans/{plan_ids[0]}/timeline"))["entries"]
        assert len(timeline) == EVENTS_PER_PLAN


async def test_a_restarted_tracker_resumes_what_it_held_at_once(
    backends: dict[str, str], tmp_path: Any
) -> None:
    """A replica keeps its consumer id across a SIGKILL: its held events come back at once.

    The killed tracker had read the events and was waiting to fill its batch (held, not
    acked). With a per-process id they came back only after the visibility timeout (60 s
    here); with the stable per-replica id the restart gets them on connecting.
    """
    async with start_stack(backends, tmp_path, trackers=0) as stack:
        port = free_port()
        env = {
            "SOORMA_STATE_DIR": str(tmp_path),
            "SOORMA_TRACKER_BATCH": "1000",
            "SOORMA_TRACKER_BATCH_WAIT_SECONDS": "30",
            "SOORMA_TRACKER_VISIBILITY_TIMEOUT": "60",
        }
        tracker = TrackerProcess(stack, port, **env)
        await tracker.start()
        plan_ids = [str(uuid.uuid4()) for _ in range(3)]
        await publish_all(stack, plan_ids)
        await asyncio.sleep(1.0)  # read at once over SSE; held while the batch fills
        await tracker.kill()
        tracker = TrackerProcess(stack, port, **{**env, "SOORMA_TRACKER_BATCH_WAIT_SECONDS": "0"})
        await tracker.start()
        try:
            started = time.monotonic()
            plans = await all_projected(stack, tracker.url, plan_ids, within=20)
            print(f"restarted tracker caught up in {time.monotonic() - started:.2f} s")
            assert {p["event_count"] for p in plans.values()} == {EVENTS_PER_PLAN}
        finally:
            await tracker.stop()
