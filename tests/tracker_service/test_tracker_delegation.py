"""A real Worker's delegate_parallel fan-out, as the tracker shows it: the task delegated, its
sub-tasks in one delegation group, each answered by the tool that handled it."""

from __future__ import annotations

from typing import Any

import pytest
from tracker_stack import Stack

from soorma import Agent, DelegationSpec, PlatformContext, PlatformSettings, Worker

pytestmark = pytest.mark.asyncio


async def test_delegation_group_and_task_tree(stack: Stack) -> None:
    context = PlatformContext.from_env(
        settings=PlatformSettings(
            event_service_url=stack.events.url,
            memory_url=stack.memory.url,
            tenant_id="acme",
            registry_url="http://127.0.0.1:1",
        )
    )
    context.bus.payload_validator = None
    worker = Worker(name="trip-worker", context=context)
    tool = Agent(name="booker", context=context)
    groups: list[str] = []

    @worker.on_task("trip.book")
    async def fan_out(task: Any, ctx: Any) -> None:
        groups.append(
            await task.delegate_parallel(
                [DelegationSpec("seat.book", {"n": n}, "seat.booked") for n in range(2)]
            )
        )

    @worker.on_result("seat.booked")
    async def fan_in(result: Any, ctx: Any) -> None:
        task = await result.restore_task()
        if task.aggregate_parallel_results(task.group_of(result.correlation_id)) is not None:
            await task.complete({"seats": 2})

    @tool.on_event(topic="action-requests", event_type="seat.book")
    async def book(event: Any, ctx: Any) -> None:
        await ctx.bus.respond(
            "seat.booked",
            {"status": "completed", "result": event.data},
            correlation_id=event.correlation_id,
            topic=event.response_topic,
        )

    await worker.start()
    await tool.start()
    try:
        task_id = await context.bus.request("trip.book", {}, "trip.booked", correlation_id="trip-1")

        async def delegated() -> bool:
            return bool(groups)

        await stack.until(delegated)

        async def group_done() -> dict[str, Any] | None:
            r = await stack.get(f"/delegation-groups/{groups[0]}")
            return r.json() if r.status_code == 200 and r.json()["complete"] else None

        group = await stack.until(group_done)
        assert group["parent_task_id"] == task_id and group["counts"] == {"completed": 2}
        assert all(m["agent"] and m["latency_ms"] is not None for m in group["sub_tasks"])

        async def task_done() -> dict[str, Any] | None:
            r = await stack.get(f"/tasks/{task_id}")
            return r.json() if r.status_code == 200 and r.json()["status"] == "completed" else None

        task = await stack.until(task_done)
        assert task["result"] == {"seats": 2} and len(task["sub_tasks"]) == 2
        assert {s["delegation_group_id"] for s in task["sub_tasks"]} == {groups[0]}
    finally:
        await tool.stop()
        await worker.stop()
        await context.close()
