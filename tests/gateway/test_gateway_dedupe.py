"""A client's retry (same ``messageId`` in the same context) gets the first send's task
back and publishes nothing: on one replica, concurrently, and through another replica."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio
from a2a.types.a2a_pb2 import GetTaskRequest, TaskState

from event_service import create_app as create_event_app
from soorma.client import verified_tls
from soorma_common.events import ACTION_REQUESTS
from testsupport.a2a import BINDINGS, a2a_client, collect, final_task, send_request, user_message
from testsupport.databases import fresh_postgres
from testsupport.gateway_platform import HEADERS_A, Platform, open_platform
from testsupport.services import event_settings
from testsupport.settle import caught_up

# The tests share one platform per database (each uses its own context ids and
# documents), so they share the module's event loop.
pytestmark = pytest.mark.asyncio(loop_scope="module")

V1 = {**HEADERS_A, "A2A-Version": "1.0"}


@contextlib.asynccontextmanager
async def publishes(platform: Platform) -> AsyncIterator[list[Any]]:
    """The requests published on action-requests while the block runs: at its end a
    marker is published and waited for, so everything published before it is in."""
    context = await platform.context()
    seen: list[Any] = []
    async with context.bus.subscribe([ACTION_REQUESTS]) as tap:
        await tap.wait_ready()

        async def read() -> None:
            async for event in tap:
                seen.append(event)

        reader = asyncio.create_task(read())
        try:
            yield seen
            await caught_up(context, seen, ACTION_REQUESTS)
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader


@pytest_asyncio.fixture(
    scope="module",
    loop_scope="module",
    params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
)
async def db_platform(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Platform]:
    """The gateway on SQLite and (when configured) PostgreSQL, with the echo and review
    agents, shared by the module's tests."""
    tmp_path = tmp_path_factory.mktemp("dedupe")
    sqlite_url = f"sqlite+aiosqlite:///{tmp_path}/test.db"
    if request.param == "sqlite":
        async with open_platform(
            create_event_app(event_settings(block_seconds=0.5)),
            sqlite_url,
            sqlite_url.replace("test.db", "gw.db"),
            tmp_path,
        ) as platform:
            yield platform
        return
    async with fresh_postgres(request.getfixturevalue("postgres_server_url")) as database:
        async with open_platform(
            create_event_app(event_settings(block_seconds=0.5)), sqlite_url, database, tmp_path
        ) as platform:
            yield platform


def in_context(events: list[Any], context_id: str) -> list[Any]:
    return [e for e in events if e.session_id == context_id]


@pytest.mark.parametrize("binding", BINDINGS)
@pytest.mark.parametrize("streaming", [False, True])
async def test_a_retried_message_gets_the_same_task_and_publishes_once(
    db_platform: Platform, binding: str, streaming: bool
):
    context_id = f"ctx-{uuid.uuid4().hex[:8]}"
    async with (
        publishes(db_platform) as seen,
        a2a_client(db_platform.url, binding, streaming=streaming, headers=HEADERS_A) as client,
    ):
        message = user_message(
            data={"text": "once"}, skill="echo", context_id=context_id, message_id="m-retry"
        )
        first = final_task(await collect(client, send_request(message)))
        again = final_task(await collect(client, send_request(message)))
        other = user_message(
            data={"text": "twice"}, skill="echo", context_id=context_id, message_id="m-other"
        )
        second = final_task(await collect(client, send_request(other)))
        stored = await client.get_task(GetTaskRequest(id=first.id))
    assert stored.status.state == TaskState.TASK_STATE_COMPLETED
    assert again.id == first.id and again.status.state == TaskState.TASK_STATE_COMPLETED
    assert list(again.artifacts) == list(stored.artifacts)
    assert second.id != first.id
    assert len(in_context(seen, context_id)) == 2  # "m-retry" once, "m-other" once


async def test_concurrent_retries_and_other_contexts(db_platform: Platform):
    context_id = f"ctx-{uuid.uuid4().hex[:8]}"
    body = {
        "message": {
            "messageId": "m-race",
            "contextId": context_id,
            "role": "ROLE_USER",
            "parts": [{"data": {"text": "race"}}],
            "metadata": {"skill": "echo"},
        }
    }
    elsewhere = {"message": {**body["message"], "contextId": context_id + "-b"}}
    async with (
        publishes(db_platform) as seen,
        httpx.AsyncClient(verify=verified_tls(), base_url=db_platform.url) as http,
    ):
        answers = await asyncio.gather(
            *(http.post("/message:send", json=body, headers=V1) for _ in range(4))
        )
        other = await http.post("/message:send", json=elsewhere, headers=V1)
    ids = {a.json()["task"]["id"] for a in answers}
    assert len(ids) == 1, [a.text for a in answers]
    assert other.json()["task"]["id"] not in ids
    assert len(in_context(seen, context_id)) == 1


async def test_a_retry_through_another_replica_gets_the_same_task(db_platform: Platform):
    p = db_platform
    replica_b = await p.start_gateway(gateway_replica_id="replica-dedupe-b")
    context_id = f"ctx-{uuid.uuid4().hex[:8]}"
    doc = f"dedupe-{context_id}"
    try:
        async with publishes(p) as seen:
            message = user_message(
                data={"doc": doc, "mode": "slow"},
                skill="review",
                context_id=context_id,
                message_id="m-two-replicas",
            )
            async with a2a_client(p.url, "JSONRPC", streaming=False, headers=HEADERS_A) as on_a:
                started = final_task(await collect(on_a, send_request(message, blocking=False)))
            async with a2a_client(
                replica_b.url, "HTTP+JSON", streaming=False, headers=HEADERS_A
            ) as on_b:
                retried = final_task(await collect(on_b, send_request(message, blocking=False)))
                assert retried.id == started.id
                # A blocking retry waits for the task, as the first send would have.
                waiting = asyncio.create_task(collect(on_b, send_request(message)))
                await asyncio.sleep(0.3)
                assert not waiting.done()
                p.control.release(doc)
                finished = final_task(await asyncio.wait_for(waiting, 15))
            async with httpx.AsyncClient(verify=verified_tls(), base_url=replica_b.url) as http:
                raw = await http.post(
                    "/",
                    json={
                        "jsonrpc": "2.0",
                        "id": 1,
                        "method": "SendMessage",
                        "params": {
                            "message": {
                                "messageId": "m-two-replicas",
                                "contextId": context_id,
                                "role": "ROLE_USER",
                                "parts": [{"data": {"doc": doc, "mode": "slow"}}],
                                "metadata": {"skill": "review"},
                            }
                        },
                    },
                    headers=V1,
                )
        assert finished.id == started.id
        assert finished.status.state == TaskState.TASK_STATE_COMPLETED
        assert raw.json()["result"]["task"]["id"] == started.id
        assert len(in_context(seen, context_id)) == 1
    finally:
        await replica_b.stop()
