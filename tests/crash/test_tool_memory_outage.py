"""A Tool never runs a request twice across a memory-service outage (issue 9, chaos gap).

Real services: the event service on Redis, the memory service on PostgreSQL (stopped and
started again on the same port by the test), the tool in this process.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from memory_outage import ask as ask_for

from event_service import create_app as create_event_app
from soorma import AgentOptions, PlatformContext, PlatformSettings, Tool
from soorma_common.events import new_event_id
from testsupport.server import closed_port, serve
from testsupport.services import redis_event_settings

pytestmark = [pytest.mark.asyncio, pytest.mark.redis, pytest.mark.postgres]


def counting_tool(
    context: PlatformContext, runs: list[str], gate: asyncio.Event, entered: asyncio.Event
) -> Tool:
    tool = Tool(
        name="outage-tool",
        context=context,
        options=AgentOptions(visibility_timeout=5),
    )

    @tool.on_invoke("outage.requested")
    async def handle(request: Any, ctx: Any) -> dict[str, Any]:
        runs.append(request.request_id)
        entered.set()
        await gate.wait()
        return {"n": len(runs)}

    return tool


async def ask(context: PlatformContext, request_id: str) -> Any:
    return await ask_for(context, "outage.requested", "outage.completed", request_id)


async def test_an_answer_that_cannot_be_recorded_waits_and_is_never_recomputed(stack):
    memory, context = stack
    runs: list[str] = []
    gate, entered = asyncio.Event(), asyncio.Event()
    tool = counting_tool(context, runs, gate, entered)
    await tool.start()
    try:
        request_id = new_event_id()
        first = asyncio.create_task(ask(context, request_id))
        await asyncio.wait_for(entered.wait(), 20)
        await memory.stop()  # the handler finishes while the memory service is down
        gate.set()
        await asyncio.sleep(1.5)
        assert not first.done(), first.exception()  # held: unrecorded answers are not sent
        await memory.start()
        answer = await first
        assert answer.data["result"] == {"n": 1}
        assert runs == [request_id]
        # Sent only once recorded: a redelivered request is answered from the record.
        assert context.memory is not None
        recorded = await context.memory.recorded_answer(f"outage-tool:{request_id}")
        assert recorded is not None and recorded["event"]["id"] == answer.id
    finally:
        gate.set()
        await tool.stop()


async def test_a_request_waits_while_its_record_cannot_be_read(stack):
    memory, context = stack
    runs: list[str] = []
    gate = asyncio.Event()
    gate.set()
    tool = counting_tool(context, runs, gate, asyncio.Event())
    await tool.start()
    try:
        request_id = new_event_id()
        await memory.stop()
        pending = asyncio.create_task(ask(context, request_id))
        await asyncio.sleep(1.5)
        assert runs == []  # it may have been answered before: not run blind
        await memory.start()
        answer = await pending
        assert answer.data["result"] == {"n": 1}
        assert runs == [request_id]
    finally:
        await tool.stop()


async def test_a_tool_started_while_the_memory_service_is_down_waits_for_it(stack):
    """Issue 9, item 3: an unreachable memory service at start is an outage, not a
    platform without one (a chaos kill at that moment let requests run twice)."""
    memory, context = stack
    runs: list[str] = []
    gate = asyncio.Event()
    gate.set()
    await memory.stop()
    tool = counting_tool(context, runs, gate, asyncio.Event())
    await tool.start()
    try:
        request_id = new_event_id()
        pending = asyncio.create_task(ask(context, request_id))
        await asyncio.sleep(1.5)
        assert runs == []  # not run blind: it may be answered or running elsewhere
        await memory.start()
        answer = await pending
        assert answer.data["result"] == {"n": 1}
        assert runs == [request_id]
    finally:
        await tool.stop()


async def test_a_tool_declared_without_a_memory_service_answers_at_once(
    redis_url: str, redis_prefix: str
):
    """``answer_retention=0`` says there is no memory service: no record, no claim, no
    connection attempt (the client's retries, stretched to a minute here, would miss
    the call's deadline)."""
    nowhere = f"http://127.0.0.1:{closed_port()}"  # nothing listens: connections refused
    async with serve(create_event_app(redis_event_settings(redis_url, redis_prefix))) as ev:
        settings = PlatformSettings(
            event_service_url=ev.url, memory_url=nowhere, registry_url=nowhere
        )
        async with PlatformContext.from_env(settings=settings) as context:
            context.registry = None
            context.bus.payload_validator = None
            assert context.memory is not None
            context.memory.retry_backoff = 60.0
            runs: list[str] = []
            gate = asyncio.Event()
            gate.set()
            tool = Tool(name="no-memory-tool", context=context, answer_retention=0)

            @tool.on_invoke("outage.requested")
            async def handle(request: Any, ctx: Any) -> dict[str, Any]:
                runs.append(request.request_id)
                return {"n": len(runs)}

            await tool.start()
            try:
                answer = await context.bus.call(
                    "outage.requested", {}, response_event="outage.completed", timeout=10
                )
                assert answer.data["result"] == {"n": 1}
            finally:
                await tool.stop()
