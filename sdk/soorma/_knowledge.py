"""Semantic memory (knowledge): ``context.memory.knowledge``.

Facts and documents the service embeds and finds again by meaning. Records are private to
the user the context acts as unless stored with ``public=True`` (then every user of the
tenant finds them). Searches rank by vector similarity fused with keyword search unless
``mode="vector"``.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from soorma._longterm import Send, records_of, request_body
from soorma._segments import path_segment
from soorma_common.errors import NotFound
from soorma_common.knowledge import (
    MAX_BATCH_ITEMS,
    SearchMode,
    SemanticDocumentCreate,
    SemanticMemoryCreate,
    SemanticMemoryRecord,
    SemanticSearch,
    SemanticSearchResult,
)

DEFAULT_SEARCH_LIMIT = 10
DEFAULT_KNOWLEDGE_LIST_LIMIT = 100
DEFAULT_CHUNK_SIZE = 1000
DEFAULT_CHUNK_OVERLAP = 100
# JSON bytes per batch request: under the service's default body limit (256 KiB).
DEFAULT_BATCH_BYTES = 192 * 1024

_BASE = "/v1/memory/semantic"


class KnowledgeMemory:
    """Semantic memory of the tenant and user the memory client acts as.

    Get it as ``context.memory.knowledge``::

        await context.memory.knowledge.add("Refunds take 5 business days.", tags=["billing"])
        found = await context.memory.knowledge.search("how long is a refund?")
        for hit in found.hits:
            print(round(hit.score, 3), hit.record.content)
    """

    def __init__(self, send: Send) -> None:
        self._send = send

    async def add(
        self,
        content: str,
        *,
        external_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        tags: Iterable[str] = (),
        source: str | None = None,
        public: bool = False,
        embedding: Sequence[float] | None = None,
    ) -> SemanticMemoryRecord:
        """Store one piece of knowledge (the service embeds it).

        With ``external_id`` an existing record of that id is replaced (upsert);
        without, storing the same content again returns the stored record.

        Args:
            content: The text.
            external_id: Your id for it (a document id, a URL, a ticket number).
            metadata: JSON fields to filter on in :meth:`search` (equality).
            tags: Labels to filter on.
            source: Where it came from (filterable).
            public: Visible to every user of the tenant (default: this user only).
            embedding: A precomputed vector from the service's embedding model.

        Raises:
            ValidationFailed: empty or oversized content, a NUL byte, a wrong-sized vector.
            ServiceUnavailable: the embedding provider is down (nothing was stored).
        """
        body = request_body(
            SemanticMemoryCreate,
            content=content,
            external_id=external_id,
            metadata=dict(metadata or {}),
            tags=list(tags),
            source=source,
            public=public,
            embedding=[float(x) for x in embedding] if embedding is not None else None,
        )
        data = await self._send("POST", _BASE, json=body)
        return SemanticMemoryRecord.model_validate(data)

    async def add_many(
        self,
        items: Iterable[SemanticMemoryCreate | Mapping[str, Any] | str],
        *,
        batch_bytes: int = DEFAULT_BATCH_BYTES,
    ) -> builtins.list[SemanticMemoryRecord]:
        """Store many pieces, in order, embedded in batches by the service.

        Items are sent in as few requests as fit the service's limits (at most
        ``MAX_BATCH_ITEMS`` items and about ``batch_bytes`` of JSON each); each request
        is one transaction, so when one fails the earlier ones stay stored.

        Args:
            items: Texts, ``SemanticMemoryCreate`` objects or mappings of their fields.
            batch_bytes: Most JSON bytes per request (keep it under the service's
                ``SOORMA_MAX_PAYLOAD_BYTES``).
        """
        stored: builtins.list[SemanticMemoryRecord] = []
        for batch in _batches([_create(item) for item in items], batch_bytes):
            data = await self._send("POST", f"{_BASE}/batch", json={"items": batch})
            stored.extend(SemanticMemoryRecord.model_validate(r) for r in records_of(data))
        return stored

    async def add_document(
        self,
        external_id: str,
        content: str,
        *,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        chunk_overlap: int = DEFAULT_CHUNK_OVERLAP,
        metadata: Mapping[str, Any] | None = None,
        tags: Iterable[str] = (),
        source: str | None = None,
        public: bool = False,
    ) -> builtins.list[SemanticMemoryRecord]:
        """Store a long text as chunks under one parent ``external_id``.

        Storing the same ``external_id`` again replaces all of its chunks together.

        Args:
            external_id: The document's id (each chunk's ``parent_external_id``).
            content: The whole text.
            chunk_size: Most characters per chunk.
            chunk_overlap: Characters repeated from one chunk at the start of the next.

        Returns:
            The stored chunks, in order (``chunk_index`` 0, 1, ...).
        """
        body = request_body(
            SemanticDocumentCreate,
            external_id=external_id,
            content=content,
            chunk_size=chunk_size,
            chunk_overlap=chunk_overlap,
            metadata=dict(metadata or {}),
            tags=list(tags),
            source=source,
            public=public,
        )
        data = await self._send("POST", f"{_BASE}/documents", json=body)
        return [SemanticMemoryRecord.model_validate(r) for r in records_of(data)]

    async def get(self, record_id: str) -> SemanticMemoryRecord | None:
        """One record by its id, or ``None`` when there is none visible to this user."""
        try:
            data = await self._send("GET", f"{_BASE}/{path_segment(record_id)}")
        except NotFound:
            return None
        return SemanticMemoryRecord.model_validate(data)

    async def list(
        self,
        *,
        external_id: str | None = None,
        parent_external_id: str | None = None,
        tag: str | None = None,
        source: str | None = None,
        limit: int = DEFAULT_KNOWLEDGE_LIST_LIMIT,
        offset: int = 0,
    ) -> builtins.list[SemanticMemoryRecord]:
        """Records visible to this user, optionally filtered (no ranking)."""
        params: dict[str, Any] = {"limit": limit, "offset": offset}
        for name, value in (
            ("external_id", external_id),
            ("parent_external_id", parent_external_id),
            ("tag", tag),
            ("source", source),
        ):
            if value is not None:
                params[name] = value
        data = await self._send("GET", _BASE, params=params)
        return [SemanticMemoryRecord.model_validate(r) for r in records_of(data)]

    async def delete(self, record_id: str) -> bool:
        """Delete one record; ``False`` when there was none."""
        try:
            await self._send("DELETE", f"{_BASE}/{path_segment(record_id)}")
        except NotFound:
            return False
        return True

    async def delete_external(self, external_id: str) -> bool:
        """Delete the record with this ``external_id``, or every chunk of the document
        stored under it; ``False`` when there was none."""
        try:
            await self._send("DELETE", f"{_BASE}/by-external-id/{path_segment(external_id)}")
        except NotFound:
            return False
        return True

    async def search(
        self,
        query: str,
        *,
        limit: int = DEFAULT_SEARCH_LIMIT,
        include_public: bool = True,
        tags: Iterable[str] | None = None,
        source: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        min_score: float | None = None,
        mode: SearchMode = "hybrid",
        embedding: Sequence[float] | None = None,
    ) -> SemanticSearchResult:
        """The records closest in meaning to ``query``, best first.

        Args:
            query: What to look for, in words.
            limit: Most hits (1-50).
            include_public: Include the tenant's public records (default) or only this
                user's own.
            tags: Only records carrying these tags.
            source: Only records from this source.
            metadata: Only records whose metadata has these values (equality).
            min_score: Leave out hits scoring lower.
            mode: ``"hybrid"`` (vector similarity fused with keyword search, so exact
                names and codes are found too) or ``"vector"`` (similarity only).
            embedding: The query's vector, precomputed with the service's model: the
                service does not embed ``query`` (keyword ranking still uses it).

        Raises:
            ValidationFailed: an out-of-range limit, an oversized query, a bad filter.
            ServiceUnavailable: the embedding provider is down (names it).
        """
        body = request_body(
            SemanticSearch,
            query=query,
            limit=limit,
            include_public=include_public,
            tags=list(tags or ()),
            source=source,
            metadata=dict(metadata or {}),
            min_score=min_score,
            mode=mode,
            embedding=[float(x) for x in embedding] if embedding is not None else None,
        )
        data = await self._send("POST", f"{_BASE}/search", json=body)
        return SemanticSearchResult.model_validate(data)


def _batches(
    bodies: builtins.list[dict[str, Any]], max_bytes: int
) -> builtins.list[builtins.list[dict[str, Any]]]:
    """``bodies`` split into requests of at most ``MAX_BATCH_ITEMS`` items and about
    ``max_bytes`` of JSON (an item larger than that goes alone)."""
    batches: builtins.list[builtins.list[dict[str, Any]]] = []
    current: builtins.list[dict[str, Any]] = []
    size = 0
    for body in bodies:
        item_size = len(json.dumps(body, separators=(",", ":"))) + 1
        if current and (len(current) >= MAX_BATCH_ITEMS or size + item_size > max_bytes):
            batches.append(current)
            current, size = [], 0
        current.append(body)
        size += item_size
    if current:
        batches.append(current)
    return batches


def _create(item: SemanticMemoryCreate | Mapping[str, Any] | str) -> dict[str, Any]:
    if isinstance(item, SemanticMemoryCreate):
        return item.model_dump(mode="json", exclude_none=True)
    if isinstance(item, str):
        return request_body(SemanticMemoryCreate, content=item)
    if isinstance(item, Mapping):
        return request_body(SemanticMemoryCreate, **item)
    raise TypeError(
        f"items must be texts, SemanticMemoryCreate or mappings, got {type(item).__name__}"
    )


__all__ = [
    "DEFAULT_BATCH_BYTES",
    "DEFAULT_CHUNK_OVERLAP",
    "DEFAULT_CHUNK_SIZE",
    "DEFAULT_SEARCH_LIMIT",
    "KnowledgeMemory",
]
