"""Long-term memory housekeeping: forget a user, the embedding model, re-embedding."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from memory_service.routes.longterm_deps import LongTerm
from servicekit import CurrentIdentity
from servicekit.auth import require_service
from servicekit.errors import error_responses
from servicekit.jsoncheck import NulFree
from soorma_common.errors import PermissionDenied
from soorma_common.knowledge import EmbeddingInfo, ForgetResult, ReembedStatus

router = APIRouter(
    prefix="/v1/memory", tags=["long-term memory"], responses=error_responses(422, 503)
)


@router.delete("/users/{user_id}", response_model=ForgetResult, responses=error_responses(403))
async def forget_user(
    user_id: Annotated[str, Path(min_length=1, max_length=128), NulFree],
    identity: CurrentIdentity,
    memory: LongTerm,
) -> ForgetResult:
    """Delete every semantic, episodic and procedural record of ``user_id`` in the
    caller's tenant. Allowed to the user themselves and to platform services."""
    if user_id != identity.user_id and not identity.is_service:
        raise PermissionDenied(
            "forgetting another user's memory is for that user or a platform service "
            "(role service)",
            details={"user_id": user_id},
        )
    return await memory.forget(identity.tenant_id, user_id)


@router.get("/embedding", response_model=EmbeddingInfo)
async def embedding_info(identity: CurrentIdentity, memory: LongTerm) -> EmbeddingInfo:
    """The active embedding model and how many of the tenant's records are on another."""
    return await memory.info(identity.tenant_id)


@router.post(
    "/reembed", response_model=ReembedStatus, status_code=202, responses=error_responses(403)
)
async def start_reembed(identity: CurrentIdentity, memory: LongTerm) -> ReembedStatus:
    """Re-embed (in the background, batch by batch) every record whose vector is on
    another model; search keeps answering meanwhile. Platform services only."""
    require_service(identity, "POST /v1/memory/reembed")
    return await memory.start_reembed()


@router.get("/reembed", response_model=ReembedStatus)
async def reembed_status(identity: CurrentIdentity, memory: LongTerm) -> ReembedStatus:
    return memory.reembed_status()
