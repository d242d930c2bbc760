"""Worker-level human-in-the-loop: ask on notification-events, the answer resumes the task."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from worker_helpers import next_event

from soorma import PlatformContext, Worker
from soorma_common.memory import SubTaskStatus

pytestmark = pytest.mark.asyncio


def reviewer(context: PlatformContext, answer_topic: str) -> Worker:
    worker = Worker(name="reviewer", context=context)

    @worker.on_task("document.review.requested")
    async def review(task, ctx):
        await task.request_human_input(
            "Please review this document",
            response_event="document.approval.received",
            timeout_seconds=3600,
            data={"document_url": task.data["url"]},
            response_topic=answer_topic,
        )

    @worker.on_result("document.approval.received", topic=answer_topic)
    async def approval(result, ctx):
        task = await result.restore_task()
        sub = task.sub_tasks[result.correlation_id]
        if result.data["approved"]:
            await task.complete({"status": "approved", "sub_task": sub.status})
        else:
            await task.complete({"status": "rejected", "reason": result.data["reason"]})

    return worker


@pytest.mark.parametrize("answer_topic", ["notification-events", "action-results"])
async def test_human_answer_resumes_the_waiting_task(
    light_context: PlatformContext, answer_topic: str
):
    context = light_context
    bus = context.bus
    worker = reviewer(context, answer_topic)
    await worker.start()
    try:
        async with (
            bus.subscribe(
                ["notification-events"], event_types=["notification.human_input"]
            ) as asks,
            bus.subscribe(["action-results"], event_types=["document.review.done"]) as answers,
        ):
            await asks.wait_ready()
            await answers.wait_ready()
            asked_at = datetime.now(UTC)
            await bus.request(
                "document.review.requested",
                {"url": "https://docs/1"},
                "document.review.done",
                correlation_id="review-1",
            )
            ask = await next_event(asks)
            # The question is correlated to a sub-task registered in the saved task.
            waiting = await context.memory.get_task_by_subtask(ask.correlation_id)
            assert waiting is not None
            assert waiting.sub_tasks[ask.correlation_id].event_type == "notification.human_input"
            assert waiting.correlation_id == "review-1"

            await bus.publish(
                answer_topic,
                "document.approval.received",
                {"approved": True},
                correlation_id=ask.correlation_id,
            )
            answer = await next_event(answers)
    finally:
        await worker.stop()

    assert ask.topic == "notification-events"
    assert ask.response_event == "document.approval.received"
    assert ask.response_topic == answer_topic
    assert ask.data["question"] == "Please review this document"
    assert ask.data["document_url"] == "https://docs/1"
    assert ask.data["response_event"] == "document.approval.received"
    assert ask.data["response_topic"] == answer_topic
    assert ask.data["timeout_seconds"] == 3600
    deadline = datetime.fromisoformat(ask.data["deadline"])
    assert asked_at + timedelta(seconds=3590) < deadline < asked_at + timedelta(seconds=3700)
    assert answer.correlation_id == "review-1"
    assert answer.data["result"] == {"status": "approved", "sub_task": SubTaskStatus.COMPLETED}


async def test_human_input_needs_a_timeout(light_context: PlatformContext):
    from soorma import Event, TaskContext

    request = Event.from_delivery(
        {"id": "r1", "source": "t", "type": "x", "topic": "action-requests", "data": {}}
    )
    task = TaskContext.from_event(request, light_context)
    with pytest.raises(ValueError, match="timeout_seconds"):
        await task.request_human_input("?", response_event="x.answer", timeout_seconds=0)
