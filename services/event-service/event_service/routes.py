"""HTTP routes: publish, stream, ack/nack, dead letters."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

import orjson
from fastapi import APIRouter, Query, Request
from pydantic import BaseModel
from starlette.responses import Response, StreamingResponse

from event_service.bodies import AckBody, ExtendBody, NackBody, ReplayBody
from event_service.groups import GroupSession
from event_service.ids import ZERO_ID, parse_id, parse_ref, parse_token
from event_service.publishing import publish_many, publish_one
from event_service.settings import TAP_TENANT
from event_service.sse import type_filter
from event_service.state import Events
from event_service.streams import GroupStreamResponse, broadcast_stream, group_stream
from servicekit.auth import CurrentIdentity, Identity, require_service
from servicekit.errors import error_responses
from servicekit.jsonresp import ORJSONResponse
from soorma_common.bus import (
    AckResponse,
    ConsumerGroupList,
    ConsumerGroupStatus,
    DeadLetter,
    DeadLetterList,
    ExtendResponse,
    PublishBatchRequest,
    PublishBatchResponse,
    PublishRequest,
    PublishResponse,
    ReplayResponse,
)
from soorma_common.errors import Conflict, InvalidTopic, ValidationFailed
from soorma_common.events import TOPIC_PATTERN, EventEnvelope, is_valid_topic

# Every route can answer 422 (bad input) and 503 (Redis unreachable), in the common
# error body; routes add what else they can answer.
router = APIRouter(prefix="/v1/events", tags=["events"], responses=error_responses(422, 503))

MAX_TOPICS = 32
# ``event_types`` globs: compiled once per stream (in a worker thread, cached by pattern
# list), never per event; bounded so there is only so much to compile.
MAX_EVENT_TYPES = 64
MAX_EVENT_TYPE_LENGTH = 256  # an event type's own limit (EventEnvelope.type)
# Below this a stream would spend its time writing heartbeat frames.
MIN_HEARTBEAT_SECONDS = 0.5
MAX_PREFETCH = 1000
# A tenant's groups are looked up over at most this many of its topics per request.
MAX_GROUP_TOPICS = 1000
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$")
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def _topic(topic: str, field: str = "topic") -> str:
    if not is_valid_topic(topic):
        raise InvalidTopic(
            f"{field} {topic[:80]!r} is not a valid topic name: use lowercase letters, digits, "
            "'.', '_' or '-' (1-64 chars, starting with a letter or digit)",
            details={"field": field, "value": topic[:80]},
        )
    return topic


def _body_schema(model: type[BaseModel]) -> dict[str, Any]:
    # The publish routes read raw bytes (validated straight from JSON), so FastAPI cannot
    # infer their body: document it explicitly, self-contained (pydantic's "#/$defs/..."
    # references would not resolve inside the OpenAPI document) and with the snake_case
    # names the rest of the API documents.
    schema = model.model_json_schema(by_alias=False)
    defs = schema.pop("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref", "")
            if ref.startswith("#/$defs/"):
                return inline(defs[ref.removeprefix("#/$defs/")])
            return {key: inline(value) for key, value in node.items()}
        if isinstance(node, list):
            return [inline(item) for item in node]
        return node

    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": inline(schema)}},
        }
    }


def _name(value: str, field: str) -> str:
    if not NAME_PATTERN.fullmatch(value):
        raise ValidationFailed(
            f"invalid {field} {value[:64]!r}: use 1-128 letters, digits or '._:@-'",
            details={"field": field},
        )
    return value


def _tenant(identity: Identity, requested: str | None) -> str:
    """The tenant whose log a request reads: its own, or the tap (``*``) for a service."""
    if requested is None or requested == identity.tenant_id:
        return identity.tenant_id
    if requested != TAP_TENANT:
        raise ValidationFailed(
            f"tenant {requested[:64]!r}: only '*' (the tap) may be named here; act as a "
            "tenant with X-Tenant-ID",
            details={"field": "tenant"},
        )
    require_service(identity, "tenant=*")
    return TAP_TENANT


def _event_types(raw: str | None) -> list[str]:
    patterns = list(dict.fromkeys(p.strip() for p in (raw or "").split(",") if p.strip()))
    if len(patterns) > MAX_EVENT_TYPES:
        raise ValidationFailed(
            f"event_types has {len(patterns)} patterns: at most {MAX_EVENT_TYPES} per stream",
            details={"field": "event_types"},
        )
    for pattern in patterns:
        if len(pattern) > MAX_EVENT_TYPE_LENGTH:
            raise ValidationFailed(
                f"event_types pattern {pattern[:64]!r}... is {len(pattern)} characters: at "
                f"most {MAX_EVENT_TYPE_LENGTH}",
                details={"field": "event_types"},
            )
    return patterns


def _topics(raw: str) -> list[str]:
    topics = list(dict.fromkeys(t.strip() for t in raw.split(",") if t.strip()))
    if not topics:
        raise ValidationFailed("topics is empty: pass ?topics=a,b", details={"field": "topics"})
    if len(topics) > MAX_TOPICS:
        raise ValidationFailed(
            f"at most {MAX_TOPICS} topics per stream", details={"field": "topics"}
        )
    return [_topic(t, "topics") for t in topics]


# Both publish routes are served by ``fastpath.PublishFastPath`` in front of FastAPI's
# routing (same code below, less per-request overhead); they stay here so OpenAPI
# documents them and any app built without the fast path still serves them.


@router.post(
    "/publish",
    response_model=PublishResponse,
    summary="Publish one event",
    openapi_extra=_body_schema(PublishRequest),
    responses=error_responses(413),
)
async def publish(request: Request, identity: CurrentIdentity, events: Events) -> Response:
    """Body ``{"event": EventEnvelope}``; ``tenant_id``/``user_id`` come from the caller."""
    return Response(
        await publish_one(events, identity, await request.body()), media_type="application/json"
    )


@router.post(
    "/publish-batch",
    response_model=PublishBatchResponse,
    summary="Publish events atomically",
    openapi_extra=_body_schema(PublishBatchRequest),
    responses=error_responses(413),
)
async def publish_batch(request: Request, identity: CurrentIdentity, events: Events) -> Response:
    """Body ``{"events": [...]}``: all are validated first, then appended atomically."""
    return Response(
        await publish_many(events, identity, await request.body()), media_type="application/json"
    )


@router.get(
    "/stream",
    summary="Subscribe (SSE)",
    response_class=StreamingResponse,
    responses=error_responses(403),
)
async def stream(
    request: Request,
    identity: CurrentIdentity,
    events: Events,
    topics: Annotated[str, Query(description="Comma-separated topics")],
    event_types: Annotated[
        str | None,
        Query(
            description=f"Comma-separated globs (at most {MAX_EVENT_TYPES}, each at most "
            f"{MAX_EVENT_TYPE_LENGTH} characters)",
            max_length=MAX_EVENT_TYPES * (MAX_EVENT_TYPE_LENGTH + 1),
        ),
    ] = None,
    group: Annotated[
        str | None,
        Query(
            description="Consumer group (competing)",
            json_schema_extra={"pattern": NAME_PATTERN.pattern},
        ),
    ] = None,
    consumer: Annotated[
        str | None,
        Query(
            description="Consumer id within the group",
            json_schema_extra={"pattern": NAME_PATTERN.pattern},
        ),
    ] = None,
    start: Annotated[str, Query(alias="from", pattern="^(now|earliest)$")] = "now",
    visibility_timeout: Annotated[float | None, Query(ge=0.1, le=86_400)] = None,
    max_deliveries: Annotated[int | None, Query(ge=1, le=1000)] = None,
    last_event_id: Annotated[str | None, Query(description="Resume token")] = None,
    heartbeat: Annotated[float | None, Query(ge=MIN_HEARTBEAT_SECONDS, le=3600)] = None,
    tenant: Annotated[
        str | None, Query(description="'*': every tenant's tap topics (platform services only)")
    ] = None,
    prefetch: Annotated[
        int | None,
        Query(
            ge=1, le=MAX_PREFETCH, description="Most unacked deliveries in flight on this stream"
        ),
    ] = None,
    count_deliveries: Annotated[
        Literal["all", "started"],
        Query(
            description="What counts towards max_deliveries: every delivery, or only those "
            "whose handler started (the client reports them in extend's 'running'); then "
            "a delivery is dead-lettered anyway after max_deliveries times the service's "
            "delivery_cap_factor deliveries"
        ),
    ] = "all",
) -> Response:
    """Server-sent events; see docs/event-service.md for frames, tokens and groups."""
    settings = events.settings
    names = _topics(topics)
    accept = await type_filter(_event_types(event_types))
    beat = heartbeat or settings.heartbeat_seconds
    tenant = _tenant(identity, tenant)
    if group is None:
        token = request.headers.get("last-event-id") or last_event_id
        resume = parse_token(token) if token else {}
        # "Now" is fixed before the response starts: anything published after this
        # request returned headers is delivered.
        now = await events.log.last_ids(tenant, names)
        default = dict.fromkeys(names, ZERO_ID) if start == "earliest" else now
        positions = {t: resume.get(t) or default[t] for t in names}
        body = broadcast_stream(
            hub=events.hub,
            log=events.log,
            tenant=tenant,
            topics=names,
            start=positions,
            live_from=now,
            accept=accept,
            heartbeat=beat,
            batch=settings.read_batch,
            buffer_limit=settings.subscriber_buffer,
        )
    else:
        _name(group, "group")
        consumer = _name(consumer, "consumer") if consumer else uuid.uuid4().hex
        most = max_deliveries or settings.default_max_deliveries
        await events.log.ensure_group(tenant, names, group, from_earliest=start == "earliest")
        session = GroupSession(
            log=events.log,
            waker=events.waker,
            tenant=tenant,
            topics=names,
            group=group,
            consumer=consumer,
            visibility_timeout=visibility_timeout or settings.default_visibility_timeout,
            max_deliveries=most,
            hard_cap=most * settings.delivery_cap_factor if count_deliveries == "started" else None,
            prefetch=prefetch or settings.default_prefetch,
            batch=settings.read_batch,
            block=settings.block_seconds,
            claim_interval=settings.claim_interval_seconds,
            check_interval=settings.supersede_check_seconds,
            metrics=events.metrics,
            clock=events.clock,
        )
        body = group_stream(session=session, accept=accept, heartbeat=beat)
        return GroupStreamResponse(body, session=session, headers=SSE_HEADERS)
    return StreamingResponse(body, media_type="text/event-stream", headers=SSE_HEADERS)


@router.post(
    "/ack",
    response_model=AckResponse,
    summary="Acknowledge group deliveries",
    responses=error_responses(403),
)
async def ack(req: AckBody, identity: CurrentIdentity, events: Events) -> Response:
    refs = [parse_ref(i) for i in req.ids]
    tenant = _tenant(identity, req.tenant)
    count = await events.log.ack(tenant, req.group, refs)
    events.metrics.acked(tenant, count)
    events.waker.settled(tenant, req.group, refs)
    return ORJSONResponse({"count": count})


@router.post(
    "/nack",
    response_model=AckResponse,
    summary="Release deliveries for redelivery",
    responses=error_responses(403),
)
async def nack(req: NackBody, identity: CurrentIdentity, events: Events) -> Response:
    refs = [parse_ref(i) for i in req.ids]
    tenant = _tenant(identity, req.tenant)
    count = await events.log.nack(tenant, req.group, refs, req.reason)
    events.metrics.nacked(tenant, count)
    events.waker.settled(tenant, req.group, refs)
    if count:
        events.waker.wake(tenant, req.group)
    return ORJSONResponse({"count": count})


@router.post(
    "/extend",
    response_model=ExtendResponse,
    summary="Renew delivery leases",
    responses=error_responses(403, 409),
)
async def extend(req: ExtendBody, identity: CurrentIdentity, events: Events) -> Response:
    """Reset the visibility timeout of deliveries still pending (a handler still running).

    Deliveries already acked, nacked or dead-lettered are not counted in ``extended``.
    With ``consumer`` (the SDK always sends it), only the caller's own deliveries are
    renewed: if any id is held by another consumer of the group the answer is 409 naming
    them (the caller's own ones were renewed).

    ``running`` names deliveries whose handler has started (they are renewed too): each
    is marked started in its current delivery, which is what counts towards
    ``max_deliveries`` on streams opened with ``count_deliveries=started``.
    """
    refs = [parse_ref(i) for i in req.ids]
    running = [parse_ref(i) for i in req.running]
    tenant = _tenant(identity, req.tenant)
    renewed, others = await events.log.extend(
        tenant, req.group, refs, req.consumer, running=running
    )
    if others:
        raise Conflict(
            f"{len(others)} of these deliveries are held by another consumer of group "
            f"{req.group!r}, not by {req.consumer!r} (its lease expired and they were taken "
            "over); their leases were not renewed",
            details={
                "extended": renewed,
                "not_owned": [
                    {"id": f"{topic}={sid}", "consumer": owner} for topic, sid, owner in others
                ],
            },
        )
    return ORJSONResponse({"extended": renewed})


@router.get("/dlq", response_model=DeadLetterList, summary="List dead letters of a topic")
async def dead_letters(
    identity: CurrentIdentity,
    events: Events,
    topic: Annotated[
        str,
        Query(
            description="The live topic T (its DLQ is T.dlq)",
            json_schema_extra={"pattern": TOPIC_PATTERN.pattern},
        ),
    ],
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> Response:
    found = await events.log.dead_letters(identity.tenant_id, _topic(topic), limit=limit)
    # pydantic's encoder, not orjson: event data may hold integers beyond 64 bits
    # (publish accepts them), which orjson refuses.
    listing = DeadLetterList(
        events=[
            DeadLetter(
                id=d.entry.id,
                event=EventEnvelope.model_validate_json(d.entry.payload),
                reason=d.reason,
                deliveries=d.deliveries,
                group=d.group,
                dead_at=d.dead_at,
            )
            for d in found
        ]
    )
    return Response(listing.model_dump_json(), media_type="application/json")


@router.post(
    "/dlq/replay",
    response_model=ReplayResponse,
    summary="Re-inject dead letters",
    responses=error_responses(404),
)
async def replay(req: ReplayBody, identity: CurrentIdentity, events: Events) -> Response:
    topic = _topic(req.topic)
    ids = list(dict.fromkeys(req.ids))
    for stream_id in ids:
        parse_id(stream_id)
    entries = await events.log.replay(identity.tenant_id, topic, ids)
    results = [{"event_id": orjson.loads(e.payload).get("id"), "stream_id": e.id} for e in entries]
    return ORJSONResponse({"results": results})


@router.get(
    "/groups", response_model=ConsumerGroupList, summary="Consumer groups' lag and pending counts"
)
async def consumer_groups(
    identity: CurrentIdentity,
    events: Events,
    group: Annotated[
        str | None,
        Query(
            description="Only this consumer group",
            json_schema_extra={"pattern": NAME_PATTERN.pattern},
        ),
    ] = None,
    topics: Annotated[
        str | None,
        Query(description="Comma-separated topics (default: every topic of the tenant)"),
    ] = None,
) -> Response:
    """For each consumer group of the caller's tenant, per topic: ``lag`` (events not yet
    delivered to the group) and ``pending`` (delivered, not yet acknowledged).

    Without ``topics`` every topic the tenant has written is looked at, up to
    ``MAX_GROUP_TOPICS`` (1,000); ``complete`` is false when there were more.
    """
    if group is not None:
        _name(group, "group")
    names = _topics(topics) if topics is not None else None
    found, complete = await events.log.group_status(
        identity.tenant_id, group=group, topics=names, max_streams=MAX_GROUP_TOPICS
    )
    listing = ConsumerGroupList(
        groups=[
            ConsumerGroupStatus(
                group=g.group,
                topic=g.topic,
                lag=g.lag,
                pending=g.pending,
                last_delivered_id=g.last_delivered,
                last_delivered_at=_stream_time(g.last_delivered),
            )
            for g in found
        ],
        complete=complete,
    )
    return Response(listing.model_dump_json(), media_type="application/json")


def _stream_time(stream_id: str) -> datetime | None:
    """When the entry ``stream_id`` was appended (its milliseconds part); None for 0-0."""
    ms = parse_id(stream_id)[0]
    return datetime.fromtimestamp(ms / 1000, UTC) if ms else None
