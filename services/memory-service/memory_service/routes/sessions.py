"""``/v1/memory/sessions``: conversations grouping plans."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from memory_service.routes.deps import RecordId, SizeChecked, Store, check_ids, check_storable
from memory_service.routes.plans import DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT
from servicekit import CurrentIdentity
from servicekit.errors import error_responses
from soorma_common.base import BaseDTO
from soorma_common.memory import SessionCreate, SessionSummary

router = APIRouter(prefix="/v1/memory/sessions", tags=["sessions"], responses=error_responses(422))


class SessionList(BaseDTO):
    sessions: list[SessionSummary]


@router.post(
    "",
    responses=error_responses(409, 413),
    response_model=SessionSummary,
    status_code=201,
    dependencies=[SizeChecked],
)
async def create_session(
    body: SessionCreate, identity: CurrentIdentity, store: Store
) -> SessionSummary:
    """Create a session (a new id when ``session_id`` is omitted; 409 if the id exists)."""
    check_storable(body)
    check_ids("session_id", [body.session_id])
    return await store.create_session(identity.tenant_id, body)


@router.get("", response_model=SessionList)
async def list_sessions(
    identity: CurrentIdentity,
    store: Store,
    limit: Annotated[int, Query(ge=1, le=MAX_LIST_LIMIT)] = DEFAULT_LIST_LIMIT,
) -> SessionList:
    """The caller's sessions, newest first, with plan counts and last activity."""
    return SessionList(sessions=await store.list_sessions(identity.tenant_id, limit=limit))


@router.get("/{session_id}", responses=error_responses(404), response_model=SessionSummary)
async def get_session(
    session_id: RecordId, identity: CurrentIdentity, store: Store
) -> SessionSummary:
    return await store.get_session(identity.tenant_id, session_id)


@router.delete("/{session_id}", responses=error_responses(404), status_code=204)
async def delete_session(session_id: RecordId, identity: CurrentIdentity, store: Store) -> Response:
    """Delete the session and every plan in it (with their data)."""
    await store.delete_session(identity.tenant_id, session_id)
    return Response(status_code=204)
