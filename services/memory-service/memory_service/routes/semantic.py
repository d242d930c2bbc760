"""``/v1/memory/semantic``: knowledge, stored with its vector, found by meaning and words."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from fastapi.routing import APIRoute

from memory_service import jsonbody
from memory_service.routes.longterm_deps import (
    ExternalIdPath,
    LongTerm,
    MemoryId,
    OptionalExternalId,
    OptionalSource,
)
from servicekit import CurrentIdentity
from servicekit.errors import error_responses
from servicekit.jsoncheck import NulFree
from soorma_common.knowledge import (
    MAX_TAG_CHARS,
    SemanticDocumentCreate,
    SemanticMemoryBatch,
    SemanticMemoryCreate,
    SemanticMemoryRecord,
    SemanticSearch,
    SemanticSearchResult,
)


class _OrjsonRequest(Request):
    """A request whose JSON body is read by :func:`memory_service.jsonbody.loads`."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = jsonbody.loads(await self.body())
        return self._json


class _OrjsonRoute(APIRoute):
    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            return await handler(_OrjsonRequest(request.scope, request.receive))

        return route


router = APIRouter(
    prefix="/v1/memory/semantic",
    tags=["semantic memory"],
    responses=error_responses(422, 503),
    route_class=_OrjsonRoute,
)

MAX_LIST_LIMIT = 1000


@router.post(
    "",
    response_model=SemanticMemoryRecord,
    status_code=201,
    responses={
        200: {
            "model": SemanticMemoryRecord,
            "description": "Already stored: the record updated by external_id, or the one "
            "with the same content",
        }
    },
)
async def add_semantic(
    body: SemanticMemoryCreate, identity: CurrentIdentity, memory: LongTerm, response: Response
) -> SemanticMemoryRecord:
    """Store knowledge: 201 when new; 200 when ``external_id`` updated an existing record
    or the same content (sha256) was already stored for this user (that record returned)."""
    [(record, created)] = await memory.add_semantic(identity.tenant_id, identity.user_id, [body])
    if not created:
        response.status_code = 200
    return record


@router.post("/batch", response_model=list[SemanticMemoryRecord])
async def add_semantic_batch(
    body: SemanticMemoryBatch, identity: CurrentIdentity, memory: LongTerm
) -> list[SemanticMemoryRecord]:
    """Store up to 1,000 items in one transaction (each as ``POST /semantic`` would), in
    order; missing embeddings are computed in batches first, so a provider error stores
    nothing."""
    stored = await memory.add_semantic(identity.tenant_id, identity.user_id, body.items)
    return [record for record, _ in stored]


@router.post("/documents", response_model=list[SemanticMemoryRecord], status_code=201)
async def add_document(
    body: SemanticDocumentCreate, identity: CurrentIdentity, memory: LongTerm
) -> list[SemanticMemoryRecord]:
    """Split a long text into chunks (``chunk_text``) stored as ``{external_id}#{i}``; the
    document's previous chunks are replaced in the same transaction."""
    return await memory.add_document(identity.tenant_id, identity.user_id, body)


@router.post("/search", response_model=SemanticSearchResult)
async def search_semantic(
    body: SemanticSearch, identity: CurrentIdentity, memory: LongTerm
) -> SemanticSearchResult:
    """Ranked hits for a query: hybrid (reciprocal-rank fusion of vector and keyword
    ranks, ``score = Σ 1/(60 + rank)``) or pure vector (``score`` = cosine similarity)."""
    return await memory.search_semantic(identity.tenant_id, identity.user_id, body)


@router.get("", response_model=list[SemanticMemoryRecord])
async def list_semantic(
    identity: CurrentIdentity,
    memory: LongTerm,
    external_id: OptionalExternalId = None,
    parent_external_id: OptionalExternalId = None,
    tag: Annotated[str | None, Query(min_length=1, max_length=MAX_TAG_CHARS), NulFree] = None,
    source: OptionalSource = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIST_LIMIT)] = 100,
    offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
) -> list[SemanticMemoryRecord]:
    """The caller's records and the tenant's public ones, oldest first (chunks in order)."""
    memory.store.require_available()
    return await memory.store.semantic_list(
        identity.tenant_id,
        identity.user_id,
        external_id=external_id,
        parent_external_id=parent_external_id,
        tag=tag,
        source=source,
        limit=limit,
        offset=offset,
    )


@router.get("/{record_id}", response_model=SemanticMemoryRecord, responses=error_responses(404))
async def get_semantic(
    record_id: MemoryId, identity: CurrentIdentity, memory: LongTerm
) -> SemanticMemoryRecord:
    return await memory.store.semantic_get(identity.tenant_id, identity.user_id, record_id)


@router.delete("/by-external-id/{external_id}", status_code=204, responses=error_responses(404))
async def delete_semantic_by_external_id(
    external_id: ExternalIdPath, identity: CurrentIdentity, memory: LongTerm
) -> Response:
    """Delete the record with this external id and every chunk whose parent it is."""
    await memory.store.semantic_delete_external(identity.tenant_id, identity.user_id, external_id)
    return Response(status_code=204)


@router.delete("/{record_id}", status_code=204, responses=error_responses(404))
async def delete_semantic(
    record_id: MemoryId, identity: CurrentIdentity, memory: LongTerm
) -> Response:
    """Delete one of the caller's own records (a public record only by its owner)."""
    await memory.store.semantic_delete(identity.tenant_id, identity.user_id, record_id)
    return Response(status_code=204)
