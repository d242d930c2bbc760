"""The approver: asks a person (worker-level HITL, ``timeout_seconds=2``).

- The person's answer (``expense.approval.answered`` with the sub-task id as
  ``correlation_id``) completes the task with ``{"approved": ...}``.
- No answer in time: the tracker publishes ``task.timeout`` and the task
  fails with ``hitl_timeout``; a late answer then finds no task and is ignored.
"""

from __future__ import annotations

import logging

from approval import ASK_SECONDS

from soorma import TaskContext, TaskNotFound, Worker
from soorma_common.events import TASK_TIMEOUT

ANSWER_EVENT = "expense.approval.answered"
worker = Worker(name="approver", description="Asks a person to approve an expense.")
log = logging.getLogger("approver")


@worker.on_task("expense.review.requested")
async def review(task, context):
    await task.request_human_input(
        f"Approve {task.data.get('item')} for {task.data.get('amount')}?",
        response_event=ANSWER_EVENT,
        timeout_seconds=ASK_SECONDS,
        response_topic="notification-events",
        data={"item": task.data.get("item"), "amount": task.data.get("amount")},
    )


@worker.on_result(ANSWER_EVENT, topic="notification-events")
async def answered(result, context):
    try:
        task = await result.restore_task()
    except TaskNotFound:
        log.info("late answer for %s ignored: the task already ended", result.correlation_id)
        return
    await task.complete({"approved": bool(result.data.get("approved"))})


@worker.on_event(topic="system-events", event_type=TASK_TIMEOUT)
async def timed_out(event, context):
    """Fail the task whose human input timed out (what the SDK does by default once
    ``@worker.on_timeout`` lands; this example then needs no handler of its own)."""
    record = await context.memory.get_task_by_subtask(event.data.get("sub_task_id") or "")
    if record is None:
        return  # not ours, or already ended
    task = TaskContext.from_record(record, context)
    await task.fail(f"hitl_timeout: nobody answered within {event.data.get('timeout_seconds')} s")


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    worker.run()
