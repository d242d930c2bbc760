"""The seed's early shape: ``POST /tasks/send`` with an ``A2ATask`` -> ``A2ATaskResponse``.

A thin alias over the same request handler as the A2A bindings (same skills, auth,
validation and tasks): the legacy task is sent as a blocking ``SendMessage``.
"""

from __future__ import annotations

import uuid
from typing import Any

from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest, Task, TaskState
from a2a.utils.errors import A2AError, InvalidParamsError, TaskNotFoundError
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.struct_pb2 import Struct, Value
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response

from gateway_a2a.auth import TenantContextBuilder
from gateway_a2a.handler import GatewayRequestHandler
from gateway_a2a.mapping import narrow
from servicekit.errors import error_response
from servicekit.jsonresp import ORJSONResponse
from soorma_common.a2a import A2AMessage, A2APart, A2ATask, A2ATaskResponse, A2ATaskStatus

_STATUS = {
    TaskState.TASK_STATE_SUBMITTED: A2ATaskStatus.SUBMITTED,
    TaskState.TASK_STATE_WORKING: A2ATaskStatus.WORKING,
    TaskState.TASK_STATE_INPUT_REQUIRED: A2ATaskStatus.INPUT_REQUIRED,
    TaskState.TASK_STATE_COMPLETED: A2ATaskStatus.COMPLETED,
    TaskState.TASK_STATE_FAILED: A2ATaskStatus.FAILED,
    TaskState.TASK_STATE_CANCELED: A2ATaskStatus.CANCELED,
    TaskState.TASK_STATE_REJECTED: A2ATaskStatus.REJECTED,
}


def _part(part: A2APart) -> Part:
    if part.type == "text":
        return Part(text=part.text or "", media_type=part.mimeType or "")
    if part.type == "data":
        return Part(data=ParseDict(part.data or {}, Value()), media_type=part.mimeType or "")
    return Part(url=part.text or "", media_type=part.mimeType or "")


def _legacy_part(part: Part) -> A2APart:
    if part.HasField("text"):
        return A2APart(type="text", text=part.text, mimeType=part.media_type or None)
    if part.HasField("data"):
        value = narrow(MessageToDict(part.data))
        return A2APart(
            type="data",
            data=value if isinstance(value, dict) else {"value": value},
            mimeType=part.media_type or None,
        )
    return A2APart(type="file", text=part.url or None, mimeType=part.media_type or None)


def _response(legacy: A2ATask, task: Task | Message) -> A2ATaskResponse:
    if isinstance(task, Message):
        return A2ATaskResponse(
            id=legacy.id,
            sessionId=task.context_id or legacy.sessionId,
            status=A2ATaskStatus.COMPLETED,
            message=A2AMessage(role="agent", parts=[_legacy_part(p) for p in task.parts]),
        )
    status = _STATUS.get(task.status.state, A2ATaskStatus.WORKING)
    parts = [_legacy_part(p) for a in task.artifacts for p in a.parts]
    status_text = [p.text for p in task.status.message.parts if p.HasField("text")]
    if not parts and status_text:
        parts = [A2APart(type="text", text="\n".join(status_text))]
    error = (
        "\n".join(status_text) or None
        if status in (A2ATaskStatus.FAILED, A2ATaskStatus.REJECTED, A2ATaskStatus.CANCELED)
        else None
    )
    return A2ATaskResponse(
        id=legacy.id,
        sessionId=task.context_id,
        status=status,
        message=A2AMessage(role="agent", parts=parts) if parts else None,
        error=error,
    )


class LegacyEndpoint:
    """``POST /tasks/send``."""

    def __init__(self, handler: GatewayRequestHandler) -> None:
        self.handler = handler
        self.contexts = TenantContextBuilder()

    async def send(self, request: Request) -> Response:
        try:
            legacy = A2ATask.model_validate_json(await request.body())
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"])
            return error_response(
                422,
                "validation_error",
                f"invalid A2ATask: {field}: {first['msg']}",
                {"field": field},
            )
        metadata = Struct()
        metadata.update(legacy.metadata or {})
        message = Message(
            message_id=str(uuid.uuid4()),
            context_id=legacy.sessionId or "",
            role=Role.ROLE_USER if legacy.message.role == "user" else Role.ROLE_AGENT,
            parts=[_part(p) for p in legacy.message.parts],
            metadata=metadata,
        )
        context = self.contexts.build(request)
        try:
            result = await self.handler.on_message_send(
                SendMessageRequest(message=message), context
            )
        except InvalidParamsError as exc:
            return error_response(422, "validation_error", exc.message, exc.data)
        except TaskNotFoundError as exc:
            return error_response(404, "not_found", exc.message)
        except A2AError as exc:
            return error_response(400, "bad_request", exc.message, exc.data)
        body: dict[str, Any] = _response(legacy, result).model_dump(mode="json", exclude_none=True)
        return ORJSONResponse(body)
