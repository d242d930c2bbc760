"""A Worker never runs a task twice across a memory-service outage (issue 9).

Real services: the event service on Redis, the memory service on PostgreSQL (behind a
relay the test switches off and on, see ``memory_outage``), the workers in this
process. A redelivery after a crash is a fresh worker (a restarted process) getting the
same request again.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from memory_outage import ask

from soorma import AgentOptions, PlatformContext, Tool, Worker
from soorma_common.events import new_event_id

pytestmark = [pytest.mark.asyncio, pytest.mark.redis, pytest.mark.postgres]


def finishing_worker(context: PlatformContext, runs: list[str], gate: asyncio.Event) -> Worker:
    """Counts its runs; answers ``{"n": runs so far}`` once ``gate`` is set."""
    worker = Worker(
        name="outage-worker",
        context=context,
        options=AgentOptions(visibility_timeout=5),
    )

    @worker.on_task("wo.requested")
    async def handle(task: Any, ctx: Any) -> None:
        runs.append(task.task_id)
        await gate.wait()
        await task.complete({"n": len(runs)})

    return worker


async def answer_again(context: PlatformContext, request_id: str, runs: list[str]) -> Any:
    """The same request delivered again, to a restarted worker: its answer."""
    gate = asyncio.Event()
    gate.set()
    worker = finishing_worker(context, runs, gate)
    await worker.start()
    try:
        return await ask(context, "wo.requested", "wo.completed", request_id)
    finally:
        await worker.stop()


async def test_a_task_waits_while_its_record_cannot_be_read_then_runs_once(stack):
    memory, context = stack
    runs: list[str] = []
    gate = asyncio.Event()
    gate.set()
    worker = finishing_worker(context, runs, gate)
    await worker.start()
    try:
        request_id = new_event_id()
        await memory.stop()
        pending = asyncio.create_task(ask(context, "wo.requested", "wo.completed", request_id))
        await asyncio.sleep(1.5)
        assert runs == []  # it may have been answered before: not run blind
        await memory.start()
        answer = await pending
        assert answer.data["result"] == {"n": 1}
        assert runs == [request_id]
    finally:
        await worker.stop()
    # Its answer was recorded before it was sent: a redelivery does not run it again.
    again = await answer_again(context, request_id, runs)
    assert runs == [request_id]
    assert again.id == answer.id and again.data == answer.data


async def test_an_answer_that_cannot_be_recorded_is_held_and_never_recomputed(stack):
    memory, context = stack
    runs: list[str] = []
    gate = asyncio.Event()
    worker = finishing_worker(context, runs, gate)
    await worker.start()
    try:
        request_id = new_event_id()
        first = asyncio.create_task(ask(context, "wo.requested", "wo.completed", request_id))
        while not runs:  # noqa: ASYNC110 - the handler has no event to await
            await asyncio.sleep(0.05)
        await memory.stop()  # the task finishes while the memory service is down
        gate.set()
        await asyncio.sleep(1.5)
        assert not first.done(), first.exception()  # held: unrecorded answers are not sent
        await memory.start()
        answer = await first
        assert answer.data["result"] == {"n": 1}
        assert runs == [request_id]
    finally:
        gate.set()
        await worker.stop()
    assert context.memory is not None
    recorded = await context.memory.recorded_answer(f"outage-worker:{request_id}")
    assert recorded is not None and recorded["event"]["id"] == answer.id
    again = await answer_again(context, request_id, runs)
    assert runs == [request_id]
    assert again.id == answer.id and again.data == answer.data


async def test_a_delegation_that_cannot_be_saved_is_held_not_run_again(stack):
    memory, context = stack
    runs: list[str] = []
    quotes: list[str] = []
    gate = asyncio.Event()
    worker = Worker(
        name="outage-delegator",
        context=context,
        options=AgentOptions(visibility_timeout=5),
    )

    @worker.on_task("wd.requested")
    async def buy(task: Any, ctx: Any) -> None:
        runs.append(task.task_id)
        await gate.wait()
        await task.delegate("wd.quote.requested", {"item": "desk"}, "wd.quote.done")

    @worker.on_result("wd.quote.done")
    async def quoted(result: Any, ctx: Any) -> None:
        task = await result.restore_task()
        await task.complete({"quote": result.data["result"], "runs": len(runs)})

    quoter = Tool(
        name="outage-quoter",
        context=context,
        options=AgentOptions(visibility_timeout=5),
    )

    @quoter.on_invoke("wd.quote.requested")
    async def quote(request: Any, ctx: Any) -> dict[str, Any]:
        quotes.append(request.request_id)
        return {"price": 99}

    await quoter.start()
    await worker.start()
    try:
        request_id = new_event_id()
        first = asyncio.create_task(ask(context, "wd.requested", "wd.done", request_id))
        while not runs:  # noqa: ASYNC110 - the handler has no event to await
            await asyncio.sleep(0.05)
        await memory.stop()  # the handler delegates while the memory service is down
        gate.set()
        await asyncio.sleep(1.5)
        assert quotes == []  # not sent before the task's context is saved
        assert runs == [request_id]  # held, not run again
        await memory.start()
        answer = await first
        assert answer.data["result"] == {"quote": {"price": 99}, "runs": 1}
        assert runs == [request_id] and len(quotes) == 1
    finally:
        gate.set()
        await worker.stop()
        await quoter.stop()
