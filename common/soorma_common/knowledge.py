"""Long-term memory DTOs (semantic, episodic, procedural) and their pure helpers.

Semantic memory holds knowledge (text with metadata, tags and a source), episodic memory
holds interactions an agent had, procedural memory holds rules, prompt fragments and
examples with the situation they apply to. The memory service embeds text; clients send
text (or a precomputed ``embedding`` whose dimension matches the service's model).

Two pure functions live here so that the service, the SDK and tests share them:
:func:`chunk_text` (how ``POST /v1/memory/semantic/documents`` splits a document) and
:func:`deterministic_embedding` (the test embedder: texts sharing words are similar).
"""

from __future__ import annotations

import hashlib
import math
import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, Self

from pydantic import ConfigDict, Field, model_validator

from soorma_common.base import BaseDTO
from soorma_common.jsonvalue import json_problem

MAX_CONTENT_CHARS = 32_000
MAX_DOCUMENT_CHARS = 2_000_000
MAX_QUERY_CHARS = 2_000
MAX_ID_CHARS = 256
MAX_EXTERNAL_ID_CHARS = 512
MAX_TAG_CHARS = 128
MAX_TAGS = 64
MAX_SOURCE_CHARS = 1_024
MAX_SITUATION_CHARS = 4_000
MAX_METADATA_KEYS = 64
MAX_EMBEDDING_DIMENSIONS = 8_192
MAX_BATCH_ITEMS = 1_000
MAX_SEARCH_LIMIT = 50
MAX_RECENT_LIMIT = 200
RRF_K = 60
"""Reciprocal-rank fusion constant: a hit's hybrid score is ``Σ 1 / (RRF_K + rank)``."""

METADATA_KEY_PATTERN = r"^[A-Za-z0-9_.\-]{1,64}$"

MemoryKind = Literal["rule", "prompt", "example"]
EpisodeRole = Literal["user", "assistant", "system", "tool"]
SearchMode = Literal["hybrid", "vector"]
FilterValue = str | int | float | bool

Content = Annotated[str, Field(min_length=1, max_length=MAX_CONTENT_CHARS)]
Query = Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS)]
Identifier = Annotated[str, Field(min_length=1, max_length=MAX_ID_CHARS)]
ExternalId = Annotated[str, Field(min_length=1, max_length=MAX_EXTERNAL_ID_CHARS)]
Tag = Annotated[str, Field(min_length=1, max_length=MAX_TAG_CHARS)]
Source = Annotated[str, Field(min_length=1, max_length=MAX_SOURCE_CHARS)]
Situation = Annotated[str, Field(min_length=1, max_length=MAX_SITUATION_CHARS)]
Tags = Annotated[list[Tag], Field(max_length=MAX_TAGS)]
Metadata = Annotated[dict[str, Any], Field(max_length=MAX_METADATA_KEYS)]
SearchLimit = Annotated[int, Field(ge=1, le=MAX_SEARCH_LIMIT)]


class _Input(BaseDTO):
    """A request body: unknown fields, coercions and values the stores cannot keep (NUL
    characters, integers past 64 bits, NaN, nesting past the platform's depth) are refused,
    metadata included."""

    model_config = ConfigDict(extra="forbid", strict=True)

    @model_validator(mode="after")
    def _storable(self) -> Self:
        for name in type(self).model_fields:
            if name == "embedding":
                continue  # numbers only (validated as list[float]); walking them was slow
            problem = json_problem(getattr(self, name), allow_nul=False)
            if problem:
                where, what = problem
                raise ValueError(f"{'.'.join(p for p in (name, where) if p)}: {what}")
        return self


def _check_text(value: str, field: str) -> None:
    if not value.strip():
        raise ValueError(f"{field} must not be empty or only whitespace")


def _check_embedding(embedding: list[float] | None) -> None:
    if embedding is None:
        return
    if not embedding or len(embedding) > MAX_EMBEDDING_DIMENSIONS:
        raise ValueError(f"embedding must have 1-{MAX_EMBEDDING_DIMENSIONS} dimensions")
    # A sum is finite when every value is (one C loop); only then can it be skipped.
    if not math.isfinite(sum(embedding)) and not all(math.isfinite(x) for x in embedding):
        raise ValueError("embedding values must be finite numbers")
    if not any(embedding):
        raise ValueError("embedding must not be all zeros (cosine similarity is undefined)")


