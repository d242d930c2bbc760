"""``/v1/memory/episodes``: what an agent and a user said and did, private to both."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from memory_service.routes.longterm_deps import LongTerm, MemoryId, OptionalId
from servicekit import CurrentIdentity
from servicekit.errors import error_responses
from servicekit.jsoncheck import NulFree
from soorma_common.knowledge import (
    MAX_ID_CHARS,
    MAX_RECENT_LIMIT,
    EpisodeCreate,
    EpisodeRecord,
    EpisodeSearch,
    EpisodeSearchResult,
)

router = APIRouter(
    prefix="/v1/memory/episodes", tags=["episodic memory"], responses=error_responses(422, 503)
)


@router.post("", response_model=EpisodeRecord, status_code=201)
async def add_episode(
    body: EpisodeCreate, identity: CurrentIdentity, memory: LongTerm
) -> EpisodeRecord:
    return await memory.add_episode(identity.tenant_id, identity.user_id, body)


@router.get("/recent", response_model=list[EpisodeRecord])
async def recent_episodes(
    identity: CurrentIdentity,
    memory: LongTerm,
    agent_id: Annotated[str, Query(min_length=1, max_length=MAX_ID_CHARS), NulFree],
    limit: Annotated[int, Query(ge=1, le=MAX_RECENT_LIMIT)] = 20,
    session_id: OptionalId = None,
) -> list[EpisodeRecord]:
    """The ``limit`` most recent episodes of this agent with the caller, oldest first."""
    memory.store.require_available()
    return await memory.store.episodes_recent(
        identity.tenant_id, identity.user_id, agent_id, limit=limit, session_id=session_id
    )


@router.post("/search", response_model=EpisodeSearchResult)
async def search_episodes(
    body: EpisodeSearch, identity: CurrentIdentity, memory: LongTerm
) -> EpisodeSearchResult:
    """Episodes by meaning (cosine similarity), optionally within ``[since, until)``."""
    return await memory.search_episodes(identity.tenant_id, identity.user_id, body)


@router.delete("/{record_id}", status_code=204, responses=error_responses(404))
async def delete_episode(
    record_id: MemoryId, identity: CurrentIdentity, memory: LongTerm
) -> Response:
    await memory.store.episode_delete(identity.tenant_id, identity.user_id, record_id)
    return Response(status_code=204)
