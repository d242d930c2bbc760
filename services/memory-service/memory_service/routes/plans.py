"""``/v1/memory/plans``: create, list and manage plans (summaries of plan contexts)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from memory_service.routes.deps import (
    MAX_ID_LENGTH,
    IfMatch,
    RecordId,
    SizeChecked,
    Store,
    check_ids,
    check_storable,
    expected_version,
    with_etag,
)
from servicekit import CurrentIdentity
from servicekit.errors import error_responses
from servicekit.jsoncheck import NulFree
from soorma_common.base import BaseDTO
from soorma_common.errors import ValidationFailed
from soorma_common.memory import PlanCreate, PlanStatus, PlanSummary, PlanUpdate

router = APIRouter(prefix="/v1/memory/plans", tags=["plans"], responses=error_responses(422))

DEFAULT_LIST_LIMIT = 100
MAX_LIST_LIMIT = 1000


class PlanList(BaseDTO):
    plans: list[PlanSummary]


def _statuses(raw: list[str] | None) -> list[PlanStatus] | None:
    """``?status=running&status=paused`` or ``?status=running,paused``."""
    if not raw:
        return None
    out = []
    for part in (p.strip() for item in raw for p in item.split(",")):
        if not part:
            continue
        try:
            out.append(PlanStatus(part))
        except ValueError:
            allowed = ", ".join(s.value for s in PlanStatus)
            raise ValidationFailed(
                f"status: unknown plan status {part!r}; use one of {allowed}",
                details=[{"field": "status", "message": f"one of {allowed}"}],
            ) from None
    return out or None


def _summary(record: object) -> PlanSummary:
    return PlanSummary.model_validate(record, from_attributes=True)


@router.post(
    "",
    responses=error_responses(409, 413),
    response_model=PlanSummary,
    status_code=201,
    dependencies=[SizeChecked],
)
async def create_plan(
    body: PlanCreate, identity: CurrentIdentity, store: Store, response: Response
) -> PlanSummary:
    """Create a plan (a new id when ``plan_id`` is omitted; 409 if the id exists)."""
    check_storable(body)
    check_ids("plan_id", [body.plan_id])
    check_ids("session_id", [body.session_id])
    check_ids("parent_plan_id", [body.parent_plan_id])
    return with_etag(response, _summary(await store.create_plan(identity.tenant_id, body)))


@router.get("", response_model=PlanList)
async def list_plans(
    identity: CurrentIdentity,
    store: Store,
    status: Annotated[list[str] | None, Query()] = None,
    session_id: Annotated[str | None, Query(max_length=MAX_ID_LENGTH), NulFree] = None,
    parent_plan_id: Annotated[str | None, Query(max_length=MAX_ID_LENGTH), NulFree] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIST_LIMIT)] = DEFAULT_LIST_LIMIT,
) -> PlanList:
    """The caller's plans, most recently updated first."""
    plans = await store.list_plans(
        identity.tenant_id,
        statuses=_statuses(status),
        session_id=session_id,
        parent_plan_id=parent_plan_id,
        limit=limit,
    )
    return PlanList(plans=plans)


@router.get("/{plan_id}", responses=error_responses(404), response_model=PlanSummary)
async def get_plan(
    plan_id: RecordId, identity: CurrentIdentity, store: Store, response: Response
) -> PlanSummary:
    return with_etag(response, _summary(await store.get_plan(identity.tenant_id, plan_id)))


@router.put("/{plan_id}", responses=error_responses(404, 409, 413), response_model=PlanSummary)
async def update_plan(
    plan_id: RecordId,
    body: PlanUpdate,
    identity: CurrentIdentity,
    store: Store,
    if_match: IfMatch,
    response: Response,
) -> PlanSummary:
    """Change a plan's status (optionally guarded by ``If-Match``/``expected_version``)."""
    record = await store.update_plan_status(
        identity.tenant_id,
        plan_id,
        status=body.status,
        expected_version=expected_version(if_match, body.expected_version),
    )
    return with_etag(response, _summary(record))


@router.delete("/{plan_id}", responses=error_responses(404), status_code=204)
async def delete_plan(plan_id: RecordId, identity: CurrentIdentity, store: Store) -> Response:
    """Delete the plan, its correlation ids, working memory and task contexts."""
    await store.delete_plan(identity.tenant_id, plan_id)
    return Response(status_code=204)