# --- semantic memory ----------------------------------------------------------------------


class SemanticMemoryCreate(_Input):
    """Body of ``POST /v1/memory/semantic``: one piece of knowledge.

    With ``external_id`` the write is an upsert on that id (for the caller's user);
    without it, a record with the same content (sha256) is returned instead of a copy.
    ``embedding`` may be precomputed; its dimension must match the service's model.
    """

    content: Content
    external_id: ExternalId | None = None
    metadata: Metadata = Field(default_factory=dict)
    tags: Tags = Field(default_factory=list)
    source: Source | None = None
    public: bool = False
    embedding: list[float] | None = None

    @model_validator(mode="after")
    def _check(self) -> Self:
        _check_text(self.content, "content")
        _check_embedding(self.embedding)
        return self


class SemanticMemoryBatch(_Input):
    """Body of ``POST /v1/memory/semantic/batch`` (each item as a single write, in order)."""

    items: Annotated[list[SemanticMemoryCreate], Field(min_length=1, max_length=MAX_BATCH_ITEMS)]


class SemanticMemoryRecord(BaseDTO):
    """A stored piece of knowledge (a document's chunk has a ``parent_external_id``)."""

    id: str
    external_id: str | None = None
    parent_external_id: str | None = None
    chunk_index: int | None = None
    content: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    tags: list[str] = Field(default_factory=list)
    source: str | None = None
    public: bool = False
    user_id: str
    content_hash: str
    embedding_model: str
    created_at: datetime
    updated_at: datetime


class SemanticDocumentCreate(_Input):
    """Body of ``POST /v1/memory/semantic/documents``: a long text stored as chunks.

    The service splits ``content`` with :func:`chunk_text` and stores chunk ``i`` under
    ``external_id`` ``f"{external_id}#{i}"`` with ``parent_external_id=external_id``; the
    document's previous chunks are replaced in the same transaction.
    """

    external_id: ExternalId
    content: Annotated[str, Field(min_length=1, max_length=MAX_DOCUMENT_CHARS)]
    chunk_size: int = Field(default=1_000, ge=50, le=MAX_CONTENT_CHARS)
    chunk_overlap: int = Field(default=100, ge=0)
    metadata: Metadata = Field(default_factory=dict)
    tags: Tags = Field(default_factory=list)
    source: Source | None = None
    public: bool = False

    @model_validator(mode="after")
    def _check(self) -> Self:
        _check_text(self.content, "content")
        if self.chunk_overlap >= self.chunk_size:
            raise ValueError(
                f"chunk_overlap ({self.chunk_overlap}) must be smaller than "
                f"chunk_size ({self.chunk_size})"
            )
        if "#" in self.external_id:
            raise ValueError("external_id of a document must not contain '#' (chunk ids use it)")
        return self


class SemanticSearch(_Input):
    """Body of ``POST /v1/memory/semantic/search``.

    ``mode="hybrid"`` fuses the vector-similarity rank and the keyword rank by reciprocal
    rank (``score = Σ 1/(60 + rank)``), so exact codes and names are found too;
    ``mode="vector"`` ranks by cosine similarity alone (``score`` is that similarity).
    ``min_score`` applies to the reported ``score``. ``tags`` must all be present;
    ``metadata`` is equality on top-level metadata fields. ``embedding``: the query's
    vector, precomputed with the service's model (the service then does not embed
    ``query``; keyword ranking still reads it).
    """

    query: Query
    embedding: list[float] | None = None
    limit: SearchLimit = 10
    include_public: bool = True
    tags: Tags = Field(default_factory=list)
    source: Source | None = None
    metadata: Annotated[dict[str, FilterValue], Field(max_length=16)] = Field(default_factory=dict)
    min_score: float | None = None
    mode: SearchMode = "hybrid"

    @model_validator(mode="after")
    def _check(self) -> Self:
        _check_text(self.query, "query")
        _check_embedding(self.embedding)
        for key in self.metadata:
            if not re.match(METADATA_KEY_PATTERN, key):
                raise ValueError(
                    f"metadata filter key {key[:80]!r} must match {METADATA_KEY_PATTERN}"
                )
        return self


