"""Tasks survive a gateway restart, and two replicas share them (SQLite and PostgreSQL).

- Restart: the answer to a task arrives while its gateway is down; the restarted replica
  (same replica id, same database) picks it up from its durable consumer group and the
  task completes.
- Two replicas: a result consumed by replica A reaches a stream opened on replica B
  (shared task store and event table); an input-required task answered through B is
  finished by B.
"""

from __future__ import annotations

import asyncio

import pytest
from a2a.types.a2a_pb2 import GetTaskRequest, ListTasksRequest, SubscribeToTaskRequest, TaskState
from google.protobuf.json_format import MessageToDict

from testsupport.a2a import a2a_client, collect, final_task, send_request, user_message
from testsupport.gateway_platform import HEADERS_A, Platform

pytestmark = pytest.mark.asyncio

S = TaskState


async def wait_state(client, task_id: str, state: int, within: float = 10.0):
    async with asyncio.timeout(within):
        while True:
            task = await client.get_task(GetTaskRequest(id=task_id))
            if task.status.state == state:
                return task
            await asyncio.sleep(0.05)


async def test_answer_arriving_while_the_gateway_is_down(db_platform: Platform):
    await answer_while_down(db_platform)


@pytest.mark.postgres
@pytest.mark.redis
async def test_answer_arriving_while_down_on_redis_and_postgres(redis_platform: Platform):
    """The same with the event service on Redis Streams and the gateway on PostgreSQL."""
    await answer_while_down(redis_platform)


async def answer_while_down(p: Platform) -> None:
    async with a2a_client(p.url, streaming=False, headers=HEADERS_A) as client:
        done = final_task(
            await collect(client, send_request(user_message(data={"text": "before"}, skill="echo")))
        )
        slow = final_task(
            await collect(
                client,
                send_request(
                    user_message(data={"doc": "r", "mode": "slow"}, skill="review"), blocking=False
                ),
            )
        )
        await wait_state(client, slow.id, S.TASK_STATE_WORKING)
    assert p.gateway is not None
    await p.gateway.stop()
    p.control.release("r")  # the worker answers while no gateway runs
    await asyncio.sleep(0.5)
    p.gateway = await p.start_gateway()
    async with a2a_client(p.url, streaming=False, headers=HEADERS_A) as client:
        finished = await wait_state(client, slow.id, S.TASK_STATE_COMPLETED)
        before = await client.get_task(GetTaskRequest(id=done.id))
    assert MessageToDict(finished.artifacts[0].parts[0].data)["verdict"] == "late"
    assert before.status.state == S.TASK_STATE_COMPLETED


async def test_two_replicas_share_streams_and_input(db_platform: Platform):
    p = db_platform
    replica_b = await p.start_gateway(gateway_replica_id="replica-b")
    try:
        async with (
            a2a_client(p.url, streaming=False, headers=HEADERS_A) as on_a,
            a2a_client(replica_b.url, headers=HEADERS_A) as on_b,
        ):
            slow = final_task(
                await collect(
                    on_a,
                    send_request(
                        user_message(data={"doc": "r2", "mode": "slow"}, skill="review"),
                        blocking=False,
                    ),
                )
            )
            await wait_state(on_a, slow.id, S.TASK_STATE_WORKING)
            stream = on_b.subscribe(SubscribeToTaskRequest(id=slow.id))
            snapshot = await anext(stream)
            assert snapshot.task.id == slow.id
            p.control.release("r2")
            rest = [e async for e in stream]
            states = [e.status_update.status.state for e in rest if e.HasField("status_update")]
            assert states[-1] == S.TASK_STATE_COMPLETED

            asked = await collect(
                on_a, send_request(user_message(data={"doc": "h", "mode": "hitl"}, skill="review"))
            )
            task_id = asked[-1].status_update.task_id or final_task(asked).id
            await wait_state(on_b, task_id, S.TASK_STATE_INPUT_REQUIRED)
            await collect(
                on_b,
                send_request(
                    user_message(
                        data={"approved": False}, text="no", task_id=task_id, message_id="m-2"
                    )
                ),
            )
            final = await wait_state(on_a, task_id, S.TASK_STATE_COMPLETED)
        assert MessageToDict(final.artifacts[0].parts[0].data)["verdict"] == "declined"
    finally:
        await replica_b.stop()


async def test_a_blocking_send_is_written_once_settled_or_after_the_delay(db_platform: Platform):
    """A blocking send's task is kept in memory until it settles (then written once) or
    until ``gateway_write_delay_seconds`` passed: another replica sees it then."""
    p = db_platform
    assert p.gateway is not None
    await p.gateway.stop()
    p.gateway = await p.start_gateway(gateway_write_delay_seconds=0.3)
    replica_b = await p.start_gateway(gateway_replica_id="replica-b")
    try:
        async with (
            a2a_client(p.url, streaming=False, headers=HEADERS_A) as on_a,
            a2a_client(replica_b.url, streaming=False, headers=HEADERS_A) as on_b,
        ):
            quick = final_task(
                await collect(
                    on_a,
                    send_request(
                        user_message(data={"text": "once"}, skill="echo", context_id="w-quick")
                    ),
                )
            )
            seen = await on_b.get_task(GetTaskRequest(id=quick.id))
            assert seen.status.state == S.TASK_STATE_COMPLETED
            assert [m.message_id for m in seen.history] == ["m-1"]
            assert MessageToDict(seen.artifacts[0].parts[0].data)["echo"] == "once"

            slow = asyncio.create_task(
                collect(
                    on_a,
                    send_request(
                        user_message(
                            data={"doc": "w-slow", "mode": "slow"},
                            skill="review",
                            context_id="w-slow",
                        )
                    ),
                )
            )
            async with asyncio.timeout(10):  # written 0.3 s after it began, still running
                while True:
                    listed = await on_b.list_tasks(ListTasksRequest(context_id="w-slow"))
                    if listed.tasks:
                        break
                    await asyncio.sleep(0.05)
            assert listed.tasks[0].status.state in (
                S.TASK_STATE_SUBMITTED,
                S.TASK_STATE_WORKING,
            )
            p.control.release("w-slow")
            done = final_task(await slow)
            assert done.status.state == S.TASK_STATE_COMPLETED
            again = await on_b.get_task(GetTaskRequest(id=done.id))
            assert again.status.state == S.TASK_STATE_COMPLETED
    finally:
        await replica_b.stop()
        p.control.release("w-slow")
