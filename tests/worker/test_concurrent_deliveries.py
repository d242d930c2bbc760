"""Two deliveries of one request in flight at once run it once (issue 9, claims).

A lease that ran out while the event service was down, or a planner re-sending its
request after a restart, puts a second copy of a request in another replica's hands
while the first still runs. Here two replicas of one agent in separate groups each get
their own copy of the same request (the same event id) at the same time; the handler
is slow, so neither has recorded an answer when the other looks.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from worker_helpers import collect, next_event

from soorma import AgentOptions, PlatformContext, Tool, Worker, run_once

pytestmark = pytest.mark.asyncio


def request_envelope(context: PlatformContext, event_type: str, response_event: str) -> object:
    return context.bus.build_event(
        "action-requests",
        event_type,
        {},
        correlation_id="caller-1",
        response_event=response_event,
        response_topic="action-results",
    )


def slow_tool(context: PlatformContext, runs: list[str], group: str) -> Tool:
    tool = Tool(name="pricer", options=AgentOptions(group=group), context=context)

    @tool.on_invoke("price.requested")
    async def price(request, ctx):
        runs.append(request.request_id)
        await asyncio.sleep(1.0)
        return {"price": 42, "run": len(runs)}

    return tool


async def test_two_tool_replicas_given_one_request_at_once_run_it_once(
    context: PlatformContext,
):
    runs: list[str] = []
    request = request_envelope(context, "price.requested", "price.done")
    replicas = [slow_tool(context, runs, group) for group in ("pricer-a", "pricer-b")]
    async with context.bus.subscribe(["action-results"], event_types=["price.done"]) as answers:
        await answers.wait_ready()
        for tool in replicas:
            await tool.start()
        try:
            await context.bus.publish_event(request)  # one copy to each replica
            both = await collect(answers, 2)
        finally:
            for tool in replicas:
                await tool.stop()
    assert runs == [request.id]
    assert both[0].id == both[1].id and both[0].data == both[1].data
    assert both[0].data["result"] == {"price": 42, "run": 1}


def slow_worker(context: PlatformContext, runs: list[str], group: str) -> Worker:
    worker = Worker(name="packer", options=AgentOptions(group=group), context=context)

    @worker.on_task("pack.requested")
    async def pack(task, ctx):
        runs.append(task.task_id)
        await asyncio.sleep(1.0)
        await task.complete({"boxes": len(runs)})

    return worker


async def test_two_worker_replicas_given_one_task_at_once_run_it_once(
    context: PlatformContext,
):
    runs: list[str] = []
    request = request_envelope(context, "pack.requested", "pack.done")
    replicas = [slow_worker(context, runs, group) for group in ("packer-a", "packer-b")]
    async with context.bus.subscribe(["action-results"], event_types=["pack.done"]) as answers:
        await answers.wait_ready()
        for worker in replicas:
            await worker.start()
        try:
            await context.bus.publish_event(request)
            both = await collect(answers, 2)
        finally:
            for worker in replicas:
                await worker.stop()
    assert runs == [request.id]
    assert both[0].id == both[1].id and both[0].data["result"] == both[1].data["result"]
    assert both[0].data["result"] == {"boxes": 1}


async def test_a_claim_left_by_a_killed_holder_is_taken_when_its_lease_runs_out(
    context: PlatformContext,
):
    """A replica killed while running a request leaves its claim, unrenewed: another
    delivery waits for it to lapse (not for ever, and not running it meanwhile)."""
    runs: list[str] = []
    request = request_envelope(context, "price.requested", "price.done")
    assert context.memory is not None
    held = await context.memory.claim_request(
        f"pricer:{request.id}", "killed-replica", lease_seconds=2
    )
    assert held.status == "granted"
    tool = slow_tool(context, runs, "pricer")
    async with context.bus.subscribe(["action-results"], event_types=["price.done"]) as answers:
        await answers.wait_ready()
        await tool.start()
        try:
            started = time.monotonic()
            await context.bus.publish_event(request)
            await asyncio.sleep(1.0)
            assert runs == []  # the claim is live: its holder may still answer
            answer = await next_event(answers)
        finally:
            await tool.stop()
    assert runs == [request.id]
    assert answer.data["result"] == {"price": 42, "run": 1}
    assert 1.8 <= time.monotonic() - started < 8


def failing_once_worker(context: PlatformContext, runs: list[str]) -> Worker:
    worker = Worker(
        name="flaky",
        context=context,
        options=AgentOptions(visibility_timeout=30),
    )

    @worker.on_task("flaky.requested")
    async def flaky(task, ctx):
        runs.append(task.task_id)
        if len(runs) == 1:
            raise RuntimeError("first try fails")
        await task.complete({"tries": len(runs)})

    return worker


async def test_a_failed_handler_gives_its_claim_back_so_the_redelivery_runs_at_once(
    context: PlatformContext,
):
    runs: list[str] = []
    request = request_envelope(context, "flaky.requested", "flaky.done")
    worker = failing_once_worker(context, runs)
    worker.answers.claim_lease = 30.0  # a lapse would take longer than the deadline
    async with context.bus.subscribe(["action-results"], event_types=["flaky.done"]) as answers:
        await answers.wait_ready()
        await worker.start()
        try:
            await context.bus.publish_event(request)
            answer = await next_event(answers, within=15)
        finally:
            await worker.stop()
    assert runs == [request.id, request.id]
    assert answer.data["result"] == {"tries": 2}


async def test_run_once_called_twice_at_once_with_one_key_runs_the_work_once(
    context: PlatformContext,
):
    runs: list[int] = []

    async def work() -> dict:
        runs.append(1)
        await asyncio.sleep(1.0)
        return {"found": len(runs)}

    key = f"searcher:{time.time_ns()}"
    both = await asyncio.gather(run_once(context, key, work), run_once(context, key, work))
    assert runs == [1]
    assert both == [{"found": 1}, {"found": 1}]
