"""TaskContext and ResultContext: the Worker's async task model.

A worker's task outlives the handler that received it. Its state — the original caller's
correlation id and response event, the delegated sub-tasks and their results — lives in
the memory service, not in the process, so any replica (or a restarted process) can pick
the task up when a sub-task's result arrives:

1. ``on_task`` gets a :class:`TaskContext`; ``delegate()`` / ``delegate_parallel()``
   save the context *before* publishing the requests (``correlation_id`` = sub-task id).
2. ``on_result`` gets a :class:`ResultContext`; ``restore_task()`` records the result
   through the memory service's atomic endpoint and returns the whole, current context,
   so fan-in decides completion from data no concurrent result can overwrite.
3. ``complete()`` / ``fail()`` claim the task with a versioned write (exactly one claimant
   wins when results race), answer the caller's ``response_event`` with the caller's
   original ``correlation_id``, then delete the context.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from soorma._concurrency import retry_on_conflict
from soorma._deprecation import renamed_method, renamed_property, renamed_to_method
from soorma._propagation import current_event
from soorma.agents._answers import AnswerLog, answer_event_id
from soorma.event import Event
from soorma_common.bookkeeping import TaskBookkeeping
from soorma_common.errors import TaskNotFound, VersionConflict
from soorma_common.events import (
    ACTION_REQUESTS,
    ACTION_RESULTS,
    NOTIFICATION_EVENTS,
    SYSTEM_EVENTS,
    EventEnvelope,
)
from soorma_common.memory import SubTaskRecord, SubTaskStatus, TaskContextRecord

if TYPE_CHECKING:
    from soorma.context import PlatformContext
    from soorma.memory import MemoryClient

logger = logging.getLogger("soorma.task")

HUMAN_INPUT_EVENT = "notification.human_input"
PROGRESS_EVENT = "task.progress"

SubTaskInfo = SubTaskRecord
"""Tracking info of one delegated sub-task (another name for ``SubTaskRecord``)."""


@dataclass(frozen=True, slots=True)
class DelegationSpec:
    """One request of a parallel delegation (fan-out).

    Attributes:
        event_type: Request event type, e.g. ``"sentiment.analyze"``.
        data: The request's own payload (specs sharing an event type keep their own).
        response_event: Event type the sub-agent answers with.
        topic: Topic of the request.
        response_topic: Topic of the answer.
    """

    event_type: str
    data: Mapping[str, Any]
    response_event: str
    topic: str = ACTION_REQUESTS
    response_topic: str = ACTION_RESULTS


def _memory(context: PlatformContext) -> MemoryClient:
    memory = context.memory
    if memory is None:
        raise RuntimeError(
            "this needs context.memory (the memory service); build the context with "
            "PlatformContext.from_env() and set SOORMA_MEMORY_URL"
        )
    return memory


def _failed(data: Mapping[str, Any]) -> bool:
    return data.get("success") is False or data.get("status") == "failed"


@dataclass(eq=False)
class TaskContext:
    """A worker task: what the caller asked, what was delegated, and how to answer.

    Attributes:
        task_id: Id of the task (the request event's id).
        event_type: The request's event type.
        plan_id: Plan the request belongs to.
        data: The request payload.
        correlation_id: The ORIGINAL caller's correlation id; the answer carries it.
        response_event: Event type the caller wants the answer as.
        response_topic: Topic of the answer.
        sub_tasks: Delegated sub-tasks by sub-task id (statuses and results).
        state: Task-specific state, saved with the context.
        session_id: Session of the request.
        tenant_id: Tenant of the caller.
        user_id: User of the caller.
        agent_id: The worker handling the task.
        version: Version of the stored context (0 before the first save).
    """

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
        cls, event: Event, context: PlatformContext, *, agent_id: str | None = None
    ) -> TaskContext:
        """The task a request event asks for (not yet saved)."""
        return cls(
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
    def from_record(cls, record: TaskContextRecord, context: PlatformContext) -> TaskContext:
        """Rebuild a task from its stored context."""
        meta = record.bookkeeping.model_dump()
        return cls(
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
    async def restore(cls, task_id: str, context: PlatformContext) -> TaskContext | None:
        """Load a saved task by id (``None`` when it does not exist, e.g. completed)."""
        record = await _memory(context).get_task_context(task_id)
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

    context = renamed_property("TaskContext", "context", "platform")
    finished = renamed_to_method("TaskContext", "finished", "is_finished")

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
        memory = _memory(self.platform)
        if not self._stored:
            record = self.to_record()
            self._absorb(await memory.store_task_context(self.task_id, self.plan_id, record))
            return

        async def write() -> None:
            self._absorb(
                await memory.replace_task_context(self.to_record(), expected_version=self.version)
            )

        async def reread() -> None:
            # Someone wrote meanwhile (a result, a claim): take their sub-tasks and
            # bookkeeping, keep our state and data, and try again.
            await self._refresh()
            if self._claimed_elsewhere():
                raise TaskNotFound(
                    f"task {self.task_id} is being finished by another claimant",
                    details={"task_id": self.task_id},
                )

        try:
            await retry_on_conflict(write, reread)
        except VersionConflict as exc:
            raise VersionConflict(
                f"could not save task {self.task_id}: too many concurrent writes"
            ) from exc

    async def _refresh(self) -> None:
        """Merge the stored context into this copy (``TaskNotFound`` if it is gone)."""
        fresh = await _memory(self.platform).get_task_context(self.task_id)
        if fresh is None:
            raise TaskNotFound(
                f"task context {self.task_id!r} no longer exists (finished?)",
                details={"task_id": self.task_id},
            )
        added_here = {k: v for k, v in self.sub_tasks.items() if k not in fresh.sub_tasks}
        self._meta = fresh.bookkeeping.model_dump()
        self.version = fresh.version
        self.sub_tasks = {**fresh.sub_tasks, **added_here}

    @staticmethod
    def _claimant() -> str | None:
        handled = current_event()
        return handled.id if handled is not None else None

    def _claimed_elsewhere(self) -> bool:
        marker = self._meta.get("finish")
        return marker is not None and marker.get("by") != self._claimant()

    # -- delegation ------------------------------------------------------------------

    async def delegate(
        self,
        event_type: str,
        data: Mapping[str, Any],
        response_event: str,
        *,
        topic: str = ACTION_REQUESTS,
        response_topic: str = ACTION_RESULTS,
    ) -> str:
        """Delegate one sub-task (sequential chaining); its answer reaches ``on_result``.

        The context is saved before the request is published, so the answer can never
        arrive before the worker knows about it.

        Returns:
            The sub-task id (the request's ``correlation_id``).
        """
        self._check_open()
        sub_task_id = str(uuid.uuid4())
        self.sub_tasks[sub_task_id] = SubTaskRecord(
            sub_task_id=sub_task_id,
            event_type=event_type,
            response_event=response_event,
        )
        request = self._remember_sent(
            self.platform.bus.build_event(
                topic,
                event_type,
                data,
                correlation_id=sub_task_id,
                response_event=response_event,
                response_topic=response_topic,
                plan_id=self.plan_id,
                session_id=self.session_id,
                event_id=sub_task_id,
            )
        )
        await self.save()
        await self.platform.bus.publish_event(request)
        return sub_task_id

    async def delegate_parallel(self, sub_tasks: Sequence[DelegationSpec]) -> str:
        """Delegate several sub-tasks at once (fan-out); fan in with ``on_result``.

        All sub-tasks are saved first, then the requests go out in one batch. Each spec
        is sent with its own ``data``, also when several share an event type.

        Returns:
            The ``parallel_group_id`` of this fan-out (see
            :meth:`aggregate_parallel_results`).

        Raises:
            ValueError: ``sub_tasks`` is empty.
        """
        self._check_open()
        specs = list(sub_tasks)
        if not specs:
            raise ValueError("delegate_parallel() needs at least one DelegationSpec")
        group_id = str(uuid.uuid4())
        ids = [str(uuid.uuid4()) for _ in specs]
        for sub_task_id, spec in zip(ids, specs, strict=True):
            self.sub_tasks[sub_task_id] = SubTaskRecord(
                sub_task_id=sub_task_id,
                event_type=spec.event_type,
                response_event=spec.response_event,
                parallel_group_id=group_id,
            )
        bus = self.platform.bus
        events = [
            self._remember_sent(
                bus.build_event(
                    spec.topic,
                    spec.event_type,
                    spec.data,
                    correlation_id=sub_task_id,
                    response_event=spec.response_event,
                    response_topic=spec.response_topic,
                    plan_id=self.plan_id,
                    session_id=self.session_id,
                    event_id=sub_task_id,
                    # The tracker's delegation groups (GET /v1/tracker/delegation-groups/{id}).
                    subject=f"delegation-group:{group_id}",
                )
            )
            for sub_task_id, spec in zip(ids, specs, strict=True)
        ]
        await self.save()
        await bus.publish_batch(events)
        return group_id

    def _remember_sent(self, request: EventEnvelope) -> EventEnvelope:
        """Keep what a re-send needs (saved before the request is sent): its topic,
        payload and answer topic; type and ids are in the sub-task already. Compact, as
        every fan-in result reads the whole context back."""
        kept: dict[str, Any] = {"data": request.data}
        if request.topic != ACTION_REQUESTS:
            kept["topic"] = request.topic
        if request.response_topic not in (None, ACTION_RESULTS):
            kept["response_topic"] = request.response_topic
        sent = dict(self._meta.get("sent") or {})
        sent[str(request.correlation_id)] = kept
        self._meta["sent"] = sent
        return request

    @property
    def has_sent(self) -> bool:
        """Whether this task delegated or asked something (recorded in its context)."""
        return bool(self._meta.get("sent"))

    async def resend_pending(self) -> int:
        """Publish again, under their original event ids, the requests this task sent
        whose answers have not arrived (a redelivered task whose handler already ran).

        Returns:
            How many requests were re-sent.
        """
        bus = self.platform.bus
        pending = [
            bus.build_event(
                str(kept.get("topic") or ACTION_REQUESTS),
                sub.event_type,
                kept.get("data") or {},
                correlation_id=sub_id,
                event_id=sub_id,
                response_event=sub.response_event,
                response_topic=kept.get("response_topic") or ACTION_RESULTS,
                plan_id=self.plan_id,
                session_id=self.session_id,
            )
            for sub_id, kept in dict(self._meta.get("sent") or {}).items()
            if (sub := self.sub_tasks.get(sub_id)) and sub.status is SubTaskStatus.PENDING
        ]
        if pending:
            await bus.publish_batch(pending)
        return len(pending)

    # -- fan-in ----------------------------------------------------------------------

    def update_sub_task_result(
        self,
        sub_task_id: str,
        result: Mapping[str, Any] | None,
        *,
        success: bool = True,
        error: str | None = None,
    ) -> None:
        """Record a result in this copy (``restore_task()`` already stored it atomically)."""
        sub = self.sub_tasks.get(sub_task_id)
        if sub is None:
            return
        status = SubTaskStatus.COMPLETED if success else SubTaskStatus.FAILED
        self.sub_tasks[sub_task_id] = sub.model_copy(
            update={
                "status": status,
                "result": None if result is None else dict(result),
                "error": error,
            }
        )

    def group_of(self, sub_task_id: str | None) -> str | None:
        """The ``parallel_group_id`` a sub-task was delegated in (``None`` if none).

        Use it in ``on_result`` to find the fan-out a result belongs to: unlike a group
        id saved in ``state`` after ``delegate_parallel()`` returns, it is stored before
        any request goes out, so even the fastest answer finds it.
        """
        sub = self.sub_tasks.get(sub_task_id or "")
        return None if sub is None else sub.parallel_group_id

    def group(self, parallel_group_id: str) -> list[SubTaskRecord]:
        """The sub-tasks of one fan-out, in delegation order."""
        return [s for s in self.sub_tasks.values() if s.parallel_group_id == parallel_group_id]

    def aggregate_parallel_results(self, parallel_group_id: str) -> dict[str, Any] | None:
        """All results of a fan-out once every sub-task has answered, else ``None``.

        Returns:
            ``{sub_task_id: result}`` in delegation order; a failed sub-task's entry is
            its answer (``success: false``), or ``{"success": False, "error": ...}``.
        """
        members = self.group(parallel_group_id)
        if not members or any(s.status is SubTaskStatus.PENDING for s in members):
            return None
        return {
            s.sub_task_id: s.result
            if s.result is not None
            else {"success": s.status is SubTaskStatus.COMPLETED, "error": s.error}
            for s in members
        }

    def all_sub_tasks_answered(self) -> bool:
        """True when no sub-task is still waiting for its answer."""
        return all(s.status is not SubTaskStatus.PENDING for s in self.sub_tasks.values())

    is_complete = renamed_method("TaskContext", "is_complete", "all_sub_tasks_answered")

    # -- answering -------------------------------------------------------------------

    async def complete(self, result: Any = None) -> bool:
        """Answer the caller with ``result`` and delete the context.

        Publishes ``{"task_id", "status": "completed", "success": true, "result"}`` as the
        caller's ``response_event`` on its ``response_topic`` with the caller's original
        ``correlation_id``. When several replicas try to complete the same task (racing
        fan-in results), exactly one does.

        Returns:
            True if this call answered the caller; False if another claimant did.
        """
        return await self._finish(
            {"task_id": self.task_id, "status": "completed", "success": True, "result": result}
        )

    async def fail(
        self, error: str | BaseException, *, reason: str | None = None, **details: Any
    ) -> bool:
        """Answer the caller with a failure (``status: failed``, ``success: false``).

        Args:
            error: What went wrong (the answer's ``error``).
            reason: A machine-readable cause (the answer's ``reason``, e.g.
                ``"hitl_timeout"``), for a state machine to route on.
            **details: Further fields of the answer.

        Returns:
            True if this call answered the caller; False if another claimant did.
        """
        message = str(error) or type(error).__name__
        payload: dict[str, Any] = {
            **details,
            "task_id": self.task_id,
            "status": "failed",
            "success": False,
            "error": message,
        }
        if reason is not None:
            payload["reason"] = reason
        return await self._finish(payload)

    async def _finish(self, payload: dict[str, Any]) -> bool:
        self._check_open()
        if not await self._claim():
            logger.info("task %s: already finished by another claimant", self.task_id)
            self._finished = True
            return False
        if self.response_event:
            bus = self.platform.bus
            answer = bus.inherit(
                bus.build_event(
                    self.response_topic,
                    self.response_event,
                    payload,
                    correlation_id=self.correlation_id or self.task_id,
                    plan_id=self.plan_id,
                    session_id=self.session_id,
                    event_id=answer_event_id(self.agent_id or "worker", self.task_id),
                )
            )
            answers = self._answers
            if answers is None and self.agent_id:
                answers = AnswerLog(self.agent_id)  # a task restored by hand
            if answers is not None:
                # Recorded before it is sent: the task's request, delivered again, is
                # answered with it instead of running again.
                answer = await answers.record(self.platform, self.task_id, answer)
            await bus.publish_event(answer)
        else:
            logger.warning(
                "task %s (%s) has no response_event; nobody can be answered",
                self.task_id,
                self.event_type,
            )
        if self._stored:
            await _memory(self.platform).delete_task_context(self.task_id)
        self._finished = True
        return True

    async def _claim(self) -> bool:
        """Mark the stored context as finishing with a versioned write; True if ours.

        The claimant is the event being handled, so a redelivery of the very event whose
        handler claimed the task (and then crashed before answering) may finish it.
        """
        if not self._stored:
            return True
        claimant = self._claimant() or f"direct-{uuid.uuid4()}"
        memory = _memory(self.platform)

        async def write() -> bool:
            marker = self._meta.get("finish")
            if marker is not None:
                return bool(marker.get("by") == claimant)
            self._meta["finish"] = {"by": claimant, "at": datetime.now(UTC).isoformat()}
            try:
                stored = await memory.replace_task_context(
                    self.to_record(), expected_version=self.version
                )
            except VersionConflict:
                self._meta.pop("finish", None)
                raise
            self._absorb(stored)
            return True

        try:
            return await retry_on_conflict(write, self._refresh)
        except TaskNotFound:
            return False
        except VersionConflict as exc:
            raise VersionConflict(
                f"could not claim task {self.task_id}: too many concurrent writes"
            ) from exc

    # -- progress and human input ----------------------------------------------------

    async def report_progress(
        self, progress: float, message: str | None = None, **details: Any
    ) -> str:
        """Publish ``task.progress`` on ``system-events`` (tracker, A2A ``working``).

        Args:
            progress: Fraction done, 0.0-1.0.
            message: Human-readable status.
            **details: Extra fields for the event's data.

        Returns:
            The event id.
        """
        if not 0.0 <= float(progress) <= 1.0:
            raise ValueError(f"progress is a fraction from 0.0 to 1.0, got {progress!r}")
        data = {
            "task_id": self.task_id,
            "event_type": self.event_type,
            "progress": float(progress),
            "message": message,
            **details,
        }
        return await self.platform.bus.publish(
            SYSTEM_EVENTS,
            PROGRESS_EVENT,
            data,
            correlation_id=self.correlation_id or self.task_id,
            plan_id=self.plan_id,
            session_id=self.session_id,
        )

    async def request_human_input(
        self,
        question: str,
        *,
        response_event: str,
        timeout_seconds: float,
        data: Mapping[str, Any] | None = None,
        response_topic: str = NOTIFICATION_EVENTS,
    ) -> str:
        """Ask a human (worker-level HITL, seed Q2); the answer resumes the task.

        Registers a sub-task, saves the context, then publishes
        ``notification.human_input`` on ``notification-events`` with the sub-task id as
        ``correlation_id``. Whoever answers publishes ``response_event`` on
        ``response_topic`` with that correlation id; register
        ``@worker.on_result(response_event, topic=response_topic)`` and call
        ``restore_task()`` there. Waiting is time-bound: the tracker fails the task with
        ``task.timeout`` when no answer comes before the deadline.

        Args:
            question: What to ask.
            response_event: Event type the answer comes as.
            timeout_seconds: How long the human has (required: worker HITL is time-bound).
            data: Extra context for the person answering.
            response_topic: Topic the answer comes on (``notification-events`` or
                ``action-results``).

        Returns:
            The sub-task id the answer must carry as ``correlation_id``.
        """
        self._check_open()
        if not timeout_seconds or timeout_seconds <= 0:
            raise ValueError("request_human_input() needs timeout_seconds > 0")
        sub_task_id = str(uuid.uuid4())
        deadline = datetime.now(UTC) + timedelta(seconds=timeout_seconds)
        self.sub_tasks[sub_task_id] = SubTaskRecord(
            sub_task_id=sub_task_id,
            event_type=HUMAN_INPUT_EVENT,
            response_event=response_event,
        )
        body = {
            **(data or {}),
            "question": question,
            "task_id": self.task_id,
            "sub_task_id": sub_task_id,
            "response_event": response_event,
            "response_topic": response_topic,
            "timeout_seconds": timeout_seconds,
            "deadline": deadline.isoformat(),
        }
        ask = self._remember_sent(
            self.platform.bus.build_event(
                NOTIFICATION_EVENTS,
                HUMAN_INPUT_EVENT,
                body,
                correlation_id=sub_task_id,
                response_event=response_event,
                response_topic=response_topic,
                plan_id=self.plan_id,
                session_id=self.session_id,
                event_id=sub_task_id,
            )
        )
        await self.save()
        await self.platform.bus.publish_event(ask)
        return sub_task_id


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
    def from_event(cls, event: Event, context: PlatformContext) -> ResultContext:
        """The result an answer event carries."""
        data = dict(event.data)
        error = data.get("error")
        return cls(
            event_type=event.type,
            correlation_id=event.correlation_id,
            data=data,
            success=not _failed(data),
            error=None if error is None else str(error),
            event=event,
            _context=context,
        )

    async def restore_task(self) -> TaskContext:
        """Record this result on its task and return the task, current as of now.

        The result is recorded through the memory service's atomic endpoint, which
        answers with the whole context: every result recorded before this one is in it,
        so ``aggregate_parallel_results()`` / ``all_sub_tasks_answered()`` are reliable even when
        results arrive at several replicas at once.

        Raises:
            TaskNotFound: no task owns this sub-task (it was completed or deleted); the
                worker acks such a late result instead of retrying it.
        """
        if self._task is not None:
            return self._task
        self.restore_attempted = True
        if self._context is None:
            raise RuntimeError("this ResultContext has no platform context")
        memory = _memory(self._context)
        cid = self.correlation_id
        owner = None if not cid else await memory.get_task_by_subtask(cid)
        if owner is None or cid is None:
            raise TaskNotFound(
                f"no task owns sub-task {cid!r} (finished already, or not delegated with "
                "task.delegate())",
                details={"sub_task_id": cid},
            )
        record = await memory.record_sub_task_result(
            owner.task_id,
            cid,
            result=self.data,
            status=SubTaskStatus.COMPLETED if self.success else SubTaskStatus.FAILED,
            error=self.error,
        )
        self._task = TaskContext.from_record(record, self._context)
        self._task._answers = self._answers
        return self._task


__all__ = [
    "HUMAN_INPUT_EVENT",
    "PROGRESS_EVENT",
    "DelegationSpec",
    "ResultContext",
    "SubTaskInfo",
    "TaskContext",
]
