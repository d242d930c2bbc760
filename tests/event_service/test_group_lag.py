"""``GET /v1/events/groups``: each consumer group's lag and pending counts, per topic,
scoped to the caller's tenant (memory and Redis backends)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest
from event_sse_client import SSEStream
from event_stack import Service

pytestmark = pytest.mark.asyncio

ACME = {"X-Tenant-ID": "acme-lag"}
GLOBEX = {"X-Tenant-ID": "globex-lag"}


async def groups(service: Service, headers: dict[str, str], **params: str) -> dict[str, Any]:
    r = await service.client.get("/v1/events/groups", params=params, headers=headers)
    assert r.status_code == 200, r.text
    return r.json()


def by_key(listing: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(g["group"], g["topic"]): g for g in listing["groups"]}


async def test_lag_counts_undelivered_and_pending_counts_unacked(service: Service) -> None:
    # "idle" opens and leaves: every event published afterwards waits for it.
    async with SSEStream(service.client, topics="action-requests", group="idle", headers=ACME):
        pass
    async with SSEStream(
        service.client,
        topics="action-requests,business-facts",
        group="workers",
        visibility_timeout=600,
        headers=ACME,
    ) as workers:
        for n in range(3):
            await service.publish("action-requests", "job", {"n": n}, tenant="acme-lag")
        first, _second, third = await workers.messages(3)
        assert await service.ack("workers", [first.id or ""], tenant="acme-lag") == 1

        found = by_key(await groups(service, ACME))

    assert set(found) == {
        ("idle", "action-requests"),
        ("workers", "action-requests"),
        ("workers", "business-facts"),
    }
    idle = found[("idle", "action-requests")]
    assert (idle["lag"], idle["pending"]) == (3, 0)
    assert (idle["last_delivered_id"], idle["last_delivered_at"]) == ("0-0", None)
    working = found[("workers", "action-requests")]
    assert (working["lag"], working["pending"]) == (0, 2)
    # The newest event the group took is the third one published.
    assert working["last_delivered_id"] == str(third.id).split("=", 1)[1]
    taken = datetime.fromisoformat(working["last_delivered_at"])
    assert abs((datetime.now(UTC) - taken).total_seconds()) < 3600
    quiet = found[("workers", "business-facts")]
    assert (quiet["lag"], quiet["pending"]) == (0, 0)


async def test_filters_by_group_and_topic(service: Service) -> None:
    async with SSEStream(
        service.client, topics="action-requests,task-events", group="alpha", headers=ACME
    ):
        pass
    async with SSEStream(service.client, topics="action-requests", group="beta", headers=ACME):
        pass
    await service.publish("task-events", "task.progress", tenant="acme-lag")

    alpha = await groups(service, ACME, group="alpha")
    assert [(g["group"], g["topic"]) for g in alpha["groups"]] == [
        ("alpha", "action-requests"),
        ("alpha", "task-events"),
    ]
    assert alpha["complete"] is True
    on_tasks = await groups(service, ACME, topics="task-events")
    assert [(g["group"], g["topic"], g["lag"]) for g in on_tasks["groups"]] == [
        ("alpha", "task-events", 1)
    ]
    # A topic nobody wrote is simply absent.
    assert (await groups(service, ACME, topics="never-written"))["groups"] == []


async def test_another_tenant_sees_none_of_the_groups_or_their_lag(service: Service) -> None:
    async with SSEStream(service.client, topics="action-requests", group="shared", headers=ACME):
        pass
    for n in range(4):
        await service.publish("action-requests", "job", {"n": n}, tenant="acme-lag")

    assert by_key(await groups(service, ACME))[("shared", "action-requests")]["lag"] == 4
    assert (await groups(service, GLOBEX))["groups"] == []
    # The same group name in the other tenant is its own group, with its own lag.
    async with SSEStream(service.client, topics="action-requests", group="shared", headers=GLOBEX):
        pass
    await service.publish("action-requests", "job", tenant="globex-lag")
    theirs = (await groups(service, GLOBEX, group="shared"))["groups"]
    assert [(g["topic"], g["lag"], g["pending"]) for g in theirs] == [("action-requests", 1, 0)]
    assert by_key(await groups(service, ACME))[("shared", "action-requests")]["lag"] == 4


async def test_dead_letters_leave_pending_and_their_topic_is_not_a_group(
    service: Service,
) -> None:
    async with SSEStream(
        service.client, topics="action-requests", group="fragile", max_deliveries=1, headers=ACME
    ) as fragile:
        await service.publish("action-requests", "poison", tenant="acme-lag")
        (frame,) = await fragile.messages(1)
        assert await service.nack("fragile", [frame.id or ""], "boom", tenant="acme-lag") == 1
        found: dict[tuple[str, str], dict[str, Any]] = {}
        async with asyncio.timeout(15):  # the stream's next claim buries the nacked delivery
            while True:
                found = by_key(await groups(service, ACME))
                if found[("fragile", "action-requests")]["pending"] == 0:
                    break
                await asyncio.sleep(0.05)
    dead = await service.client.get(
        "/v1/events/dlq", params={"topic": "action-requests"}, headers=ACME
    )
    assert len(dead.json()["events"]) == 1
    assert found[("fragile", "action-requests")]["pending"] == 0
    assert all(not topic.endswith(".dlq") for _, topic in found)


@pytest.mark.parametrize(
    ("params", "field"),
    [({"group": "no spaces"}, "group"), ({"topics": "Bad Topic"}, "topics")],
)
async def test_bad_names_are_refused(service: Service, params: dict[str, str], field: str) -> None:
    r = await service.client.get("/v1/events/groups", params=params, headers=ACME)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["details"]["field"] == field
