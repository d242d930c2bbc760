"""A worker SIGKILLed while it handles a cancel request for its running task: after the
cancel mark was stored, before the handler was interrupted and anything announced. The
restarted worker announces the cancel (the task ends cancelled once, its sub-task is
asked to cancel), and the task's redelivered request does not run its handler again."""

from __future__ import annotations

import asyncio

import pytest
from crash_support import sigkill, start_agent, until

from soorma.tasking.cancelled import cancellation
from soorma_common.events import SYSTEM_EVENTS, TASK_CANCEL_REQUESTED
from testsupport.capture import capture

pytestmark = [pytest.mark.asyncio, pytest.mark.redis, pytest.mark.postgres]

READY = "agent analyst ready"


async def test_a_worker_killed_mid_cancel_ends_its_task_cancelled_once(services, context):
    bus = context.bus
    first = await start_agent("cancelling_worker.py", services, READY, CRASH_HOLD="mid_cancel")
    second = None
    try:
        async with (
            capture(context, ["action-requests"], ["chart.draw"]) as draws,
            capture(context, ["action-results"], ["analysis.done"]) as answers,
            capture(context, [SYSTEM_EVENTS], ["task.cancelled", "task.cancel_requested"]) as seen,
        ):
            task_id = await bus.request("analysis.requested", {}, "analysis.done")
            await first.wait_for(f"handler-started {task_id}")
            await until(lambda: len(draws) == 1)
            await bus.publish(
                SYSTEM_EVENTS,
                TASK_CANCEL_REQUESTED,
                {"task_id": task_id, "plan_id": None, "reason": "customer called"},
                correlation_id=task_id,
            )
            await first.wait_for(f"cancel stored {task_id}")
            await sigkill(first)
            mark = cancellation(await context.memory.get_task_context(task_id))
            assert mark is not None and mark["reason"] == "customer called"
            assert not [e for e in seen if e.type == "task.cancelled"]

            second = await start_agent("cancelling_worker.py", services, READY)
            await until(lambda: any(e.type == "task.cancelled" for e in seen))
            # The task's request, redelivered once the dead process's claim lapsed,
            # finds the task cancelled.
            await second.wait_for(f"task {task_id} was cancelled; not run again")
            await asyncio.sleep(2.0)  # past another redelivery: nothing new
        assert not any(line.startswith("handler-") for line in second.lines)
        assert [line for line in first.lines if line.startswith("handler-")] == [
            f"handler-started {task_id}"
        ]
        ends = [e for e in seen if e.type == "task.cancelled"]
        # At-least-once delivery may repeat an announcement under the same id.
        assert len({e.id for e in ends}) == 1
        assert ends[0].data["task_id"] == task_id
        assert ends[0].data["reason"] == "customer called"
        sub_cancels = [
            e for e in seen if e.type == "task.cancel_requested" and e.data["task_id"] != task_id
        ]
        assert {e.data["task_id"] for e in sub_cancels} == {draws[0].id}
        assert len({e.id for e in sub_cancels}) == 1
        assert answers == []
        assert len({d.id for d in draws}) == 1 and len(draws) == 1
        mark = cancellation(await context.memory.get_task_context(task_id))
        assert mark is not None and mark["reason"] == "customer called"
    finally:
        await first.kill()
        if second is not None:
            await second.kill()
