"""Turning validated envelopes into log entries: identity, ids, size limit, JSON-only data."""

from __future__ import annotations

from typing import TypeVar

import orjson
import pydantic_core
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError

from event_service.backends.base import NewEvent
from event_service.state import EventState
from servicekit.auth import Identity
from servicekit.jsoncheck import check_json, may_nest_deeper
from soorma_common.bus import PublishBatchRequest, PublishRequest
from soorma_common.errors import PayloadTooLarge
from soorma_common.events import EventEnvelope

M = TypeVar("M", bound=BaseModel)

# The body parser accepts NaN, Infinity and overflowing numbers (1e400) inside ``data``,
# and the envelope's own serializer would write them as ``null``: a silent change of the
# event. This serializer writes them as the (non-JSON) constants instead, so for every
# valid event the stored text is byte-identical, and a non-finite number leaves a token
# one byte search finds. That search costs far less than walking ``data`` per event.
_STORE = pydantic_core.SchemaSerializer(
    EventEnvelope.__pydantic_core_schema__, {"ser_json_inf_nan": "constants"}
)


def parse_body(model: type[M], body: bytes) -> M:
    """Validate a JSON body straight from bytes (no intermediate dict: hot path).

    Errors surface as the usual 422 naming each failing field.
    """
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        errors = [{**err, "loc": ("body", *err["loc"])} for err in exc.errors(include_url=False)]
        raise RequestValidationError(errors) from None


def _may_hold_non_finite(payload: bytes) -> bool:
    # Single-byte searches first (memchr: a few hundred ns on a typical event, which has
    # no capital N or I at all); the token searches cost several times more.
    if b"N" not in payload and b"I" not in payload:
        return False
    return b"NaN" in payload or b"Infinity" in payload


def to_new_event(
    event: EventEnvelope, identity: Identity, *, max_data_bytes: int, field: str = "event"
) -> NewEvent:
    """Stamp the caller's identity on ``event`` and serialize it once for storage.

    Raises:
        ValidationFailed: ``data`` holds NaN or an infinite number (not JSON) or nests
            deeper than ``MAX_JSON_DEPTH``; the message names the value's path
            (``event.data.x``).
        PayloadTooLarge: the event's ``data`` serializes to more than ``max_data_bytes``.
    """
    # Never trust tenant/user from the body: they come from the authenticated caller.
    event.tenant_id = identity.tenant_id
    event.user_id = identity.user_id
    payload = _STORE.to_json(event)
    if _may_hold_non_finite(payload) or may_nest_deeper(payload):
        # Usually just text that says so (or many small objects); the walk tells, and
        # names the bad number or the too-deep value (servicekit's one depth limit).
        # Integers of any size are fine: the serializer writes them exactly.
        check_json(event.data, field=f"{field}.data", allow_big_ints=True)
    if len(payload) > max_data_bytes:
        # pydantic's encoder, not orjson: orjson refuses integers beyond 64 bits.
        size = len(pydantic_core.to_json(event.data))
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
    state.metrics.published(identity.tenant_id, (new,))
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
    state.metrics.published(identity.tenant_id, new)
    return orjson.dumps(
        {
            "results": [
                {"event_id": e.id, "stream_id": sid}
                for e, sid in zip(request.events, stream_ids, strict=True)
            ]
        }
    )