class SemanticHit(BaseDTO):
    """A search hit. ``vector_score`` is the cosine similarity (None when the record was
    found by keyword only, e.g. it is still on another embedding model); ``keyword_rank``
    is its 1-based keyword rank (None when no query word matched)."""

    record: SemanticMemoryRecord
    score: float
    vector_score: float | None = None
    keyword_rank: int | None = None


class SemanticSearchResult(BaseDTO):
    hits: list[SemanticHit] = Field(default_factory=list)
    mode: SearchMode
    embedding_model: str


# --- episodic memory ----------------------------------------------------------------------


class EpisodeCreate(_Input):
    """Body of ``POST /v1/memory/episodes``: one interaction of an agent with the user."""

    agent_id: Identifier
    role: EpisodeRole
    content: Content
    metadata: Metadata = Field(default_factory=dict)
    session_id: Identifier | None = None
    plan_id: Identifier | None = None

    @model_validator(mode="after")
    def _check(self) -> Self:
        _check_text(self.content, "content")
        return self


class EpisodeRecord(BaseDTO):
    id: str
    agent_id: str
    user_id: str
    role: EpisodeRole
    content: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    session_id: str | None = None
    plan_id: str | None = None
    created_at: datetime
    embedding_model: str


class EpisodeSearch(_Input):
    """Body of ``POST /v1/memory/episodes/search``: by meaning, optionally in a time range
    (``since`` inclusive, ``until`` exclusive). ``score`` is cosine similarity."""

    agent_id: Identifier
    query: Query
    limit: SearchLimit = 10
    since: datetime | None = Field(default=None, strict=False)
    until: datetime | None = Field(default=None, strict=False)
    session_id: Identifier | None = None
    min_score: float | None = None

    @model_validator(mode="after")
    def _check(self) -> Self:
        _check_text(self.query, "query")
        # A time without an offset is UTC.
        if self.since is not None and self.since.tzinfo is None:
            self.since = self.since.replace(tzinfo=UTC)
        if self.until is not None and self.until.tzinfo is None:
            self.until = self.until.replace(tzinfo=UTC)
        if self.since and self.until and self.since >= self.until:
            raise ValueError("since must be before until")
        return self


class EpisodeHit(BaseDTO):
    record: EpisodeRecord
    score: float


class EpisodeSearchResult(BaseDTO):
    hits: list[EpisodeHit] = Field(default_factory=list)


# --- procedural memory --------------------------------------------------------------------


class ProcedureCreate(_Input):
    """Body of ``POST /v1/memory/procedures``: a rule, prompt fragment or few-shot example
    with the ``situation`` it applies to (the situation is what queries are matched to).

    ``agent_id=None`` applies to any agent; ``public=True`` makes it tenant-wide.
    """

    agent_id: Identifier | None = None
    kind: MemoryKind
    content: Content
    situation: Situation
    metadata: Metadata = Field(default_factory=dict)
    tags: Tags = Field(default_factory=list)
    public: bool = False

    @model_validator(mode="after")
    def _check(self) -> Self:
        _check_text(self.content, "content")
        _check_text(self.situation, "situation")
        return self


class ProcedureRecord(BaseDTO):
    id: str
    agent_id: str | None = None
    user_id: str
    kind: MemoryKind
    content: str
    situation: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    tags: list[str] = Field(default_factory=list)
    public: bool = False
    created_at: datetime
    updated_at: datetime
    embedding_model: str


class ProcedureQuery(_Input):
    """Body of ``POST /v1/memory/procedures/relevant``: what applies to ``query``.

    Candidates: the caller's own (for ``agent_id``, or for any agent), tenant-wide
    (``public``) ones, and those with no agent. ``score`` is cosine similarity between
    the query and the procedure's situation.
    """

    query: Query
    agent_id: Identifier | None = None
    kinds: list[MemoryKind] | None = None
    limit: SearchLimit = 5
    min_score: float | None = None

    @model_validator(mode="after")
    def _check(self) -> Self:
        _check_text(self.query, "query")
        return self


