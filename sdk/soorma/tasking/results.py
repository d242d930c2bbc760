"""ResultContext: a sub-task's answer, and the task it belongs to."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from soorma.agents._answers import AnswerLog
from soorma.event import Event
from soorma.tasking.cancelled import is_cancelled
from soorma.tasking.context import TaskContext
from soorma.tasking.stored import task_memory
from soorma_common.errors import TaskNotFound
from soorma_common.memory import SubTaskStatus

if TYPE_CHECKING:
    from soorma.context import PlatformContext


def is_failed(data: Mapping[str, Any]) -> bool:
    return data.get("success") is False or data.get("status") == "failed"


@dataclass(eq=False)
class ResultContext:
    """A sub-task's answer, as passed to an ``on_result`` handler.

    Attributes:
        event_type: The answer's event type (the sub-task's ``response_event``).
        correlation_id: The sub-task id.
        data: The answer payload.
        success: False when the answer says ``success: false`` or ``status: failed``.
        error: The answer's ``error``, if any.
        event: The full answer event.
    """

    event_type: str
    correlation_id: str | None
    data: dict[str, Any]
    success: bool = True
    error: str | None = None
    event: Event | None = field(default=None, repr=False)
    _context: PlatformContext | None = field(default=None, repr=False)
    _task: TaskContext | None = field(default=None, repr=False)
    restore_attempted: bool = field(default=False, repr=False)
    _answers: AnswerLog | None = field(default=None, repr=False)

    @classmethod
    def from_event(
        cls, event: Event, context: PlatformContext, *, answers: AnswerLog | None = None
    ) -> ResultContext:
        """The result an answer event carries (``answers``: the worker's answer log, used
        by the task it restores)."""
        data = dict(event.data)
        error = data.get("error")
        return cls(
            event_type=event.type,
            correlation_id=event.correlation_id,
            data=data,
            success=not is_failed(data),
            error=None if error is None else str(error),
            event=event,
            _context=context,
            _answers=answers,
        )

    async def restore_task(self) -> TaskContext:
        """Record this result on its task and return the task, current as of now.

        The result is recorded through the memory service's atomic endpoint, which
        answers with the whole context: every result recorded before this one is in it,
        so ``aggregate_parallel_results()`` / ``all_sub_tasks_answered()`` are reliable even when
        results arrive at several replicas at once.

        Raises:
            TaskNotFound: no task owns this sub-task (it was completed or deleted), or
                its task was cancelled; the worker acks such a late result instead of
                retrying it.
        """
        if self._task is not None:
            return self._task
        self.restore_attempted = True
        if self._context is None:
            raise RuntimeError("this ResultContext has no platform context")
        memory = task_memory(self._context)
        cid = self.correlation_id
        owner = None if not cid else await memory.get_task_by_subtask(cid)
        if owner is None or cid is None:
            raise TaskNotFound(
                f"no task owns sub-task {cid!r} (finished already, or not delegated with "
                "task.delegate())",
                details={"sub_task_id": cid},
            )
        if is_cancelled(owner):
            raise TaskNotFound(
                f"task {owner.task_id} was cancelled; its sub-task {cid!r} answered late",
                details={"task_id": owner.task_id, "sub_task_id": cid},
            )
        record = await memory.record_sub_task_result(
            owner.task_id,
            cid,
            result=self.data,
            status=SubTaskStatus.COMPLETED if self.success else SubTaskStatus.FAILED,
            error=self.error,
        )
        self._task = TaskContext.from_record(record, self._context, answers=self._answers)
        return self._task
