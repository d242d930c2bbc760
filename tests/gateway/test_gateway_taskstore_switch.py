"""``SOORMA_GATEWAY_FAST_TASK_STORE`` on and off: the same tasks, whichever store keeps them.

One gateway with the gateway's own task store, one (a replica on the same database) with
the switch off, where a2a-sdk's ``VersionedDatabaseTaskStore`` reads and writes every
task; blocking and non-blocking sends and reads must come out the same.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from a2a.types.a2a_pb2 import GetTaskRequest, Task, TaskState
from google.protobuf.json_format import MessageToDict

from gateway_a2a.taskstore import GatewayTaskStore
from testsupport.a2a import a2a_client, collect, final_task, send_request, user_message
from testsupport.gateway_platform import HEADERS_A, Platform
from testsupport.server import LiveServer

pytestmark = pytest.mark.asyncio(loop_scope="module")


def _task_store(server: LiveServer) -> GatewayTaskStore:
    handler = server.app.state.handler
    found = [v for v in vars(handler).values() if isinstance(v, GatewayTaskStore)]
    assert found
    return found[0]


def _shape(task: Task) -> tuple[Any, ...]:
    """What a client sees of a task, without its ids and times."""
    return (
        TaskState.Name(task.status.state),
        [m.message_id for m in task.history],
        [[MessageToDict(p) for p in a.parts] for a in task.artifacts],
    )


async def _completed(client: Any, task_id: str) -> Task:
    async with asyncio.timeout(10):
        while True:
            task = await client.get_task(GetTaskRequest(id=task_id))
            if task.status.state == TaskState.TASK_STATE_COMPLETED:
                return task
            await asyncio.sleep(0.05)


async def test_the_same_tasks_with_the_fast_store_off(platform: Platform) -> None:
    plain = await platform.start_gateway(
        gateway_fast_task_store=False, gateway_replica_id="replica-plain"
    )
    try:
        store = _task_store(plain)
        assert store.accelerated is False
        assert _task_store(platform.gateway).accelerated is True
        sdk_writes: list[str] = []
        sdk_save = store.sdk.save

        async def counted(task: Task, **kwargs: Any) -> Any:
            sdk_writes.append(task.id)
            return await sdk_save(task, **kwargs)

        store.sdk.save = counted  # type: ignore[method-assign]
        seen = {}
        for name, url in (("fast", platform.url), ("plain", plain.url)):
            async with a2a_client(url, streaming=False, headers=HEADERS_A) as client:
                blocking = final_task(
                    await collect(
                        client,
                        send_request(
                            user_message(data={"text": "x"}, skill="echo", context_id=f"{name}-1")
                        ),
                    )
                )
                queued = final_task(
                    await collect(
                        client,
                        send_request(
                            user_message(data={"text": "y"}, skill="echo", context_id=f"{name}-2"),
                            blocking=False,
                        ),
                    )
                )
                read_back = await client.get_task(GetTaskRequest(id=blocking.id))
                seen[name] = [
                    _shape(blocking),
                    _shape(read_back),
                    _shape(await _completed(client, queued.id)),
                ]
        assert seen["fast"] == seen["plain"]
        assert seen["plain"][0][0] == "TASK_STATE_COMPLETED"
        assert blocking.id in sdk_writes and queued.id in sdk_writes
    finally:
        await plain.stop()
