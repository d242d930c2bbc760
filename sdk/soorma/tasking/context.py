"""TaskContext: a worker task's delegation, fan-in, answer, progress and human input.

The persistence half (building, saving, claiming) is :class:`~soorma.tasking.stored.
StoredTask`; this module adds what a handler does with a task. (Slightly over 400
lines: each public method documents when its requests are saved and re-sent.)
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from soorma.agents._answers import DEFAULT_ANSWER_RETENTION, AnswerLog, answer_event_id
from soorma.tasking.stored import StoredTask, task_memory
from soorma_common.errors import describe_exception
from soorma_common.events import (
    ACTION_REQUESTS,
    ACTION_RESULTS,
    HUMAN_INPUT,
    NOTIFICATION_EVENTS,
    SYSTEM_EVENTS,
    TASK_ARTIFACT,
    TASK_PROGRESS,
    EventEnvelope,
)
from soorma_common.memory import SubTaskRecord, SubTaskStatus

if TYPE_CHECKING:
    pass

logger = logging.getLogger("soorma.task")


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


@dataclass(eq=False)
class TaskContext(StoredTask):
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
        request = self._sub_request(
            sub_task_id, topic, event_type, data, response_event, response_topic
        )
        await self._save_before_sending()
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
        events = [
            self._sub_request(
                sub_task_id,
                spec.topic,
                spec.event_type,
                spec.data,
                spec.response_event,
                spec.response_topic,
                # The tracker's delegation groups (GET /v1/tracker/delegation-groups/{id}).
                subject=f"delegation-group:{group_id}",
            )
            for sub_task_id, spec in zip(ids, specs, strict=True)
        ]
        await self._save_before_sending()
        await self.platform.bus.publish_batch(events)
        return group_id

    async def _save_before_sending(self) -> None:
        """Save the context before its requests go out. A memory service that is down
        is waited out (``record_wait``), the requests held: the handler that delegated
        does not run again for an outage."""
        answers = self._recorder()
        await answers.hold(f"the requests of task {self.task_id}", self.save)

    def _recorder(self) -> AnswerLog:
        """The worker's answer log (or, for a task restored by hand, its own)."""
        if self._answers is None:
            # Without an agent, answers are not recorded (there is no key to find them).
            retention = DEFAULT_ANSWER_RETENTION if self.agent_id else 0.0
            self._answers = AnswerLog(self.agent_id or "worker", retention, kind="worker")
        return self._answers

    def _sub_request(
        self,
        sub_task_id: str,
        topic: str,
        event_type: str,
        data: Mapping[str, Any] | None,
        response_event: str,
        response_topic: str | None,
        *,
        subject: str | None = None,
    ) -> EventEnvelope:
        """The request of sub-task ``sub_task_id`` (its id is the event's and the
        correlation id), remembered for a re-send."""
        return self._remember_sent(
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
                subject=subject,
            )
        )

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

    # -- answering -------------------------------------------------------------------

    async def complete(
        self, result: Any = None, *, message: str | None = None, as_message: bool = False
    ) -> bool:
        """Answer the caller with ``result`` and delete the context.

        Publishes ``{"task_id", "status": "completed", "success": true, "result"}`` as the
        caller's ``response_event`` on its ``response_topic`` with the caller's original
        ``correlation_id``. When several replicas try to complete the same task (racing
        fan-in results), exactly one does.

        Args:
            result: The answer's ``result``.
            message: A closing note for a human (the answer's ``message``; the A2A
                gateway shows it as the completed task's status message).
            as_message: Answer an A2A client with a direct message (the result's parts)
                instead of a task (the answer's ``"reply": "message"``), for a skill
                whose input schema says ``"x-a2a-reply": "either"``; a client that asked
                not to wait still gets a task.

        Returns:
            True if this call answered the caller; False if another claimant did.
        """
        payload: dict[str, Any] = {
            "task_id": self.task_id,
            "status": "completed",
            "success": True,
            "result": result,
        }
        if message is not None:
            payload["message"] = message
        if as_message:
            payload["reply"] = "message"
        return await self._finish(payload)

    async def reject(self, reason: str) -> bool:
        """Decline the task without trying it (``status: rejected``, ``success: false``).

        Unlike :meth:`fail`, nothing went wrong: the agent will not do this task (out of
        scope, not allowed). The A2A gateway ends the task ``rejected`` with ``reason`` as
        its status message.

        Returns:
            True if this call answered the caller; False if another claimant did.
        """
        return await self._finish(
            {"task_id": self.task_id, "status": "rejected", "success": False, "reason": reason}
        )

    async def fail(
        self, error: str | BaseException, *, reason: str | None = None, **details: Any
    ) -> bool:
        """Answer the caller with a failure (``status: failed``, ``success: false``).

        Args:
            error: What went wrong (the answer's ``error``). An exception gives its
                text led by its class name when the text says nothing
                (``KeyError: 'topic'``), and its class name as ``error_type``.
            reason: A machine-readable cause (the answer's ``reason``, e.g.
                ``"hitl_timeout"``), for a state machine to route on.
            **details: Further fields of the answer.

        Returns:
            True if this call answered the caller; False if another claimant did.
        """
        payload: dict[str, Any] = {
            **details,
            "task_id": self.task_id,
            "status": "failed",
            "success": False,
            "error": describe_exception(error) if isinstance(error, BaseException) else error,
        }
        if isinstance(error, BaseException):
            payload["error_type"] = type(error).__name__
        if reason is not None:
            payload["reason"] = reason
        return await self._finish(payload)

    async def _finish(self, payload: dict[str, Any]) -> bool:
        self._check_open()
        answers = self._recorder()
        # Each write before the answer goes out waits out a memory outage (held, the
        # request still leased) instead of running the handler again.
        if not await answers.hold(f"the claim of task {self.task_id}", self._claim):
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
            memory = task_memory(self.platform)
            await answers.hold(
                f"the end of task {self.task_id}",
                lambda: memory.delete_task_context(self.task_id),
            )
        self._finished = True
        return True

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
            TASK_PROGRESS,
            data,
            correlation_id=self.correlation_id or self.task_id,
            plan_id=self.plan_id,
            session_id=self.session_id,
        )

    async def send_artifact(
        self,
        *parts: Any,
        artifact_id: str = "output",
        name: str | None = None,
        append: bool = False,
        last_chunk: bool = False,
    ) -> str:
        """Publish an artifact, or a chunk of one, before the task ends (``task.artifact``).

        It goes on the caller's response topic, the topic of the answer, so it arrives
        before the answer (a stream keeps its order). An A2A client streaming the task
        sees it at once. Call it with ``append=True``
        for each further chunk of the same ``artifact_id`` (e.g. an LLM's partial text)
        and ``last_chunk=True`` on the last.

        Args:
            *parts: Each a string (text) or a dict as in a result's artifacts
                (``{"text"}``, ``{"data"}``, ``{"url", "media_type", "filename"}``,
                ``{"bytes", "media_type", "filename"}``).
            artifact_id: Which artifact the parts belong to.
            name: The artifact's name.
            append: Add the parts to what was sent under ``artifact_id``.
            last_chunk: This is the artifact's last chunk.

        Returns:
            The event id.
        """
        if not parts:
            raise ValueError("send_artifact needs at least one part")
        data: dict[str, Any] = {
            "task_id": self.task_id,
            "event_type": self.event_type,
            "artifact_id": artifact_id,
            "parts": list(parts),
            "append": append,
            "last_chunk": last_chunk,
        }
        if name is not None:
            data["name"] = name
        return await self.platform.bus.publish(
            self.response_topic or SYSTEM_EVENTS,
            TASK_ARTIFACT,
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
        """Ask a human (worker-level HITL); the answer resumes the task.

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
            event_type=HUMAN_INPUT,
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
        ask = self._sub_request(
            sub_task_id,
            NOTIFICATION_EVENTS,
            HUMAN_INPUT,
            body,
            response_event,
            response_topic,
        )
        await self._save_before_sending()
        await self.platform.bus.publish_event(ask)
        return sub_task_id
