"""The one AgentExecutor: an A2A task is a request on the bus, its answers update it.

``execute`` runs for three kinds of request (the handler prepares each):

- a new message: publish the skill's request (correlation id = task id), then turn the
  answers routed back by the :class:`~gateway_a2a.bridge.Bridge` into task updates until
  the task ends or asks for input;
- a message on a task in ``input-required``: publish it as the response event the agent
  asked for, then wait again;
- a resume: one answer that arrived for a task no executor waits for (after a restart),
  applied to the stored task.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from typing import Any

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types.a2a_pb2 import Message, Role, Task, TaskState, TaskStatus
from a2a.utils.errors import InternalError

from gateway_a2a.bridge import (
    ARTIFACT_EVENT,
    HUMAN_INPUT_EVENT,
    PROGRESS_EVENT,
    TIMEOUT_EVENT,
    Bridge,
)
from gateway_a2a.mapping import (
    agent_message,
    error_text,
    result_artifacts,
    result_state,
    to_part,
)
from gateway_a2a.request_state import GatewayRequest, request_state
from gateway_a2a.settings import Settings
from gateway_a2a.skills import Skill
from gateway_a2a.store import Route, RouteStore, route_values
from gateway_a2a.taskstore import GatewayTaskStore
from soorma.event import Event
from soorma_common.events import ACTION_RESULTS, NOTIFICATION_EVENTS

# A synthetic event (replicas.py): the task's replica stopped and no answer came.
ORPHAN_EVENT = "gateway.task.orphaned"


def _now_status(state: TaskState) -> TaskStatus:
    status = TaskStatus(state=state)
    status.timestamp.FromDatetime(datetime.now(UTC))
    return status


def _may_reply(context: RequestContext, skill: Skill) -> bool:
    """The agent may answer this request with a direct message (no task announced yet).

    Only on a blocking send without a push config: a non-blocking client, or a push
    receiver, needs the task at once.
    """
    if not skill.reply_either:
        return False
    config = context.configuration
    return config is None or not (
        config.return_immediately or config.HasField("task_push_notification_config")
    )


def _as_message(event: Event) -> bool:
    """The agent marked its answer as a direct message (``"reply": "message"``)."""
    return str(event.data.get("reply") or "").lower() == "message"


def _reply_message(data: dict[str, Any], context_id: str) -> Message:
    """A direct agent message from an answer: the result's parts, or the error text."""
    if result_state(data) == TaskState.TASK_STATE_COMPLETED:
        parts = [p for a in result_artifacts(data.get("result")) for p in a.parts]
        note = data.get("message")
        if not parts and isinstance(note, str) and note:
            parts = list(agent_message(note, "", "", "x").parts)
    else:
        parts = list(agent_message(error_text(data), "", "", "x").parts)
    return Message(
        message_id=str(uuid.uuid4()), context_id=context_id, role=Role.ROLE_AGENT, parts=parts
    )


