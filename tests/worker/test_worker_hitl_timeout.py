"""Contract C2, SDK side: the tracker's ``task.timeout`` ends a worker's HITL wait.

The tracker is not part of these tests: the timeout event is published by hand, exactly
as the contract describes it (system-events, correlation_id = sub_task_id).
"""

from __future__ import annotations

import asyncio

import pytest
import pytest_asyncio
from worker_helpers import next_event

from soorma import PlatformContext, Worker
from testsupport.settle import MARKER, settled

# One set of services for the module; each test is a tenant of its own on them.
pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(loop_scope="module")
async def context(tenant_context: PlatformContext) -> PlatformContext:
    return tenant_context


def reviewer(context: PlatformContext, *, with_handler: bool) -> Worker:
    worker = Worker(name="reviewer", context=context)

    @worker.on_task("review.requested")
    async def review(task, ctx):
        await task.request_human_input(
            "approve?", response_event="review.answered", timeout_seconds=30
        )

    @worker.on_result("review.answered", topic="notification-events")
    async def answered(result, ctx):
        task = await result.restore_task()
        await task.complete({"approved": result.data["approved"]})

    if with_handler:

        @worker.on_timeout()
        async def timed_out(task, timeout_data, ctx):
            await task.complete({"approved": False, "auto": timeout_data["reason"]})

    return worker


async def publish_timeout(context: PlatformContext, ask) -> None:
    await context.bus.publish(
        "system-events",
        "task.timeout",
        {
            "task_id": ask.data["task_id"],
            "sub_task_id": ask.data["sub_task_id"],
            "reason": "hitl_timeout",
            "deadline": ask.data["deadline"],
            "timeout_seconds": ask.data["timeout_seconds"],
        },
        correlation_id=ask.data["sub_task_id"],
    )


async def nothing_more(context: PlatformContext, answers) -> None:
    """Once the worker has handled everything, the next answer is the test's marker."""
    await settled(context)
    marker = await context.bus.publish("action-results", MARKER, {})
    assert (await next_event(answers)).id == marker


async def test_a_timeout_fails_the_task_with_reason_hitl_timeout_and_a_late_answer_is_ignored(
    context: PlatformContext,
):
    bus = context.bus
    worker = reviewer(context, with_handler=False)
    await worker.start()
    try:
        async with (
            bus.subscribe(
                ["notification-events"], event_types=["notification.human_input"]
            ) as asks,
            bus.subscribe(["action-results"], event_types=["review.done", MARKER]) as answers,
        ):
            await asks.wait_ready()
            await answers.wait_ready()
            # Someone else's timeout first: not this worker's sub-task, ignored.
            await bus.publish(
                "system-events",
                "task.timeout",
                {"sub_task_id": "not-ours", "reason": "hitl_timeout"},
                correlation_id="not-ours",
            )
            await bus.request("review.requested", {}, "review.done", correlation_id="doc-1")
            ask = await next_event(asks)
            await publish_timeout(context, ask)
            failed = await next_event(answers)
            # The human answers after all: the task has ended, nothing more is sent.
            await bus.respond(
                "review.answered",
                {"approved": True},
                correlation_id=ask.data["sub_task_id"],
                topic="notification-events",
            )
            await nothing_more(context, answers)
    finally:
        await worker.stop()
    assert failed.correlation_id == "doc-1"
    assert failed.data["status"] == "failed" and failed.data["success"] is False
    assert failed.data["reason"] == "hitl_timeout"
    assert failed.data["sub_task_id"] == ask.data["sub_task_id"]
    assert await context.memory.get_task_context(ask.data["task_id"]) is None


async def test_on_timeout_handler_decides_what_a_timeout_means(context: PlatformContext):
    bus = context.bus
    worker = reviewer(context, with_handler=True)
    await worker.start()
    try:
        async with (
            bus.subscribe(
                ["notification-events"], event_types=["notification.human_input"]
            ) as asks,
            bus.subscribe(["action-results"], event_types=["review.done", MARKER]) as answers,
        ):
            await asks.wait_ready()
            await answers.wait_ready()
            await bus.request("review.requested", {}, "review.done", correlation_id="doc-2")
            ask = await next_event(asks)
            await publish_timeout(context, ask)
            answer = await next_event(answers)
            await publish_timeout(context, ask)  # delivered twice: the task has ended
            await nothing_more(context, answers)
    finally:
        await worker.stop()
    assert answer.data["status"] == "completed"
    assert answer.data["result"] == {"approved": False, "auto": "hitl_timeout"}


async def test_on_timeout_checks_its_handler_and_allows_one(context: PlatformContext):
    worker = Worker(name="strict-timeouts", context=context)

    with pytest.raises(TypeError, match=r"async def handler\(task, timeout_data, context\)"):
        worker.on_timeout()(lambda task, timeout_data, ctx: None)

    async def handler(task, timeout_data, ctx):
        return None

    assert worker.on_timeout()(handler) is handler
    with pytest.raises(RuntimeError, match="already has an on_timeout"):
        worker.on_timeout()(handler)
    await asyncio.sleep(0)
