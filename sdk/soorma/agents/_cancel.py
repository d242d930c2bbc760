"""Cancelling a worker's tasks (``task.cancel_requested``).

A cancelled plan asks each of its outstanding step requests to cancel, and a cancelled
task asks each of its outstanding sub-tasks (:func:`cancel_requests`). The worker that
holds the task (:class:`TaskCancels`):

1. marks the stored task context cancelled with a versioned write (creating it when the
   handler has saved nothing yet, or, for a request of a type it handles that has not
   reached it yet and has no recorded answer, before the request arrives). The mark is
   the task's finish claim, so the task is never answered afterwards; a task already
   finishing with an answer (claimed) or finished (its answer recorded, its context
   deleted) is left alone;
2. interrupts the task's handler when it runs in this process (``asyncio`` cancellation:
   the handler sees ``CancelledError``; its request is acked, not redelivered);
3. publishes ``task.cancel_requested`` for the task's outstanding sub-tasks and
   ``task.cancelled`` for the tracker, under ids derived from the task.

Crash-safe like a plan's cancel: the mark is stored before anything is announced, and a
redelivered request for a task already marked announces the same events again under the
same ids (consumers drop the copies) and interrupts nothing new. A redelivered *task*
request finds the mark and does not run its handler again.

Tenants stay apart: the task context is read as the request's tenant (the event service
sets it), and a handler running here is interrupted only for a request of its own
tenant, so another tenant's request for the same task id changes nothing.

The limit: with several replicas of a worker, the replica that receives the request
interrupts the handler only when it runs there. Elsewhere the handler runs on; once it
has saved its task it can neither delegate nor answer any more (the mark holds the
task's finish claim), but one that saved nothing may still answer.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from soorma._concurrency import CONFLICT_RETRIES, backoff
from soorma.agents._handlers import HandlerSpec
from soorma.tasking.cancelled import cancel_marker, cancellation
from soorma_common.bookkeeping import TaskBookkeeping
from soorma_common.clock import SYSTEM_CLOCK, Clock
from soorma_common.errors import TaskNotFound, VersionConflict
from soorma_common.events import (
    ACTION_REQUESTS,
    HUMAN_INPUT,
    SYSTEM_EVENTS,
    TASK_CANCEL_REQUESTED,
    TASK_CANCELLED,
    EventEnvelope,
)
from soorma_common.memory import SubTaskStatus, TaskContextRecord

if TYPE_CHECKING:
    from soorma.agents.base import Agent
    from soorma.bus import BusClient
    from soorma.context import PlatformContext
    from soorma.event import Event
    from soorma.memory import MemoryClient
    from soorma.planning.plan import PlanContext
    from soorma.tasking.context import TaskContext

logger = logging.getLogger("soorma.worker")

DEFAULT_CLEANUP_WAIT = 10.0
_NAMESPACE = uuid.UUID("6f1c2b7e-0d4a-4e59-9a83-5b1e7c2d4f60")


def cancel_event_id(owner_id: str, *parts: str) -> str:
    """A stable id for one cancel announcement of ``owner_id`` (a plan or a task)."""
    return str(uuid.uuid5(_NAMESPACE, "/".join((owner_id, *parts))))


def cancel_requests(
    bus: BusClient,
    tasks: Mapping[str, str | None],
    *,
    owner_id: str,
    plan_id: str | None,
    session_id: str | None,
    reason: str,
) -> list[EventEnvelope]:
    """``task.cancel_requested`` for each of ``tasks`` (request id → its event type, when
    known), asked by the plan or task ``owner_id``; ids derive from both, so announcing
    again sends the same events."""
    return [
        bus.build_event(
            SYSTEM_EVENTS,
            TASK_CANCEL_REQUESTED,
            {
                "task_id": task_id,
                "plan_id": plan_id,
                "reason": reason,
                **({"event_type": tasks[task_id]} if tasks[task_id] else {}),
            },
            correlation_id=task_id,
            plan_id=plan_id,
            session_id=session_id,
            event_id=cancel_event_id(owner_id, "cancel", task_id),
        )
        for task_id in sorted(tasks)
    ]


def step_cancel_requests(
    bus: BusClient, plan: PlanContext, pending: Mapping[str, str], reason: str
) -> list[EventEnvelope]:
    """What a cancelled plan sends its workers: ``task.cancel_requested`` for each
    outstanding step request (``pending``: a state machine's, request id → state; a
    ChoreographyPlanner's are read from its bookkeeping), ids derived from the plan."""
    steps: dict[str, str | None] = {}
    for corr, state in pending.items():
        config = plan.state_machine.get(state)
        steps[corr] = config.action.event_type if config and config.action else None
    choreography = plan.bookkeeping.choreography
    for corr, request in (choreography.pending if choreography is not None else {}).items():
        steps[corr] = request.get("event_type")
    return cancel_requests(
        bus,
        steps,
        owner_id=plan.plan_id,
        plan_id=plan.plan_id,
        session_id=plan.session_id,
        reason=f"plan {plan.plan_id} cancelled: {reason}",
    )


@dataclass(eq=False)
class _Running:
    """A task handler running in this process."""

    handler: asyncio.Task[Any]
    task: TaskContext
    cancelled: bool = False


class TaskCancels:
    """A worker's handling of ``task.cancel_requested`` and its running handlers.

    Args:
        worker: The worker (its name is the ``agent_id`` of the tasks it holds).
    """

    def __init__(self, worker: Agent) -> None:
        self.worker = worker
        self.running: dict[str, _Running] = {}
        # Seconds an interrupted handler's cleanup is waited for before the cancel is
        # announced (it is announced anyway after that).
        self.cleanup_wait = DEFAULT_CLEANUP_WAIT
        self._listening = False

    def listen(self) -> None:
        """Handle ``task.cancel_requested`` (once; a worker with tasks, as it starts)."""
        if not self._listening:
            self._listening = True
            self.worker._add_handler(
                HandlerSpec(
                    topic=SYSTEM_EVENTS,
                    event_type=TASK_CANCEL_REQUESTED,
                    func=self.requested,
                    name=f"{self.worker.name} task.cancel_requested",
                )
            )

    async def run(
        self,
        task: TaskContext,
        handler: Callable[[TaskContext, PlatformContext], Awaitable[Any]],
        context: PlatformContext,
    ) -> None:
        """Run a task's handler as its own asyncio task, so a cancel request can
        interrupt it. Returns normally when it was interrupted by one."""

        async def call() -> Any:
            return await handler(task, context)

        running = _Running(asyncio.create_task(call(), name=f"task {task.task_id}"), task)
        self.running[task.task_id] = running
        try:
            await running.handler
        except (asyncio.CancelledError, Exception) as exc:
            current = asyncio.current_task()
            if not running.cancelled or (current is not None and current.cancelling()):
                raise  # not cancelled, or the agent is stopping (the request is redelivered)
            logger.info(
                "worker %s: task %s cancelled; its handler ended with %s",
                self.worker.name,
                task.task_id,
                type(exc).__name__,
            )
        finally:
            if self.running.get(task.task_id) is running:
                del self.running[task.task_id]

    async def requested(self, event: Event, context: PlatformContext) -> None:
        """A ``task.cancel_requested``: cancel the task if this worker holds it."""
        task_id = event.data.get("task_id")
        if not isinstance(task_id, str) or not task_id or context.memory is None:
            return
        memory = context.memory
        reason = str(event.data.get("reason") or "cancelled")
        marker = cancel_marker(event.id, reason, event.user_id or event.tenant_id)

        async def new_record() -> TaskContextRecord | None:
            running = self._running(task_id, event)
            if running is not None:
                unsaved = self._unsaved(running)
                return None if unsaved is None else unsaved.to_record()
            return await self._not_started(event, task_id, memory)

        record = await mark_cancelled(
            memory, task_id, self.worker.name, new_record, marker, clock=context.clock
        )
        if record is None:
            return  # not ours, another tenant's, or finished already
        running = self._running(task_id, event)  # (also one that started meanwhile)
        if running is not None and not running.handler.done():
            running.cancelled = True
            running.task._finished = True  # nothing more from this handler: no send, no answer
            running.handler.cancel()
            # Its cleanup (finally blocks) runs before the cancel is announced; a first
            # save it had in flight may have replaced the mark: mark it again then.
            await asyncio.wait([running.handler], timeout=self.cleanup_wait)
            record = (
                await mark_cancelled(
                    memory, task_id, self.worker.name, _none, marker, clock=context.clock
                )
                or record
            )
        await context.bus.publish_batch(cancelled_events(context.bus, record))

    def _running(self, task_id: str, event: Event) -> _Running | None:
        """The task's handler running here, for a request of its own tenant."""
        running = self.running.get(task_id)
        if running is None or running.task.tenant_id != event.tenant_id:
            return None  # (another tenant's request is not for this handler)
        return running

    @staticmethod
    def _unsaved(running: _Running) -> TaskContext | None:
        """The running task to store (marked) when its handler has saved nothing yet."""
        task = running.task
        if running.handler.done() or task._stored or task.is_finished():
            return None
        return task

    async def _not_started(
        self, event: Event, task_id: str, memory: MemoryClient
    ) -> TaskContextRecord | None:
        """The record that cancels a task whose request has not reached this worker yet
        (it will find it cancelled): only for a request type it handles, not answered."""
        event_type = event.data.get("event_type")
        if not isinstance(event_type, str) or not any(
            spec.matches(ACTION_REQUESTS, event_type) for spec in self.worker.handlers
        ):
            return None
        answers = getattr(self.worker, "answers", None)
        if answers is None or not answers.records(self.worker.context):
            return None  # answers are not recorded: it may have been answered
        if await memory.recorded_answer(answers.key(task_id)) is not None:
            return None  # answered already
        plan_id = event.data.get("plan_id")
        return TaskContextRecord(
            task_id=task_id,
            plan_id=plan_id if isinstance(plan_id, str) else None,
            event_type=event_type,
            correlation_id=event.correlation_id or task_id,
            bookkeeping=TaskBookkeeping(
                session_id=event.session_id,
                tenant_id=event.tenant_id,
                user_id=event.user_id,
                agent_id=self.worker.name,
            ),
        )


async def _none() -> None:
    return None


def was_cancelled(worker: str, record: TaskContextRecord) -> bool:
    """Whether a redelivered task request finds its task cancelled (then its handler
    does not run again, and nothing it sent is re-sent)."""
    if cancellation(record) is None:
        return False
    logger.info("worker %s: task %s was cancelled; not run again", worker, record.task_id)
    return True


async def mark_cancelled(
    memory: MemoryClient,
    task_id: str,
    agent: str,
    new_record: Callable[[], Awaitable[TaskContextRecord | None]],
    marker: dict[str, Any],
    *,
    clock: Clock = SYSTEM_CLOCK,
) -> TaskContextRecord | None:
    """Store the cancel ``marker`` as the finish claim of ``agent``'s task ``task_id``
    (a versioned write). ``new_record()``: what to store when nothing is stored yet (a
    running handler's task, or one not started), or ``None``: then there is no task.
    The waits between conflicting writes are slept on ``clock``.

    Returns:
        The cancelled record (also when an earlier request marked it: nothing is
        written then), or ``None`` when ``agent`` holds no such task (finished, another
        worker's or tenant's, never seen) or it is finishing with an answer (claimed).
    """
    for conflicts in range(1, CONFLICT_RETRIES + 2):
        record = await memory.get_task_context(task_id)
        if record is not None and record.bookkeeping.agent_id != agent:
            return None
        if cancellation(record) is not None:
            return record
        if record is not None and record.bookkeeping.finish is not None:
            return None  # being answered: it finishes as it is
        base = record if record is not None else await new_record()
        if base is None:
            return None
        marked = base.model_copy(
            update={"bookkeeping": base.bookkeeping.model_copy(update={"finish": marker})}
        )
        try:
            if record is None:
                return await memory.store_task_context(
                    task_id, marked.plan_id, marked, expected_version=0
                )
            return await memory.replace_task_context(marked, expected_version=record.version)
        except TaskNotFound:
            return None  # finished (deleted) meanwhile
        except VersionConflict:
            await clock.sleep(backoff(conflicts))
    raise VersionConflict(f"could not mark task {task_id} cancelled: too many concurrent writes")


def cancelled_events(bus: BusClient, record: TaskContextRecord) -> list[EventEnvelope]:
    """What a cancelled task announces: a cancel request per outstanding sub-task, then
    ``task.cancelled``; ids derive from the task (the same on every announcement)."""
    mark = cancellation(record) or {}
    reason = str(mark.get("reason") or "cancelled")
    session_id = record.bookkeeping.session_id
    open_subs = {
        sub_id: sub.event_type
        for sub_id, sub in record.sub_tasks.items()
        if sub.status is SubTaskStatus.PENDING and sub.event_type != HUMAN_INPUT
    }
    events = cancel_requests(
        bus,
        open_subs,
        owner_id=record.task_id,
        plan_id=record.plan_id,
        session_id=session_id,
        reason=f"task {record.task_id} cancelled: {reason}",
    )
    events.append(
        bus.build_event(
            SYSTEM_EVENTS,
            TASK_CANCELLED,
            {
                "task_id": record.task_id,
                "plan_id": record.plan_id,
                "event_type": record.event_type,
                "reason": reason,
                "cancelled_by": mark.get("cancelled_by"),
            },
            correlation_id=record.correlation_id or record.task_id,
            plan_id=record.plan_id,
            session_id=session_id,
            event_id=cancel_event_id(record.task_id, "cancelled"),
        )
    )
    return events


__all__ = [
    "TaskCancels",
    "cancel_event_id",
    "cancel_requests",
    "cancelled_events",
    "mark_cancelled",
    "step_cancel_requests",
    "was_cancelled",
]
