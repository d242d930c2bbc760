"""a2a-sdk's default request handler, extended at its own seams for the bus.

- ``SendMessage``/``SendStreamingMessage`` resolve the skill and validate the payload
  *before* the SDK creates anything: a message that does not fit is answered with
  ``-32602`` naming the field, and nothing is stored or published.
- Before that, the SDK's own required-field check runs (it would run only after the
  registry lookup otherwise), and a message without parts, or a part without content, is
  ``-32602``; a registry or event service the gateway cannot reach is
  :class:`~gateway_a2a.errors.DependencyUnavailableError` (HTTP 503 / ``-32603`` naming
  the service), never a bare 500.
- ``CancelTask`` publishes the cancel event once the SDK recorded ``canceled`` (locally
  or, for a task this replica does not run, in the shared store).
- A new message whose ``messageId`` this tenant already sent in the same ``contextId``
  is a retry: it gets the first send's task back (a blocking retry waits for it, a
  streaming one subscribes to it) and nothing is published again
  (:class:`~gateway_a2a.store.MessageIdStore`, shared by the replicas).
- :meth:`resume` applies an answer for a task no executor on this replica waits for.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncGenerator
from typing import Any

from a2a.server.agent_execution import RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.request_handlers.request_handler import validate_request_params
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    Message,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import (
    A2AError,
    InvalidParamsError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from google.protobuf.json_format import MessageToDict

from gateway_a2a.bridge import Bridge
from gateway_a2a.errors import unavailable
from gateway_a2a.mapping import MESSAGE_KEY, message_record, narrow, request_payload
from gateway_a2a.pushpolicy import SETTING as PUSH_SETTING
from gateway_a2a.pushpolicy import PushPolicy
from gateway_a2a.request_state import MessageIdClaim, request_state
from gateway_a2a.routing import message_text
from gateway_a2a.settings import Settings
from gateway_a2a.skills import Skill, SkillCatalog
from gateway_a2a.store import MessageIdStore, Route, RouteStore, tenant_context, tenant_of
from gateway_a2a.taskstore import NewTaskIdBuilder
from soorma.event import Event as BusEvent
from soorma_common.errors import ServiceUnavailable
from soorma_common.events import SYSTEM_EVENTS

_SDK_SEND = DefaultRequestHandler.on_message_send.__wrapped__
TERMINAL = {
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_REJECTED,
}
# Where a blocking send returns: terminal, or waiting for the client.
SETTLED = TERMINAL | {TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED}
# A retry through another replica may arrive before the first send stored its task.
RETRY_LOOKUPS = 40
RETRY_LOOKUP_SECONDS = 0.05


class GatewayRequestHandler(DefaultRequestHandler):
    """See the module docstring."""

    def __init__(
        self,
        *args: Any,
        settings: Settings,
        catalog: SkillCatalog,
        bridge: Bridge,
        routes: RouteStore,
        message_ids: MessageIdStore,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, request_context_builder=NewTaskIdBuilder(self._new_task), **kwargs)
        self.settings = settings
        self.catalog = catalog
        self.bridge = bridge
        self.routes = routes
        self.message_ids = message_ids

    async def _prepare(self, params: SendMessageRequest, context: ServerCallContext) -> None:
        message = params.message
        tenant = tenant_of(context)
        _check_parts(message)
        if message.task_id:
            stored = await self._versioned_store.get(message.task_id, context)
            if stored is None:
                raise TaskNotFoundError(message=f"task {message.task_id} not found")
            task = stored.task
            state = TaskState.Name(task.status.state)
            if task.status.state in TERMINAL:
                raise UnsupportedOperationError(
                    message=f"task {task.id} is {state}: a terminal task takes no more messages"
                )
            if task.status.state != TaskState.TASK_STATE_INPUT_REQUIRED:
                raise UnsupportedOperationError(
                    message=f"task {task.id} is {state}: send a message to it only when it "
                    "is TASK_STATE_INPUT_REQUIRED",
                )
            if params.configuration.HasField("task_push_notification_config"):
                self._forget_push_configs(message.task_id)
            if not message.context_id:
                # The task's context (the client may leave it out on a follow-up).
                message.context_id = task.context_id
            request_state(context).answer = _answer_payload(message)
            await self._require_bus(tenant)
            return
        metadata = narrow(MessageToDict(message.metadata)) if message.metadata else {}
        try:
            skill = await self.catalog.resolve(
                tenant,
                metadata,
                agent=request_state(context).agent,
                default=self.settings.gateway_default_skill,
                text=lambda: _words_of(message),
                fits=lambda candidate: _takes(message, candidate),
            )
        except ServiceUnavailable as exc:
            raise unavailable("registry", exc) from exc
        state = request_state(context)
        state.skill = skill
        state.payload = request_payload(message, skill.id, skill.schema)
        await self._require_bus(tenant)
        if (
            message.context_id
            and message.message_id
            and not skill.reply_message
            and not skill.reply_either
        ):
            await self._claim_message_id(tenant, message, context)

    async def _claim_message_id(
        self, tenant: str, message: Message, context: ServerCallContext
    ) -> None:
        """A message id seen before in this context is a retry: it gets the task back."""
        wanted = str(uuid.uuid4())
        task_id = await self.message_ids.claim(
            tenant, message.context_id, message.message_id, wanted
        )
        state = request_state(context)
        if task_id != wanted:
            state.retry_of = task_id
            return
        state.preset_task_id = task_id
        state.claim = MessageIdClaim(tenant, message.context_id, message.message_id, task_id)

    async def _release_message_id(self, context: ServerCallContext) -> None:
        state = request_state(context)
        claim, state.claim = state.claim, None
        if claim is not None:
            await self.message_ids.release(
                claim.tenant_id, claim.context_id, claim.message_id, claim.task_id
            )

    async def _retried_task(self, task_id: str, context: ServerCallContext) -> Task:
        """The task a retried message started (written by its replica moments ago)."""
        for _ in range(RETRY_LOOKUPS):
            stored = await self._versioned_store.get(task_id, context)
            if stored is not None:
                return stored.task
            await asyncio.sleep(RETRY_LOOKUP_SECONDS)
        raise TaskNotFoundError(message=f"task {task_id} of this message id is not stored")

    async def _answer_retry(
        self, task_id: str, params: SendMessageRequest, context: ServerCallContext
    ) -> Task:
        task = await self._retried_task(task_id, context)
        if params.configuration.return_immediately or task.status.state in SETTLED:
            return task
        # A blocking send: wait, as the first send does, until the task settles.
        with contextlib.suppress(UnsupportedOperationError):  # it ended meanwhile
            async for _ in self.on_subscribe_to_task(SubscribeToTaskRequest(id=task_id), context):
                pass
        return await self._retried_task(task_id, context)

    async def _require_bus(self, tenant: str) -> None:
        """The answer stream is open (so a publish can be answered), else 503."""
        try:
            await self.bridge.ensure(tenant, self.settings.gateway_bus_ready_timeout_seconds)
        except TimeoutError as exc:
            raise unavailable(
                "event service",
                ServiceUnavailable(f"no answer stream from {self.settings.event_service_url}"),
            ) from exc

    @validate_request_params
    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Message | Task:
        await self._prepare(params, context)
        state = request_state(context)
        duplicate = state.retry_of
        if duplicate:
            return await self._answer_retry(duplicate, params, context)
        config = params.configuration
        if (
            not params.message.task_id
            and not config.return_immediately
            and not config.HasField("task_push_notification_config")
            and state.claim is None
        ):
            # The client learns the task id only with the answer: write the task once.
            # (Not with a push config: its receiver learns the id at once; nor when a
            # retry of the message may reach another replica, which must find the task.)
            state.defer_writes = True
        try:
            # The SDK's method without its decorator: the parameters were validated above.
            return await _SDK_SEND(self, params, context)
        except ServiceUnavailable as exc:
            await self._release_message_id(context)
            raise unavailable("event service", exc) from exc
        except A2AError:
            await self._release_message_id(context)
            raise

    @validate_request_params
    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event, None]:
        await self._prepare(params, context)
        duplicate = request_state(context).retry_of
        if duplicate:
            task = await self._retried_task(duplicate, context)
            if task.status.state in SETTLED:
                yield task
                return
            streamed = False
            try:
                async for event in self.on_subscribe_to_task(
                    SubscribeToTaskRequest(id=duplicate), context
                ):
                    streamed = True
                    yield event
            except UnsupportedOperationError:
                if streamed:
                    raise
                yield await self._retried_task(duplicate, context)  # it ended meanwhile
            return
        try:
            async for event in super().on_message_send_stream(params, context):
                yield event
        except ServiceUnavailable as exc:
            await self._release_message_id(context)
            raise unavailable("event service", exc) from exc
        except A2AError:
            await self._release_message_id(context)
            raise

    async def on_cancel_task(
        self, params: CancelTaskRequest, context: ServerCallContext
    ) -> Task | None:
        task = await super().on_cancel_task(params, context)
        route = await self.routes.get(params.id)
        if route is not None:
            self.bridge.stop_waiting(params.id)
            await self.routes.update(params.id, finished=True)
            await self.bridge.publish(
                route.tenant_id,
                SYSTEM_EVENTS,
                self.settings.gateway_cancel_event,
                {
                    "task_id": params.id,
                    "reason": "canceled by the A2A client",
                    "event_type": route.request_event,
                },
                correlation_id=params.id,
                session_id=route.context_id,
            )
        return task

    async def _reject_unsafe_push_url(self, url: str) -> None:
        """A refused push URL is ``-32602`` naming the rule and the setting."""
        policy = self._push_url_validator
        if not isinstance(policy, PushPolicy):
            await super()._reject_unsafe_push_url(url)
            return
        reason = await policy.refusal(url)
        if reason is not None:
            raise InvalidParamsError(message=reason, data={"field": "url", "setting": PUSH_SETTING})

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        created = await super().on_create_task_push_notification_config(params, context)
        self._forget_push_configs(params.task_id)
        return created

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        await super().on_delete_task_push_notification_config(params, context)
        self._forget_push_configs(params.task_id)

    def _new_task(self, task_id: str, params: SendMessageRequest) -> None:
        """No push config read for a task created without one (the request sets it)."""
        configs = getattr(self._push_sender, "configs", None)
        if configs is not None and not params.configuration.HasField(
            "task_push_notification_config"
        ):
            configs.none_yet(task_id)

    def _forget_push_configs(self, task_id: str) -> None:
        configs = getattr(self._push_sender, "configs", None)
        if configs is not None:
            configs.forget(task_id)

    async def resume(self, route: Route, event: BusEvent) -> None:
        """Apply ``event`` to a task no executor here waits for (the SDK's own path)."""
        context = tenant_context(route.tenant_id, route.user_id)
        request_state(context).resume = event
        try:
            active = await self._active_task_registry.get_or_create(
                route.task_id, call_context=context, create_task_if_missing=False
            )
            await active.enqueue_request(
                RequestContext(
                    call_context=context,
                    task_id=route.task_id,
                    context_id=route.context_id,
                )
            )
        except (TaskNotFoundError, UnsupportedOperationError):
            await self.routes.update(route.task_id, finished=True)
        except A2AError:
            raise


def _words_of(message: Message) -> str:
    record = message_record(message)
    return message_text([record["text"]] if record["text"] else [], record["data"])


def _takes(message: Message, skill: Skill) -> bool:
    """Whether ``skill``'s input schema takes ``message`` (a candidate for matching)."""
    try:
        request_payload(message, skill.id, skill.schema)
    except InvalidParamsError:
        return False
    return True


def _check_parts(message: Message) -> None:
    """A message carries at least one part, and every part has content."""
    if not message.parts:
        raise InvalidParamsError(
            message="message.parts is empty: send at least one text, data, url or raw part",
            data={"field": "message.parts"},
        )
    for index, part in enumerate(message.parts):
        if part.WhichOneof("content") is None:
            raise InvalidParamsError(
                message=f"message.parts[{index}] has no content: give it one of text, data, "
                "url or raw",
                data={"field": f"message.parts[{index}]"},
            )


def _answer_payload(message: Message) -> dict[str, Any]:
    """What a human's answer publishes: its data parts, its text, and the message."""
    record = message_record(message)
    payload: dict[str, Any] = {}
    for item in record["data"]:
        if isinstance(item, dict):
            payload.update(item)
    if record["text"] is not None:
        payload.setdefault("text", record["text"])
    if not payload:
        raise InvalidParamsError(
            message="the answer has no text or data part", data={"field": "message.parts"}
        )
    payload[MESSAGE_KEY] = record
    return payload
