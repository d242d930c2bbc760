"""``/v1/memory/procedures``: rules, prompt fragments and examples, and what applies."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from memory_service.routes.longterm_deps import LongTerm, MemoryId, OptionalId
from servicekit import CurrentIdentity
from servicekit.errors import error_responses
from soorma_common.knowledge import (
    MemoryKind,
    ProcedureCreate,
    ProcedureQuery,
    ProcedureQueryResult,
    ProcedureRecord,
)

router = APIRouter(
    prefix="/v1/memory/procedures",
    tags=["procedural memory"],
    responses=error_responses(422, 503),
)


@router.post("", response_model=ProcedureRecord, status_code=201)
async def add_procedure(
    body: ProcedureCreate, identity: CurrentIdentity, memory: LongTerm
) -> ProcedureRecord:
    """Store a rule, prompt fragment or example; its ``situation`` is what gets matched."""
    return await memory.add_procedure(identity.tenant_id, identity.user_id, body)


@router.get("", response_model=list[ProcedureRecord])
async def list_procedures(
    identity: CurrentIdentity,
    memory: LongTerm,
    agent_id: OptionalId = None,
    kind: MemoryKind | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> list[ProcedureRecord]:
    """The caller's procedures and the tenant-wide ones (for ``agent_id``: its own and
    those for any agent)."""
    memory.store.require_available()
    return await memory.store.procedure_list(
        identity.tenant_id, identity.user_id, agent_id=agent_id, kind=kind, limit=limit
    )


@router.post("/relevant", response_model=ProcedureQueryResult)
async def relevant_procedures(
    body: ProcedureQuery, identity: CurrentIdentity, memory: LongTerm
) -> ProcedureQueryResult:
    """What applies here: the caller's own (for the agent or any agent) and tenant-wide
    procedures whose situation is closest to ``query``."""
    return await memory.relevant_procedures(identity.tenant_id, identity.user_id, body)


@router.get("/{record_id}", response_model=ProcedureRecord, responses=error_responses(404))
async def get_procedure(
    record_id: MemoryId, identity: CurrentIdentity, memory: LongTerm
) -> ProcedureRecord:
    return await memory.store.procedure_get(identity.tenant_id, identity.user_id, record_id)


@router.delete("/{record_id}", status_code=204, responses=error_responses(404))
async def delete_procedure(
    record_id: MemoryId, identity: CurrentIdentity, memory: LongTerm
) -> Response:
    await memory.store.procedure_delete(identity.tenant_id, identity.user_id, record_id)
    return Response(status_code=204)
