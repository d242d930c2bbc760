"""A worker task held in memory and written back with versioned writes.

:class:`StoredTask` is the persistence half of :class:`~soorma.tasking.context.TaskContext`:
building one from its request or its record, saving it (merging what the service knows,
e.g. results recorded meanwhile), and claiming it for the one replica that finishes it.
Both writes go through :func:`~soorma._versioned.apply_change` on :class:`TaskRecords`.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Self

from soorma._propagation import current_event
from soorma._versioned import Change, apply_change
from soorma.agents._answers import AnswerLog
from soorma.event import Event
from soorma_common.bookkeeping import TaskBookkeeping
from soorma_common.errors import TaskNotFound, VersionConflict
from soorma_common.events import (
    ACTION_RESULTS,
)
from soorma_common.memory import SubTaskRecord, TaskContextRecord

if TYPE_CHECKING:
    from soorma.context import PlatformContext
    from soorma.memory import MemoryClient

logger = logging.getLogger("soorma.task")


def task_memory(context: PlatformContext) -> MemoryClient:
    """The memory client tasks are stored with (``RuntimeError`` without one)."""
    memory = context.memory
    if memory is None:
        raise RuntimeError(
            "this needs context.memory (the memory service); build the context with "
            "PlatformContext.from_env() and set SOORMA_MEMORY_URL"
        )
    return memory


@dataclass(eq=False)
class StoredTask:
    """A task record as attributes; documented on :class:`~soorma.tasking.context.TaskContext`."""

    task_id: str
    event_type: str
    plan_id: str | None
    data: dict[str, Any]
    correlation_id: str | None
    response_event: str | None
    response_topic: str = ACTION_RESULTS
    sub_tasks: dict[str, SubTaskRecord] = field(default_factory=dict)
    state: dict[str, Any] = field(default_factory=dict)
    session_id: str | None = None
    tenant_id: str | None = None
    user_id: str | None = None
    agent_id: str | None = None
    version: int = 0
    _context: PlatformContext | None = field(default=None, repr=False)
    _meta: dict[str, Any] = field(default_factory=dict, repr=False)
    _stored: bool = field(default=False, repr=False)
    _finished: bool = field(default=False, repr=False)
    _answers: AnswerLog | None = field(default=None, repr=False)

    # -- building --------------------------------------------------------------------

    @classmethod
    def from_event(
        cls,
        event: Event,
        context: PlatformContext,
        *,
        agent_id: str | None = None,
        answers: AnswerLog | None = None,
    ) -> Self:
        """The task a request event asks for (not yet saved); ``answers``: the worker's
        answer log (its answer is recorded there before it is sent)."""
        return cls(
            _answers=answers,
            task_id=event.id,
            event_type=event.type,
            plan_id=event.plan_id,
            data=dict(event.data),
            correlation_id=event.correlation_id or event.id,
            response_event=event.response_event,
            response_topic=event.response_topic or ACTION_RESULTS,
            session_id=event.session_id,
            tenant_id=event.tenant_id,
            user_id=event.user_id,
            agent_id=agent_id,
            _context=context,
        )

    @classmethod
    def from_record(
        cls,
        record: TaskContextRecord,
        context: PlatformContext,
        *,
        answers: AnswerLog | None = None,
    ) -> Self:
        """Rebuild a task from its stored context (``answers`` as in :meth:`from_event`)."""
        meta = record.bookkeeping.model_dump()
        return cls(
            _answers=answers,
            task_id=record.task_id,
            event_type=record.event_type,
            plan_id=record.plan_id,
            data=dict(record.data),
            correlation_id=record.correlation_id,
            response_event=record.response_event,
            response_topic=record.response_topic,
            sub_tasks=dict(record.sub_tasks),
            state=dict(record.state),
            session_id=meta.get("session_id"),
            tenant_id=meta.get("tenant_id"),
            user_id=meta.get("user_id"),
            agent_id=meta.get("agent_id"),
            version=record.version,
            _context=context,
            _meta=meta,
            _stored=True,
        )

    @classmethod
    async def restore(cls, task_id: str, context: PlatformContext) -> Self | None:
        """Load a saved task by id (``None`` when it does not exist, e.g. completed)."""
        record = await task_memory(context).get_task_context(task_id)
        return None if record is None else cls.from_record(record, context)

    def to_record(self) -> TaskContextRecord:
        """The context as the memory service stores it."""
        bookkeeping = TaskBookkeeping.model_validate(
            {
                **self._meta,
                "session_id": self.session_id,
                "tenant_id": self.tenant_id,
                "user_id": self.user_id,
                "agent_id": self.agent_id,
            }
        )
        return TaskContextRecord(
            task_id=self.task_id,
            plan_id=self.plan_id,
            event_type=self.event_type,
            correlation_id=self.correlation_id,
            response_event=self.response_event,
            response_topic=self.response_topic,
            data=self.data,
            sub_tasks=self.sub_tasks,
            state=dict(self.state),
            bookkeeping=bookkeeping,
            version=self.version,
        )

    def to_dict(self) -> dict[str, Any]:
        """The stored record as a JSON-ready dict."""
        return self.to_record().model_dump(mode="json")

    @property
    def platform(self) -> PlatformContext:
        """The platform clients this task uses (bus, memory, ...)."""
        if self._context is None:
            raise RuntimeError("this TaskContext has no platform context")
        return self._context

    def is_finished(self) -> bool:
        """True once this object completed or failed the task."""
        return self._finished

    def _absorb(self, record: TaskContextRecord) -> None:
        # The service may know more than we do (results recorded meanwhile are kept).
        self.version = record.version
        self.sub_tasks = dict(record.sub_tasks)
        self._stored = True

    def _check_open(self) -> None:
        if self._finished:
            raise RuntimeError(f"task {self.task_id} is already finished")

    # -- persistence -----------------------------------------------------------------

    async def save(self) -> None:
        """Persist the context so the task can be resumed by any replica.

        The first save creates the context; later saves replace it (and fail with
        ``TaskNotFound`` if it no longer exists, e.g. another replica completed it).
        ``state`` and ``data`` are last-writer-wins; sub-task results recorded by the
        service are never overwritten by a save.
        """
        self._check_open()
        memory = task_memory(self.platform)
        if not self._stored:
            record = self.to_record()
            self._absorb(await memory.store_task_context(self.task_id, self.plan_id, record))
            return
        try:
            applied = await apply_change(
                TaskRecords(memory),
                self.task_id,
                self.to_record(),
                _as_is,
                rebase=self._rebased_unclaimed,
            )
        except VersionConflict as exc:
            raise VersionConflict(
                f"could not save task {self.task_id}: too many concurrent writes"
            ) from exc
        self._absorb(applied.record)

    def _rebased(self, fresh: TaskContextRecord) -> TaskContextRecord:
        """This copy merged onto the stored ``fresh`` one: its sub-tasks and bookkeeping
        (results and claims recorded meanwhile), our state and data and the sub-tasks
        added here."""
        added_here = {k: v for k, v in self.sub_tasks.items() if k not in fresh.sub_tasks}
        self._meta = fresh.bookkeeping.model_dump()
        self.version = fresh.version
        self.sub_tasks = {**fresh.sub_tasks, **added_here}
        return self.to_record()

    def _rebased_unclaimed(self, fresh: TaskContextRecord) -> TaskContextRecord:
        """As :meth:`_rebased`; ``TaskNotFound`` once another claimant is finishing it."""
        record = self._rebased(fresh)
        if self._claimed_elsewhere():
            raise TaskNotFound(
                f"task {self.task_id} is being finished by another claimant",
                details={"task_id": self.task_id},
            )
        return record

    @staticmethod
    def _claimant() -> str | None:
        handled = current_event()
        return handled.id if handled is not None else None

    def _claimed_elsewhere(self) -> bool:
        marker = self._meta.get("finish")
        return marker is not None and marker.get("by") != self._claimant()

    async def _claim(self) -> bool:
        """Mark the stored context as finishing with a versioned write; True if ours.

        The claimant is the event being handled, so a redelivery of the very event whose
        handler claimed the task (and then crashed before answering) may finish it.
        """
        if not self._stored:
            return True
        claimant = self._claimant() or f"direct-{uuid.uuid4()}"
        marker = {"by": claimant, "at": datetime.now(UTC).isoformat()}
        try:
            applied = await apply_change(
                TaskRecords(task_memory(self.platform)),
                self.task_id,
                self.to_record(),
                lambda record: _claimed(record, marker),
                rebase=self._rebased,
            )
        except TaskNotFound:
            return False
        except VersionConflict as exc:
            raise VersionConflict(
                f"could not claim task {self.task_id}: too many concurrent writes"
            ) from exc
        if applied.written:
            self._meta = applied.record.bookkeeping.model_dump()
            self._absorb(applied.record)
        return applied.outcome


class TaskRecords:
    """Task contexts in the memory service: their :class:`~soorma._versioned.VersionedStore`."""

    def __init__(self, memory: MemoryClient) -> None:
        self._memory = memory

    async def load(self, task_id: str) -> TaskContextRecord:
        """The stored context ``task_id`` (``TaskNotFound`` when it is gone)."""
        record = await self._memory.get_task_context(task_id)
        if record is None:
            raise TaskNotFound(
                f"task context {task_id!r} no longer exists (finished?)",
                details={"task_id": task_id},
            )
        return record

    async def replace(
        self, record: TaskContextRecord, *, expected_version: int
    ) -> TaskContextRecord:
        """Store ``record`` if the stored version is still ``expected_version``."""
        return await self._memory.replace_task_context(record, expected_version=expected_version)


def _as_is(record: TaskContextRecord) -> Change[TaskContextRecord, None]:
    return Change(record, None)


def _claimed(record: TaskContextRecord, marker: dict[str, Any]) -> Change[TaskContextRecord, bool]:
    """``record`` claimed with ``marker``; the outcome: whether the claim is ours (a
    record claimed already is left alone, and is ours if the claimant is the same)."""
    held = record.bookkeeping.finish
    if held is not None:
        return Change(None, held.get("by") == marker["by"])
    book = record.bookkeeping.model_copy(update={"finish": marker})
    return Change(record.model_copy(update={"bookkeeping": book}), True)