class BusAgentExecutor(AgentExecutor):
    """Bridges A2A tasks to the event bus (see the module docstring)."""

    def __init__(
        self, settings: Settings, bridge: Bridge, routes: RouteStore, tasks: GatewayTaskStore
    ) -> None:
        self.settings = settings
        self.bridge = bridge
        self.routes = routes
        self.tasks = tasks

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        state = request_state(context.call_context)
        task_id = str(context.task_id)
        context_id = str(context.context_id)
        updater = TaskUpdater(event_queue, task_id, context_id)
        if state.resume is not None:
            await self._handle(updater, task_id, state.resume)
            return
        if context.current_task is None:
            skill = state.skill
            if skill is None:
                raise InternalError(message="no skill resolved for a new task")
            if skill.reply_message:
                await self._reply_with_message(context, event_queue, skill, state)
            else:
                await self._start(
                    context,
                    event_queue,
                    updater,
                    skill,
                    state,
                    announce=not _may_reply(context, skill),
                )
            return
        await self._answer(context, updater, state)

    # -- new task --------------------------------------------------------------------

    async def _start(
        self,
        context: RequestContext,
        event_queue: EventQueue,
        updater: TaskUpdater,
        skill: Skill,
        state: GatewayRequest,
        *,
        announce: bool = True,
    ) -> None:
        """Publish the request and follow the task.

        ``announce=False`` (a skill whose agent chooses the reply per request, on a
        blocking send): the task is announced only with the agent's first event, so an
        answer marked ``"reply": "message"`` becomes a direct message and no task.
        """
        task_id, context_id = str(context.task_id), str(context.context_id)
        tenant, user = str(state.tenant_id), state.user_id or ""
        message = context.message
        submitted = Task(
            id=task_id,
            context_id=context_id,
            status=_now_status(TaskState.TASK_STATE_SUBMITTED),
            history=[message] if message is not None else [],
        )
        route = Route(
            task_id=task_id,
            tenant_id=tenant,
            user_id=user,
            context_id=context_id,
            skill=skill.id,
            request_event=skill.event,
            replica=self.bridge.replica,
        )
        # A blocking send's route is written with its task (GatewayTaskStore).
        if not self.tasks.defer_route(context.call_context, task_id, route_values(route)):
            await self.routes.insert(route)
        queue = self.bridge.wait_for(task_id, tenant)
        try:
            # The route is stored (an answer arriving after a restart finds its task) and
            # this executor waits before anyone learns the task id: the SDK's consumer
            # stores the announced task and only then answers a non-blocking send. An
            # event naming the task earlier would find no route, and every replica would
            # remember the id as not a gateway task (Bridge.route).
            if announce:
                await event_queue.enqueue_event(submitted)
            await self.bridge.ensure(tenant)
            await self.bridge.publish(
                tenant,
                skill.topic,
                skill.event,
                state.payload or {},
                user_id=user or None,
                event_id=task_id,
                correlation_id=task_id,
                response_event=self.settings.gateway_response_event,
                response_topic=ACTION_RESULTS,
                session_id=context_id,
            )
            if not announce:
                first = await queue.get()
                if first.type == self.settings.gateway_response_event and _as_message(first):
                    await event_queue.enqueue_event(_reply_message(first.data, context_id))
                    if not self.tasks.forget(task_id):
                        await self.routes.update(task_id, finished=True)
                    return
                await event_queue.enqueue_event(submitted)
                if await self._handle(updater, task_id, first):
                    return
            # No separate "working" write: the agent's first progress (or its answer)
            # moves the task on; submitted -> completed is a valid transition.
            await self._wait(updater, task_id, queue)
        finally:
            self.bridge.stop_waiting(task_id)

    async def _reply_with_message(
        self,
        context: RequestContext,
        event_queue: EventQueue,
        skill: Skill,
        state: GatewayRequest,
    ) -> None:
        """An agent that answers with messages: no task, one agent message back."""
        request_id = str(uuid.uuid4())
        tenant, user = str(state.tenant_id), state.user_id or ""
        queue = self.bridge.wait_for(request_id, tenant)
        try:
            await self.bridge.ensure(tenant)
            await self.bridge.publish(
                tenant,
                skill.topic,
                skill.event,
                state.payload or {},
                user_id=user or None,
                correlation_id=request_id,
                response_event=self.settings.gateway_response_event,
                response_topic=ACTION_RESULTS,
                session_id=str(context.context_id),
            )
            while True:
                event = await queue.get()
                if event.type == self.settings.gateway_response_event:
                    break
        finally:
            self.bridge.stop_waiting(request_id)
        await event_queue.enqueue_event(_reply_message(event.data, str(context.context_id)))

    # -- answer to input-required ------------------------------------------------------

    async def _answer(
        self, context: RequestContext, updater: TaskUpdater, state: GatewayRequest
    ) -> None:
        task_id = str(context.task_id)
        route = await self.routes.get(task_id)
        if route is None or not route.awaiting_event or not route.awaiting_correlation:
            raise InternalError(message=f"task {task_id} is not waiting for input")
        queue = self.bridge.wait_for(task_id, route.tenant_id)
        try:
            await self.routes.update(
                task_id,
                replica=self.bridge.replica,
                awaiting_event=None,
                awaiting_topic=None,
                awaiting_correlation=None,
            )
            await self.bridge.ensure(route.tenant_id)
            await self.bridge.publish(
                route.tenant_id,
                route.awaiting_topic or NOTIFICATION_EVENTS,
                route.awaiting_event,
                state.answer or {},
                user_id=state.user_id or None,
                correlation_id=route.awaiting_correlation,
                session_id=route.context_id,
            )
            await updater.start_work()
            await self._wait(updater, task_id, queue)
        finally:
            self.bridge.stop_waiting(task_id)

    # -- answers -----------------------------------------------------------------------

    async def _wait(self, updater: TaskUpdater, task_id: str, queue: asyncio.Queue[Event]) -> None:
        while True:
            event = await queue.get()
            if await self._handle(updater, task_id, event):
                return

    async def _handle(self, updater: TaskUpdater, task_id: str, event: Event) -> bool:
        """Apply one answer; True when the executor is done (ended or waiting for input)."""
        data = event.data
        message_id = str(uuid.uuid4())
        if event.type == PROGRESS_EVENT:
            progress = data.get("progress")
            text = data.get("message") or (
                f"{float(progress):.0%} done" if isinstance(progress, int | float) else "working"
            )
            await updater.update_status(
                TaskState.TASK_STATE_WORKING,
                message=agent_message(str(text), task_id, updater.context_id, message_id),
                metadata={"progress": progress} if progress is not None else None,
            )
            return False
        if event.type == ARTIFACT_EVENT:
            await self._artifact(updater, data)
            return False
        if event.type == HUMAN_INPUT_EVENT:
            await self._update_route(
                task_id,
                awaiting_event=data.get("response_event") or event.response_event,
                awaiting_topic=data.get("response_topic") or NOTIFICATION_EVENTS,
                awaiting_correlation=event.correlation_id or data.get("sub_task_id"),
            )
            question = str(data.get("question") or "input required")
            details: dict[str, Any] = {
                k: data[k] for k in ("deadline", "timeout_seconds") if k in data
            }
            await updater.update_status(
                TaskState.TASK_STATE_INPUT_REQUIRED,
                message=agent_message(question, task_id, updater.context_id, message_id),
                metadata=details or None,
            )
            return True
        if event.type == ORPHAN_EVENT:
            await self._update_route(task_id, finished=True)
            await updater.failed(
                agent_message(
                    str(data.get("reason") or "the gateway replica running this task stopped"),
                    task_id,
                    updater.context_id,
                    message_id,
                )
            )
            return True
        if event.type == TIMEOUT_EVENT:
            await self._update_route(task_id, finished=True)
            await updater.failed(
                agent_message(
                    f"no input before the deadline ({data.get('reason') or 'timeout'})",
                    task_id,
                    updater.context_id,
                    message_id,
                )
            )
            return True
        if event.type != self.settings.gateway_response_event:
            return False
        state = result_state(data)
        for artifact in result_artifacts(data.get("result")):
            await updater.add_artifact(
                list(artifact.parts),
                artifact_id=artifact.artifact_id,
                name=artifact.name,
            )
        # The route stays "unfinished": one write less per task; a late event for an
        # ended task finds the stored task terminal and is dropped (handler.resume).
        if state == TaskState.TASK_STATE_COMPLETED:
            note = data.get("message")
            await updater.complete(
                agent_message(note, task_id, updater.context_id, message_id)
                if isinstance(note, str) and note
                else None
            )
        else:
            reason = agent_message(error_text(data), task_id, updater.context_id, message_id)
            await (
                updater.reject(reason)
                if state == TaskState.TASK_STATE_REJECTED
                else updater.failed(reason)
            )
        return True

    @staticmethod
    async def _artifact(updater: TaskUpdater, data: dict[str, Any]) -> None:
        """An artifact, or one chunk of it, while the task runs (streamed to the client).

        ``parts`` as in a result's artifacts (a string is a text part); ``append`` adds
        the parts to the artifact of the same ``artifact_id`` (partial text streams so);
        ``last_chunk`` says it is complete.
        """
        parts = data.get("parts")
        specs = parts if isinstance(parts, list) else [parts] if parts is not None else []
        if not specs:
            return
        name = data.get("name")
        await updater.add_artifact(
            [to_part(spec) for spec in specs],
            artifact_id=str(data.get("artifact_id") or "output"),
            name=str(name) if name else None,
            append=bool(data.get("append")),
            last_chunk=bool(data.get("last_chunk")),
        )

    async def _update_route(self, task_id: str, **values: Any) -> None:
        if not await self.tasks.update_route(task_id, values):
            await self.routes.update(task_id, **values)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id = str(context.task_id)
        self.bridge.stop_waiting(task_id)
        await TaskUpdater(event_queue, task_id, str(context.context_id)).cancel()