class ProcedureHit(BaseDTO):
    record: ProcedureRecord
    score: float


class ProcedureQueryResult(BaseDTO):
    hits: list[ProcedureHit] = Field(default_factory=list)


# --- administration -----------------------------------------------------------------------


class ForgetResult(BaseDTO):
    """Answer of ``DELETE /v1/memory/users/{user_id}``: how many records were deleted."""

    user_id: str
    semantic: int = 0
    episodic: int = 0
    procedural: int = 0


class EmbeddingInfo(BaseDTO):
    """``GET /v1/memory/embedding``: the active model and how many records still use
    another one (``soorma memory reembed`` moves them)."""

    model: str
    dimensions: int
    provider: str
    records_on_other_models: int = 0


class ReembedStatus(BaseDTO):
    """``GET|POST /v1/memory/reembed``: progress of rebuilding vectors on the active model."""

    model: str
    state: Literal["idle", "running", "done", "failed"]
    done: int = 0
    total: int = 0
    error: str | None = None


# --- pure helpers -------------------------------------------------------------------------


def chunk_text(text: str, size: int, overlap: int) -> list[str]:
    """Split ``text`` into chunks of at most ``size`` characters, ``overlap`` shared.

    A chunk ends at the last whitespace in its second half when there is one, so words
    are not cut; chunks are stripped and empty ones dropped. Deterministic, no I/O.

    Raises:
        ValueError: ``size`` < 1, or ``overlap`` not in ``[0, size)``.
    """
    if size < 1:
        raise ValueError("size must be at least 1")
    if not 0 <= overlap < size:
        raise ValueError("overlap must be at least 0 and smaller than size")
    chunks: list[str] = []
    start = 0
    length = len(text)
    while start < length:
        end = min(start + size, length)
        if end < length:
            half = start + size // 2
            cut = max(text.rfind(" ", half, end), text.rfind("\n", half, end))
            if cut > start:
                end = cut
        piece = text[start:end].strip()
        if piece:
            chunks.append(piece)
        if end >= length:
            break
        start = max(end - overlap, start + 1)
    return chunks


_TOKEN = re.compile(r"\w+", re.UNICODE)


def deterministic_embedding(text: str, dims: int) -> list[float]:
    """A unit vector from a hashed bag of the words in ``text`` (lower-cased).

    Texts sharing words have a positive cosine similarity, texts sharing none are
    (apart from hash collisions) orthogonal. For tests and offline demos; no I/O.

    Raises:
        ValueError: ``dims`` < 1.
    """
    if dims < 1:
        raise ValueError("dims must be at least 1")
    vector = [0.0] * dims
    tokens = _TOKEN.findall(text.lower()) or [""]
    for token in tokens:
        digest = hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest()
        vector[int.from_bytes(digest, "big") % dims] += 1.0
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector]


def content_hash(content: str) -> str:
    """The sha256 hex digest semantic memory de-duplicates on."""
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


__all__ = [
    "MAX_BATCH_ITEMS",
    "MAX_CONTENT_CHARS",
    "MAX_QUERY_CHARS",
    "MAX_RECENT_LIMIT",
    "MAX_SEARCH_LIMIT",
    "RRF_K",
    "EmbeddingInfo",
    "EpisodeCreate",
    "EpisodeHit",
    "EpisodeRecord",
    "EpisodeRole",
    "EpisodeSearch",
    "EpisodeSearchResult",
    "ForgetResult",
    "MemoryKind",
    "ProcedureCreate",
    "ProcedureHit",
    "ProcedureQuery",
    "ProcedureQueryResult",
    "ProcedureRecord",
    "ReembedStatus",
    "SearchMode",
    "SemanticDocumentCreate",
    "SemanticHit",
    "SemanticMemoryBatch",
    "SemanticMemoryCreate",
    "SemanticMemoryRecord",
    "SemanticSearch",
    "SemanticSearchResult",
    "chunk_text",
    "content_hash",
    "deterministic_embedding",
]
