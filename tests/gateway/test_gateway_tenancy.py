"""Another tenant cannot move a gateway task: forged answers are refused on every path.

Tenant A starts a slow task (non-blocking). Tenant B, in its own tenant, publishes each
event type the gateway routes - the answer (``a2a.task.result``), ``task.progress``,
``task.timeout`` and ``notification.human_input`` - naming A's task. The gateway refuses
all four (one replica, where an executor waits; two replicas, where the other replica
keeps answers for a takeover), A's task stays as it was, and A's own answer then
completes it with A's artifact.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import httpx
import pytest
from a2a.types.a2a_pb2 import GetTaskRequest, TaskState
from google.protobuf.json_format import MessageToDict

from soorma.client import verified_tls
from soorma.event import Event
from soorma_common.events import ACTION_RESULTS, NOTIFICATION_EVENTS, SYSTEM_EVENTS
from testsupport.a2a import a2a_client, collect, final_task, send_request, user_message
from testsupport.gateway_platform import HEADERS_A, Platform

pytestmark = pytest.mark.asyncio

S = TaskState
FORGED = "FORGED-BY-B"


def forgeries(task_id: str) -> list[tuple[str, str, dict[str, Any], dict[str, Any]]]:
    """(topic, type, data, envelope fields) of each event type the gateway routes."""
    return [
        (
            ACTION_RESULTS,
            "a2a.task.result",
            {"success": True, "result": FORGED},
            {"correlation_id": task_id},
        ),
        (
            SYSTEM_EVENTS,
            "task.progress",
            {"task_id": task_id, "progress": 0.9, "message": FORGED},
            {"correlation_id": task_id},
        ),
        (
            SYSTEM_EVENTS,
            "task.timeout",
            {"task_id": task_id, "reason": FORGED},
            {"correlation_id": task_id},
        ),
        (
            NOTIFICATION_EVENTS,
            "notification.human_input",
            {
                "task_id": task_id,
                "question": f"{FORGED}: send me your password",
                "response_event": "steal.answer",
            },
            {"correlation_id": task_id},
        ),
    ]


async def refused(gateway: Any, at_least: int, within: float = 10.0) -> None:
    bridge = gateway.app.state.bridge
    async with asyncio.timeout(within):
        while bridge.refused < at_least:  # noqa: ASYNC110 (a counter of another task)
            await asyncio.sleep(0.02)


async def route_forged_answer(bridge: Any, task_id: str, *, tenant_id: str | None) -> None:
    """Hand the bridge an answer for ``task_id`` stamped with ``tenant_id``; it is refused."""
    before = bridge.refused
    await bridge.route(
        Event(
            type="a2a.task.result",
            topic=ACTION_RESULTS,
            source=tenant_id or "nobody",
            tenant_id=tenant_id,
            correlation_id=task_id,
            data={"success": True, "result": FORGED},
        )
    )
    assert bridge.refused == before + 1


async def start_slow_task(client: Any, doc: str) -> str:
    sent = final_task(
        await collect(
            client,
            send_request(
                user_message(data={"doc": doc, "mode": "slow"}, skill="review"),
                blocking=False,
            ),
        )
    )
    return sent.id


async def forge_all(platform: Platform, task_id: str) -> None:
    intruder = await platform.context("tenant-b")
    for topic, event_type, data, fields in forgeries(task_id):
        await intruder.bus.publish(topic, event_type, data, **fields)


def assert_untouched(task: Any) -> None:
    assert task.status.state in (S.TASK_STATE_SUBMITTED, S.TASK_STATE_WORKING)
    text = str(MessageToDict(task))
    assert FORGED not in text
    assert not task.artifacts


async def settle_with_own_answer(platform: Platform, client: Any, task_id: str, doc: str) -> None:
    platform.control.release(doc)
    async with asyncio.timeout(15):
        while True:
            task = await client.get_task(GetTaskRequest(id=task_id))
            if task.status.state == S.TASK_STATE_COMPLETED:
                break
            assert task.status.state in (S.TASK_STATE_SUBMITTED, S.TASK_STATE_WORKING)
            await asyncio.sleep(0.05)
    assert MessageToDict(task.artifacts[0].parts[0].data) == {"doc": doc, "verdict": "late"}
    assert FORGED not in str(MessageToDict(task))


async def test_forged_events_from_another_tenant_do_not_move_a_running_task(
    db_platform: Platform,
):
    platform = db_platform
    assert platform.gateway is not None
    async with a2a_client(platform.url, "JSONRPC", streaming=False, headers=HEADERS_A) as client:
        task_id = await start_slow_task(client, "t-one")
        await forge_all(platform, task_id)
        await refused(platform.gateway, 4)
        assert_untouched(await client.get_task(GetTaskRequest(id=task_id)))
        await settle_with_own_answer(platform, client, task_id, "t-one")
    async with httpx.AsyncClient(
        verify=verified_tls(),
    ) as http:
        scraped = (await http.get(f"{platform.url}/metrics")).text
    counted = re.search(r"^soorma_gateway_refused_events_total (\S+)$", scraped, re.M)
    assert counted and float(counted.group(1)) >= 4


async def test_forged_events_are_refused_by_every_replica(db_platform: Platform):
    platform = db_platform
    assert platform.gateway is not None
    other = await platform.start_gateway(gateway_replica_id="replica-b")
    try:
        async with a2a_client(
            platform.url, "JSONRPC", streaming=False, headers=HEADERS_A
        ) as client:
            task_id = await start_slow_task(client, "t-two")
            await forge_all(platform, task_id)
            # The running replica refuses all four; the other refuses those it would have
            # kept for a takeover (it does not keep progress at all).
            await refused(platform.gateway, 4)
            await refused(other, 3)
            assert other.app.state.bridge.seen_answer(task_id) is None
            assert_untouched(await client.get_task(GetTaskRequest(id=task_id)))
            await settle_with_own_answer(platform, client, task_id, "t-two")
    finally:
        await other.stop()


async def test_an_event_without_a_tenant_is_refused(db_platform: Platform):
    """The rule is equality: a tenant-less event never matches a task (no wildcard)."""
    platform = db_platform
    assert platform.gateway is not None
    bridge = platform.gateway.app.state.bridge
    async with a2a_client(platform.url, "JSONRPC", streaming=False, headers=HEADERS_A) as client:
        task_id = await start_slow_task(client, "t-three")
        await route_forged_answer(bridge, task_id, tenant_id=None)
        assert_untouched(await client.get_task(GetTaskRequest(id=task_id)))
        await settle_with_own_answer(platform, client, task_id, "t-three")


async def test_an_event_naming_a_task_as_it_is_announced_finds_its_route(
    db_platform: Platform, monkeypatch: pytest.MonkeyPatch
):
    """The task id reaches the client only once the route is stored and the executor
    waits: an event naming the task at once is judged as the task's (refused here), and
    the replica does not remember the id as not a gateway task."""
    platform = db_platform
    assert platform.gateway is not None
    bridge = platform.gateway.app.state.bridge
    insert = bridge.routes.insert

    async def slow_insert(route: Any) -> None:
        await asyncio.sleep(0.3)  # widen the window a busy database makes
        await insert(route)

    monkeypatch.setattr(bridge.routes, "insert", slow_insert)
    async with a2a_client(platform.url, "JSONRPC", streaming=False, headers=HEADERS_A) as client:
        task_id = await start_slow_task(client, "t-four")
        await route_forged_answer(bridge, task_id, tenant_id="tenant-b")
        assert task_id not in bridge._not_ours
        assert_untouched(await client.get_task(GetTaskRequest(id=task_id)))
        await settle_with_own_answer(platform, client, task_id, "t-four")
