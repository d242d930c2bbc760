"""``/v1/memory/plan-context``: a planner's durable plan state."""

from __future__ import annotations

from fastapi import APIRouter, Response
from pydantic import Field

from memory_service.routes.deps import (
    ConditionalWrite,
    IfMatch,
    RecordId,
    SizeChecked,
    Store,
    check_ids,
    check_storable,
    expected_version,
    with_etag,
    with_path_id,
)
from memory_service.store import MemoryStore
from servicekit import CurrentIdentity
from servicekit.errors import error_responses
from soorma_common.memory import PlanContextRecord

router = APIRouter(
    prefix="/v1/memory/plan-context", tags=["plan-context"], responses=error_responses(422)
)


class PlanContextWrite(PlanContextRecord, ConditionalWrite):
    """A plan context to store, optionally conditional on ``expected_version``."""


class PlanContextReplace(PlanContextWrite):
    """Body of ``PUT``: ``plan_id`` comes from the path (if given, it must match)."""

    plan_id: str | None = Field(default=None, min_length=1, max_length=256)  # type: ignore[assignment]


def _validate(body: PlanContextWrite) -> None:
    check_storable(body)
    check_ids("session_id", [body.session_id])
    check_ids("parent_plan_id", [body.parent_plan_id])
    check_ids("correlation_ids", body.correlation_ids)


@router.post(
    "",
    responses=error_responses(404, 409, 413),
    response_model=PlanContextRecord,
    dependencies=[SizeChecked],
)
async def upsert_plan_context(
    body: PlanContextWrite,
    identity: CurrentIdentity,
    store: Store,
    if_match: IfMatch,
    response: Response,
) -> PlanContextRecord:
    """Create or replace a plan context; returns the stored record with its version."""
    _validate(body)
    wanted = expected_version(if_match, body.expected_version)
    return with_etag(
        response, await store.save_plan(identity.tenant_id, body, expected_version=wanted)
    )


@router.get(
    "/by-correlation/{correlation_id}",
    responses=error_responses(404),
    response_model=PlanContextRecord,
)
async def get_plan_context_by_correlation(
    correlation_id: RecordId, identity: CurrentIdentity, store: Store, response: Response
) -> PlanContextRecord:
    """The plan whose ``plan_id`` or ``correlation_ids`` contains ``correlation_id``."""
    return with_etag(
        response, await store.get_plan_by_correlation(identity.tenant_id, correlation_id)
    )


@router.get("/{plan_id}", responses=error_responses(404), response_model=PlanContextRecord)
async def get_plan_context(
    plan_id: RecordId, identity: CurrentIdentity, store: Store, response: Response
) -> PlanContextRecord:
    return with_etag(response, await store.get_plan(identity.tenant_id, plan_id))


@router.put(
    "/{plan_id}",
    responses=error_responses(404, 409, 413),
    response_model=PlanContextRecord,
    dependencies=[SizeChecked],
)
async def replace_plan_context(
    plan_id: RecordId,
    body: PlanContextReplace,
    identity: CurrentIdentity,
    store: Store,
    if_match: IfMatch,
    response: Response,
) -> PlanContextRecord:
    """Replace an existing plan context (404 if it does not exist)."""
    return with_etag(
        response, await replace_plan(store, identity.tenant_id, plan_id, body, if_match)
    )


async def replace_plan(
    store: MemoryStore,
    tenant: str,
    plan_id: str,
    body: PlanContextReplace,
    if_match: int | None,
) -> PlanContextRecord:
    """What ``PUT /plan-context/{plan_id}`` does once the request is parsed.

    Shared by the route and the pure-ASGI fast path (``memory_service.fastpath``).
    """
    record = with_path_id(body, field="plan_id", path_id=plan_id)
    _validate(record)
    wanted = expected_version(if_match, body.expected_version)
    return await store.save_plan(tenant, record, expected_version=wanted, must_exist=True)


@router.delete("/{plan_id}", responses=error_responses(404), status_code=204)
async def delete_plan_context(
    plan_id: RecordId, identity: CurrentIdentity, store: Store
) -> Response:
    """Delete the plan (same record as ``DELETE /v1/memory/plans/{plan_id}``)."""
    await store.delete_plan(identity.tenant_id, plan_id)
    return Response(status_code=204)
