"""Turning validated envelopes into log entries: identity, ids, size limit."""

from __future__ import annotations

from typing import TypeVar

import orjson
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError

from event_service.backends.base import NewEvent
from event_service.state import EventState
from servicekit.auth import Identity
from soorma_common.bus import PublishBatchRequest, PublishRequest
from soorma_common.errors import PayloadTooLarge
from soorma_common.events import EventEnvelope

M = TypeVar("M", bound=BaseModel)


def parse_body(model: type[M], body: bytes) -> M:
    """Validate a JSON body straight from bytes (no intermediate dict: hot path).

    Errors surface as the usual 422 naming each failing field.
    """
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        errors = [{**err, "loc": ("body", *err["loc"])} for err in exc.errors(include_url=False)]
        raise RequestValidationError(errors) from None


def to_new_event(
    event: EventEnvelope, identity: Identity, *, max_data_bytes: int, field: str = "event"
) -> NewEvent:
    """Stamp the caller's identity on ``event`` and serialize it once for storage.

    Raises:
        PayloadTooLarge: the event's ``data`` serializes to more than ``max_data_bytes``.
    """
    # Never trust tenant/user from the body: they come from the authenticated caller.
    event.tenant_id = identity.tenant_id
    event.user_id = identity.user_id
    payload = event.__pydantic_serializer__.to_json(event)
    if len(payload) > max_data_bytes:
        size = len(orjson.dumps(event.data))
        if size > max_data_bytes:
            raise PayloadTooLarge(
                f"{field}.data is {size} bytes, over the {max_data_bytes}-byte limit: put "
                "large data in working memory and send its key in the event instead",
                details={"field": f"{field}.data", "size": size, "limit": max_data_bytes},
            )
    return NewEvent(event.topic, event.type, payload)


async def publish_one(state: EventState, identity: Identity, body: bytes) -> bytes:
    """``POST /v1/events/publish``: validate, stamp, append; the JSON answer."""
    request = parse_body(PublishRequest, body)
    new = to_new_event(request.event, identity, max_data_bytes=state.settings.max_payload_bytes)
    stream_ids = await state.log.append(identity.tenant_id, [new])
    return orjson.dumps({"event_id": request.event.id, "stream_id": stream_ids[0]})


async def publish_many(state: EventState, identity: Identity, body: bytes) -> bytes:
    """``POST /v1/events/publish-batch``: all validated first, then appended atomically."""
    request = parse_body(PublishBatchRequest, body)
    limit = state.settings.max_payload_bytes
    new = [
        to_new_event(e, identity, max_data_bytes=limit, field=f"events.{i}")
        for i, e in enumerate(request.events)
    ]
    stream_ids = await state.log.append(identity.tenant_id, new)
    return orjson.dumps({"results": [
        {"event_id": e.id, "stream_id": sid}
        for e, sid in zip(request.events, stream_ids, strict=True)
    ]})
