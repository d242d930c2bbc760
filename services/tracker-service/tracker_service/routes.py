"""HTTP routes under ``/v1/tracker``, every answer scoped to the caller's tenant.

The tracker's data is read-only. The one action, ``POST /plans/{id}/cancel``, changes
nothing here: it publishes ``plan.cancel_requested`` through the event service as the
caller (tenant and user), and the plan's own planner decides.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Header, Query, Request
from pydantic import BaseModel, Field
from sse_starlette import EventSourceResponse
from starlette.responses import Response

from servicekit.auth import CurrentIdentity
from servicekit.errors import error_responses
from servicekit.jsonresp import ORJSONResponse
from soorma_common.errors import (
    Conflict,
    EventDefinitionNotFound,
    SoormaError,
    ValidationFailed,
)
from soorma_common.events import ACTION_RESULTS, PLAN_CANCEL_REQUESTED, SYSTEM_EVENTS
from soorma_common.tracker import (
    ActionList,
    DelegationGroup,
    PlanDetail,
    PlanList,
    PlanSummary,
    TaskDetail,
    Timeline,
    TrackedPlanStatus,
    TrackerMetrics,
)
from tracker_service import queries
from tracker_service.plan_context import read_plan_context
from tracker_service.projection import timeout_event_id
from tracker_service.state import Tracker
from tracker_service.stream import plan_stream
from tracker_service.timeouts import timeout_event

router = APIRouter(prefix="/v1/tracker", tags=["tracker"], responses=error_responses(422))

TERMINAL = frozenset({"completed", "failed", "cancelled"})


class CancelRequest(BaseModel):
    """Why the caller cancels the plan."""

    reason: str = Field(min_length=1, max_length=1000)


class CancelRequested(BaseModel):
    """The published request: follow the plan to see it end ``cancelled``."""

    plan_id: str
    event_id: str


class AnswerRequest(BaseModel):
    """A person's answer to a pending human-input request."""

    data: dict[str, Any] = Field(default_factory=dict)


class AnswerSent(BaseModel):
    """The published answer: the asking worker receives it as its request's reply."""

    task_id: str
    event_id: str
    event_type: str


Limit = Annotated[int, Query(ge=1, le=500, description="Page size")]
Cursor = Annotated[str | None, Query(description="next_cursor of the previous page")]
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def _json(model: BaseModel) -> Response:
    """The model as JSON, serialized once (not validated again by FastAPI)."""
    return ORJSONResponse(model.model_dump(mode="json"))


def _window(since: datetime | None, until: datetime | None) -> None:
    if since is not None and until is not None and since >= until:
        raise ValidationFailed("since must be before until", details={"field": "since"})


@router.get("/plans", response_model=PlanList, summary="List plans (newest first)")
async def list_plans(
    identity: CurrentIdentity,
    tracker: Tracker,
    status: Annotated[TrackedPlanStatus | None, Query()] = None,
    goal_event: Annotated[str | None, Query(max_length=256)] = None,
    session_id: Annotated[str | None, Query(max_length=256)] = None,
    parent_plan_id: Annotated[str | None, Query(max_length=256)] = None,
    planner: Annotated[str | None, Query(max_length=256)] = None,
    q: Annotated[
        str | None,
        Query(
            min_length=4,
            max_length=128,
            description="A plan id, goal correlation id or event id, or a prefix of one",
        ),
    ] = None,
    since: Annotated[datetime | None, Query(description="created at or after")] = None,
    until: Annotated[datetime | None, Query(description="created before")] = None,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> Response:
    _window(since, until)
    filters = {
        "status": status.value if status else None,
        "goal_event": goal_event,
        "session_id": session_id,
        "parent_plan_id": parent_plan_id,
        "planner": planner,
        "q": q,
        "since": since,
        "until": until,
    }
    async with tracker.engine.connect() as conn:
        page, nxt = await queries.list_plans(
            conn, identity.tenant_id, limit=limit, cursor=cursor, filters=filters
        )
    return _json(PlanList(plans=page, next_cursor=nxt))


@router.get(
    "/plans/by-correlation/{correlation_id}",
    response_model=PlanSummary,
    summary="The plan a goal's correlation id leads to",
    responses=error_responses(404),
)
async def plan_by_correlation(
    correlation_id: str, identity: CurrentIdentity, tracker: Tracker
) -> PlanSummary:
    async with tracker.engine.connect() as conn:
        return await queries.plan_by_correlation(conn, identity.tenant_id, correlation_id)


@router.get(
    "/plans/{plan_id}",
    response_model=PlanDetail,
    summary="One plan in full",
    responses=error_responses(404),
)
async def get_plan(
    plan_id: str,
    identity: CurrentIdentity,
    tracker: Tracker,
    context: Annotated[bool, Query(description="Read the memory-service context")] = True,
) -> PlanDetail:
    tenant = identity.tenant_id
    async with tracker.engine.connect() as conn:
        row = await queries.get_plan_row(conn, tenant, plan_id)
        detail = PlanDetail(
            **queries.plan_summary(row).model_dump(),
            state_path=queries.state_path(row),
            result=row._mapping["result"],
            sub_plan_ids=await queries.sub_plan_ids(conn, tenant, plan_id),
            correlation_ids=await queries.plan_correlation_ids(conn, tenant, plan_id),
            waits=await queries.plan_waits(conn, tenant, plan_id),
        )
    if context and tracker.memory is not None:
        detail.context, detail.context_error = await read_plan_context(
            tracker.memory, tenant, plan_id
        )
    return detail


@router.get(
    "/plans/{plan_id}/actions",
    response_model=ActionList,
    summary="The plan's requests and their answers",
    responses=error_responses(404),
)
async def plan_actions(
    plan_id: str,
    identity: CurrentIdentity,
    tracker: Tracker,
    limit: Limit = 100,
    cursor: Cursor = None,
) -> ActionList:
    async with tracker.engine.connect() as conn:
        await queries.get_plan_row(conn, identity.tenant_id, plan_id)
        page, nxt = await queries.actions(
            conn, identity.tenant_id, plan_id, limit=limit, cursor=cursor
        )
    return ActionList(plan_id=plan_id, actions=page, next_cursor=nxt)


@router.get(
    "/plans/{plan_id}/timeline",
    response_model=Timeline,
    summary="The plan's events, oldest first",
    responses=error_responses(404),
)
async def plan_timeline(
    plan_id: str,
    identity: CurrentIdentity,
    tracker: Tracker,
    limit: Limit = 200,
    cursor: Cursor = None,
) -> Timeline:
    after = 0
    if cursor:
        (after,) = queries.decode_cursor(cursor, 1)
        if not isinstance(after, int):
            raise ValidationFailed("invalid cursor", details={"field": "cursor"})
    async with tracker.engine.connect() as conn:
        await queries.get_plan_row(conn, identity.tenant_id, plan_id)
        entries, nxt = await queries.timeline(
            conn, identity.tenant_id, plan_id, limit=limit, after_seq=after
        )
    return Timeline(plan_id=plan_id, entries=entries, next_cursor=nxt)


@router.get(
    "/plans/{plan_id}/sub-plans",
    response_model=PlanList,
    summary="Plans started by this plan",
    responses=error_responses(404),
)
async def sub_plans(
    plan_id: str,
    identity: CurrentIdentity,
    tracker: Tracker,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> PlanList:
    async with tracker.engine.connect() as conn:
        await queries.get_plan_row(conn, identity.tenant_id, plan_id)
        page, nxt = await queries.list_plans(
            conn,
            identity.tenant_id,
            limit=limit,
            cursor=cursor,
            filters={"parent_plan_id": plan_id},
        )
    return PlanList(plans=page, next_cursor=nxt)


@router.get(
    "/plans/{plan_id}/stream",
    summary="Live updates of one plan (SSE)",
    response_class=EventSourceResponse,
    responses=error_responses(404),
)
async def stream_plan(
    plan_id: str,
    request: Request,
    identity: CurrentIdentity,
    tracker: Tracker,
    heartbeat: Annotated[float, Query(gt=0, le=3600)] = 15.0,
    last_event_id: Annotated[str | None, Header()] = None,
) -> Response:
    """Frames ``plan``, ``entry``, ``end``, ``heartbeat``: see docs/tracker.md."""
    after = 0
    if last_event_id:
        if not last_event_id.isdigit():
            raise ValidationFailed(
                "Last-Event-ID must be an entry seq", details={"field": "Last-Event-ID"}
            )
        after = int(last_event_id)
    async with tracker.engine.connect() as conn:
        await queries.get_plan_row(conn, identity.tenant_id, plan_id)
    body = plan_stream(
        tracker,
        identity.tenant_id,
        plan_id,
        after_seq=after,
        heartbeat=heartbeat,
        disconnected=request.is_disconnected,
    )
    # ping=0: the stream sends its own ``heartbeat`` frames (clients time out on them).
    return EventSourceResponse(body, headers=SSE_HEADERS, ping=0)


@router.post(
    "/plans/{plan_id}/cancel",
    response_model=CancelRequested,
    status_code=202,
    summary="Ask the plan's planner to cancel it (publishes plan.cancel_requested)",
    responses=error_responses(404, 409, 503),
)
async def cancel_plan(
    plan_id: str, body: CancelRequest, identity: CurrentIdentity, tracker: Tracker
) -> CancelRequested:
    async with tracker.engine.connect() as conn:
        row = await queries.get_plan_row(conn, identity.tenant_id, plan_id)
    if row.status in TERMINAL:
        raise Conflict(
            f"plan {plan_id!r} has already ended ({row.status})",
            details={"plan_id": plan_id, "status": row.status},
        )
    assert tracker.bus is not None
    event_id = await tracker.bus.publish(
        SYSTEM_EVENTS,
        PLAN_CANCEL_REQUESTED,
        {"plan_id": plan_id, "reason": body.reason},
        tenant_id=identity.tenant_id,
        user_id=identity.user_id,
        correlation_id=plan_id,
        plan_id=plan_id,
        source="soorma-tracker-ui",
    )
    return CancelRequested(plan_id=plan_id, event_id=event_id)


@router.post(
    "/tasks/{task_id}/answer",
    response_model=AnswerSent,
    status_code=202,
    summary="Answer a pending human input, or release a planner WAIT, as the caller",
    responses=error_responses(404, 409, 503),
)
async def answer_task(
    task_id: str, body: AnswerRequest, identity: CurrentIdentity, tracker: Tracker
) -> AnswerSent:
    """A human input gets its ``response_event`` (on its ``response_topic``, correlated
    to the request); a planner WAIT gets the event it expects, correlated to its plan
    on ``action-results``: what the worker or the planner waits for, sent as the caller.
    """
    async with tracker.engine.connect() as conn:
        wait, asked = await queries.pending_wait(conn, identity.tenant_id, task_id)
    if wait.status != "waiting":
        raise Conflict(
            f"{wait.wait_id!r} waits no longer ({wait.status})",
            details={"task_id": wait.wait_id, "status": wait.status},
        )
    if not wait.expected_event:
        raise Conflict(
            f"{wait.wait_id!r} does not say which event it waits for",
            details={"task_id": wait.wait_id},
        )
    event_type = str(wait.expected_event)
    topic = asked.get("response_topic")
    human = wait.kind == "human_input"
    assert tracker.bus is not None
    event_id = await tracker.bus.publish(
        topic if human and isinstance(topic, str) and topic else ACTION_RESULTS,
        event_type,
        body.data,
        tenant_id=identity.tenant_id,
        user_id=identity.user_id,
        correlation_id=wait.wait_id if human else wait.plan_id,
        plan_id=wait.plan_id,
        session_id=wait.session_id,
        source="soorma-tracker-ui",
    )
    return AnswerSent(task_id=wait.wait_id, event_id=event_id, event_type=event_type)


@router.get(
    "/sessions/{session_id}/plans",
    response_model=PlanList,
    summary="Plans of a session (newest first)",
)
async def session_plans(
    session_id: str,
    identity: CurrentIdentity,
    tracker: Tracker,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> PlanList:
    async with tracker.engine.connect() as conn:
        page, nxt = await queries.list_plans(
            conn, identity.tenant_id, limit=limit, cursor=cursor, filters={"session_id": session_id}
        )
    return PlanList(plans=page, next_cursor=nxt)


@router.get(
    "/delegation-groups/{group_id}",
    response_model=DelegationGroup,
    summary="One fan-out (delegate_parallel) and its members",
    responses=error_responses(404),
)
async def delegation_group(
    group_id: str, identity: CurrentIdentity, tracker: Tracker
) -> DelegationGroup:
    async with tracker.engine.connect() as conn:
        return await queries.delegation_group(conn, identity.tenant_id, group_id)


@router.get(
    "/tasks/{task_id}",
    response_model=TaskDetail,
    summary="A task with its sub-tasks and waits",
    responses=error_responses(404),
)
async def get_task(task_id: str, identity: CurrentIdentity, tracker: Tracker) -> TaskDetail:
    async with tracker.engine.connect() as conn:
        return await queries.task_detail(conn, identity.tenant_id, task_id)


@router.get("/metrics", response_model=TrackerMetrics, summary="Counts, durations, failure rates")
async def get_metrics(identity: CurrentIdentity, tracker: Tracker) -> Response:
    async with tracker.engine.connect() as conn:
        found = await queries.metrics(conn, identity.tenant_id)
    return Response(orjson.dumps(found.model_dump(mode="json")), media_type="application/json")


# -- the plan page's waits: the answer's schema, time out now --------------------------
# (kept apart from the routes above: the plan page's answer form and "Time out now")


class AnswerSchema(BaseModel):
    """What the answer to a wait should look like, from the registry where registered."""

    task_id: str
    event_type: str | None = Field(description="The event the wait expects")
    schema_: dict[str, Any] | None = Field(
        default=None,
        alias="schema",
        description="The event's payload JSON Schema; null when none is registered",
    )
    description: str | None = None
    note: str | None = Field(default=None, description="Why there is no schema, when none")

    model_config = {"populate_by_name": True}


class TimeoutRequest(BaseModel):
    """Why the caller ends the wait now (optional; recorded on the timeout event)."""

    reason: str | None = Field(default=None, max_length=1000)


class TimeoutSent(BaseModel):
    """The published timeout: the waiting worker or planner takes its timeout branch."""

    task_id: str
    event_id: str
    event_type: str


@router.get(
    "/tasks/{task_id}/answer-schema",
    response_model=AnswerSchema,
    response_model_by_alias=True,
    summary="The registered schema of the event a wait expects (for an answer form)",
    responses=error_responses(404),
)
async def answer_schema(task_id: str, identity: CurrentIdentity, tracker: Tracker) -> Response:
    """Read from the registry as the caller's tenant; ``schema`` is null when the event
    is not registered, has no payload schema, or the registry cannot be reached."""
    async with tracker.engine.connect() as conn:
        wait, _ = await queries.pending_wait(conn, identity.tenant_id, task_id)
    found = AnswerSchema(task_id=wait.wait_id, event_type=wait.expected_event)
    if not wait.expected_event:
        found.note = "the wait does not say which event it expects"
    elif tracker.registry is None:
        found.note = "no registry configured"
    else:
        try:
            event = await tracker.registry.acting_as(tenant_id=identity.tenant_id).get_event(
                str(wait.expected_event)
            )
        except EventDefinitionNotFound:
            found.note = f"{wait.expected_event} is not registered"
        except SoormaError as exc:
            found.note = f"registry: {exc}"
        else:
            found.description = event.description or None
            if isinstance(event.payload_schema, dict) and event.payload_schema:
                found.schema_ = event.payload_schema
            else:
                found.note = f"{wait.expected_event} is registered without a payload schema"
    return ORJSONResponse(found.model_dump(mode="json", by_alias=True))


@router.post(
    "/tasks/{task_id}/timeout",
    response_model=TimeoutSent,
    status_code=202,
    summary="Time out a pending human input or planner WAIT now, as the caller",
    responses=error_responses(404, 409, 503),
)
async def timeout_task(
    task_id: str,
    identity: CurrentIdentity,
    tracker: Tracker,
    body: TimeoutRequest | None = None,
) -> TimeoutSent:
    """Publishes what the tracker publishes at the deadline (``task.timeout`` for a human
    input, ``plan.wait_timeout`` for a planner WAIT, same id: one timeout either way),
    as the caller, with ``timed_out_by``; the waiting worker or planner takes its
    timeout branch. Nothing changes here until the event is projected."""
    async with tracker.engine.connect() as conn:
        wait, _ = await queries.pending_wait(conn, identity.tenant_id, task_id)
    if wait.status != "waiting":
        raise Conflict(
            f"{wait.wait_id!r} waits no longer ({wait.status})",
            details={"task_id": wait.wait_id, "status": wait.status},
        )
    event_type, data, fields = timeout_event(wait)
    data["timed_out_by"] = identity.user_id
    if body is not None and body.reason:
        data["note"] = body.reason
    assert tracker.bus is not None
    event_id = await tracker.bus.publish(
        SYSTEM_EVENTS,
        event_type,
        data,
        tenant_id=identity.tenant_id,
        user_id=identity.user_id,
        event_id=timeout_event_id(identity.tenant_id, wait.wait_id),
        plan_id=wait.plan_id,
        session_id=wait.session_id,
        source="soorma-tracker-ui",
        **fields,
    )
    return TimeoutSent(task_id=wait.wait_id, event_id=event_id, event_type=event_type)
