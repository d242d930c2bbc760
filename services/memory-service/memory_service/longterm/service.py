"""Long-term memory as the routes see it: embed, then store; search and rank.

The embedder is called before any write, so a provider that is down (503) leaves nothing
half-written. Hybrid search fuses two rankings by reciprocal rank (:func:`fuse`): vector
similarity over records on the active model, and keyword relevance (PostgreSQL
full-text, SQLite FTS5) over every record, so a record still on an old model during a
re-embed is found by its words.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import orjson

from memory_service.embeddings import Embedder, check_vector
from memory_service.longterm.store import (
    ActiveModel,
    LongTermStore,
    Ranked,
    semantic_fields_from_pg,
)
from soorma_common.errors import EmbeddingMismatch
from soorma_common.knowledge import (
    RRF_K,
    EmbeddingInfo,
    EpisodeCreate,
    EpisodeHit,
    EpisodeRecord,
    EpisodeSearch,
    EpisodeSearchResult,
    ForgetResult,
    ProcedureCreate,
    ProcedureHit,
    ProcedureQuery,
    ProcedureQueryResult,
    ProcedureRecord,
    ReembedStatus,
    SemanticDocumentCreate,
    SemanticHit,
    SemanticMemoryCreate,
    SemanticMemoryRecord,
    SemanticSearch,
    SemanticSearchResult,
    chunk_text,
)

log = logging.getLogger("memory_service.longterm")

TABLES = ("memory_semantic", "memory_episodes", "memory_procedures")
_result_json = SemanticSearchResult.__pydantic_serializer__.to_json


def fuse(
    vector: Sequence[Ranked], keyword: Sequence[Ranked], *, k: int = RRF_K
) -> list[tuple[str, float, int | None, int | None]]:
    """Reciprocal-rank fusion: ``score = Σ 1/(k + rank)`` over the lists an id is in.

    Returns ``(id, score, vector_rank, keyword_rank)`` best first (ranks are 1-based).
    """
    vector_rank = {hit.id: i + 1 for i, hit in enumerate(vector)}
    keyword_rank = {hit.id: i + 1 for i, hit in enumerate(keyword)}
    fused = []
    for record_id in dict.fromkeys([*vector_rank, *keyword_rank]):
        vr, kr = vector_rank.get(record_id), keyword_rank.get(record_id)
        score = (1.0 / (k + vr) if vr else 0.0) + (1.0 / (k + kr) if kr else 0.0)
        fused.append((record_id, score, vr, kr))
    fused.sort(key=lambda item: (-item[1], item[0]))
    return fused


@dataclass
class ReembedJob:
    state: str = "idle"
    done: int = 0
    total: int = 0
    error: str | None = None
    task: asyncio.Task[None] | None = field(default=None, repr=False)


class LongTermMemory:
    """Semantic, episodic and procedural memory over a store and an embedder."""

    def __init__(self, store: LongTermStore, embedder: Embedder, *, reembed_batch: int) -> None:
        self.store = store
        self.embedder = embedder
        self._reembed_batch = reembed_batch
        self._job = ReembedJob()
        self._model: ActiveModel | None = None
        self._model_lock = asyncio.Lock()

    async def model(self) -> ActiveModel:
        """The active model; on PostgreSQL its HNSW index is built when first known."""
        if self._model is None:
            async with self._model_lock:
                if self._model is None:
                    model = ActiveModel(self.embedder.model, await self.embedder.dimensions())
                    if self.store.available and self.store.d.pg:
                        await self.store.prepare_model(model)
                        self.store.start_indexing(model)
                    self._model = model
        return self._model

    async def start(self) -> None:
        """Build the active model's vector index now when that needs no provider call."""
        # Only PostgreSQL has an index to build; SQLite must not pay the model's load time
        # (WordLlama: seconds) at every start-up.
        local = self.embedder.provider in ("deterministic", "wordllama")
        if self.store.available and self.store.d.pg and local:
            await self.model()

    async def close(self) -> None:
        await self.store.stop_indexing()
        task = self._job.task
        if task is not None and not task.done():
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
        self.store.close()
        await self.store.close_searches()
        await self.embedder.close()

    async def _embed(self, texts: Sequence[str]) -> list[list[float]]:
        model = await self.model()
        vectors = await self.embedder.embed(texts)
        for vector in vectors:
            if len(vector) != model.dims:
                raise EmbeddingMismatch(
                    f"embedding model {model.name!r} answered {len(vector)} dimensions where "
                    f"{model.dims} are stored; run `soorma memory reembed` after changing "
                    "the model or its dimensions",
                    details={"model": model.name, "dimensions": model.dims},
                )
        return vectors

    async def _vectors_for(self, items: Sequence[SemanticMemoryCreate]) -> list[list[float]]:
        model = await self.model()
        missing = [i for i, item in enumerate(items) if item.embedding is None]
        for item in items:
            vector = item.embedding
            # The request body already refused non-finite values; the full check (and its
            # error) runs only when the dimension or the sum looks wrong.
            if vector is not None and (len(vector) != model.dims or not math.isfinite(sum(vector))):
                check_vector(vector, model=model.name, dimensions=model.dims)
        computed = await self._embed([items[i].content for i in missing]) if missing else []
        vectors: list[list[float]] = [list(item.embedding or []) for item in items]
        for i, vector in zip(missing, computed, strict=True):
            vectors[i] = vector
        return vectors

    # --- semantic -------------------------------------------------------------------------

    async def add_semantic(
        self, tenant: str, user: str, items: Sequence[SemanticMemoryCreate]
    ) -> list[tuple[SemanticMemoryRecord, bool]]:
        self.store.require_available()
        vectors = await self._vectors_for(items)
        return await self.store.semantic_put(tenant, user, items, vectors, await self.model())

    async def add_document(
        self, tenant: str, user: str, body: SemanticDocumentCreate
    ) -> list[SemanticMemoryRecord]:
        self.store.require_available()
        pieces = chunk_text(body.content, body.chunk_size, body.chunk_overlap)
        chunks = [
            SemanticMemoryCreate(
                content=piece,
                metadata=body.metadata,
                tags=body.tags,
                source=body.source,
                public=body.public,
            )
            for piece in pieces
        ]
        vectors = await self._embed([c.content for c in chunks]) if chunks else []
        return await self.store.semantic_replace_document(
            tenant, user, body.external_id, chunks, vectors, await self.model()
        )

    async def _query_vector(self, body: SemanticSearch) -> tuple[ActiveModel, Sequence[float]]:
        """The active model and the search's query vector (given, checked; or embedded)."""
        self.store.require_available()
        model = await self.model()
        if body.embedding is not None:
            check_vector(body.embedding, model=model.name, dimensions=model.dims)
            return model, body.embedding
        return model, (await self._embed([body.query]))[0]

    async def search_semantic_json(self, tenant: str, user: str, body: SemanticSearch) -> bytes:
        """:meth:`search_semantic`'s result as JSON, the bytes its model's serializer
        writes. A pure vector search on PostgreSQL is written straight from the search
        function's rows (:func:`semantic_fields_from_pg`): building and serializing the
        hits' models was about a fifth of the service's CPU per search under B8's load."""
        if body.mode != "vector" or not self.store.vector_rows_direct:
            return _result_json(await self.search_semantic(tenant, user, body))
        model, query_vector = await self._query_vector(body)
        rows = await self.store.semantic_vector_rows(
            tenant,
            user,
            query_vector,
            model,
            k=body.limit,
            include_public=body.include_public,
            tags=body.tags,
            source=body.source,
            metadata=dict(body.metadata),
        )
        hits = []
        for row in rows:
            score = 1.0 - row["distance"]
            if body.min_score is None or score >= body.min_score:
                record = semantic_fields_from_pg(row)
                hits.append(
                    {"record": record, "score": score, "vector_score": score, "keyword_rank": None}
                )
        result = {"hits": hits, "mode": body.mode, "embedding_model": model.name}
        return orjson.dumps(result, option=orjson.OPT_UTC_Z)

    async def search_semantic(
        self, tenant: str, user: str, body: SemanticSearch
    ) -> SemanticSearchResult:
        model, query_vector = await self._query_vector(body)
        vector_mode = body.mode == "vector"
        # Fusion needs deeper lists than the hits it returns; pure vector ranking does not.
        k = body.limit if vector_mode else min(200, max(50, body.limit * 5))
        fused: list[tuple[str, float, int | None, int | None]] = []

        def pick(vector: list[Ranked], keyword: list[Ranked]) -> list[str]:
            if vector_mode:
                return [hit.id for hit in vector[: body.limit]]
            fused.extend(fuse(vector, keyword)[: body.limit])
            return [record_id for record_id, *_ in fused]

        vector_hits, _, records = await self.store.semantic_candidates(
            tenant,
            user,
            query_vector,
            body.query,
            model,
            k=k,
            keyword=not vector_mode,
            pick=pick,
            include_public=body.include_public,
            tags=body.tags,
            source=body.source,
            metadata=dict(body.metadata),
        )
        similarity = {hit.id: hit.value for hit in vector_hits}
        hits: list[SemanticHit] = []
        if vector_mode:
            for hit in vector_hits:
                if hit.id in records:
                    hits.append(
                        SemanticHit(record=records[hit.id], score=hit.value, vector_score=hit.value)
                    )
        else:
            for record_id, score, _vr, kr in fused:
                if record_id in records:
                    hits.append(
                        SemanticHit(
                            record=records[record_id],
                            score=score,
                            vector_score=similarity.get(record_id),
                            keyword_rank=kr,
                        )
                    )
        if body.min_score is not None:
            hits = [hit for hit in hits if hit.score >= body.min_score]
        return SemanticSearchResult(
            hits=hits[: body.limit], mode=body.mode, embedding_model=model.name
        )

    # --- episodic -------------------------------------------------------------------------

    async def add_episode(self, tenant: str, user: str, body: EpisodeCreate) -> EpisodeRecord:
        self.store.require_available()
        vector = (await self._embed([body.content]))[0]
        return await self.store.episode_add(tenant, user, body, vector, await self.model())

    async def search_episodes(
        self, tenant: str, user: str, body: EpisodeSearch
    ) -> EpisodeSearchResult:
        self.store.require_available()
        vector = (await self._embed([body.query]))[0]
        found = await self.store.episode_search(
            tenant,
            user,
            body.agent_id,
            vector,
            await self.model(),
            limit=body.limit,
            since=body.since,
            until=body.until,
            session_id=body.session_id,
        )
        hits = [EpisodeHit(record=r, score=s) for r, s in found]
        if body.min_score is not None:
            hits = [hit for hit in hits if hit.score >= body.min_score]
        return EpisodeSearchResult(hits=hits)

    # --- procedural -----------------------------------------------------------------------

    async def add_procedure(self, tenant: str, user: str, body: ProcedureCreate) -> ProcedureRecord:
        self.store.require_available()
        vector = (await self._embed([body.situation]))[0]
        return await self.store.procedure_add(tenant, user, body, vector, await self.model())

    async def relevant_procedures(
        self, tenant: str, user: str, body: ProcedureQuery
    ) -> ProcedureQueryResult:
        self.store.require_available()
        vector = (await self._embed([body.query]))[0]
        found = await self.store.procedure_relevant(
            tenant,
            user,
            vector,
            await self.model(),
            agent_id=body.agent_id,
            kinds=list(body.kinds) if body.kinds else None,
            limit=body.limit,
        )
        hits = [ProcedureHit(record=r, score=s) for r, s in found]
        if body.min_score is not None:
            hits = [hit for hit in hits if hit.score >= body.min_score]
        return ProcedureQueryResult(hits=hits)

    # --- administration -------------------------------------------------------------------

    async def forget(self, tenant: str, user: str) -> ForgetResult:
        semantic, episodic, procedural = await self.store.forget_user(tenant, user)
        return ForgetResult(
            user_id=user, semantic=semantic, episodic=episodic, procedural=procedural
        )

    async def info(self, tenant: str) -> EmbeddingInfo:
        model = await self.model()
        others = await self.store.count_other_models(tenant, model)
        return EmbeddingInfo(
            model=model.name,
            dimensions=model.dims,
            provider=self.embedder.provider,
            records_on_other_models=others,
        )

    def reembed_status(self) -> ReembedStatus:
        job = self._job
        return ReembedStatus(
            model=self._model.name if self._model else self.embedder.model,
            state=job.state,  # type: ignore[arg-type]
            done=job.done,
            total=job.total,
            error=job.error,
        )

    async def start_reembed(self) -> ReembedStatus:
        """Start re-embedding records on other models (no-op while one is running)."""
        self.store.require_available()
        if self._job.task is None or self._job.task.done():
            model = await self.model()
            await self.store.prepare_model(model)
            total = await self.store.count_other_models(None, model)
            self._job = ReembedJob(state="running", total=total)
            self._job.task = asyncio.create_task(self._reembed(model), name="memory-reembed")
        return self.reembed_status()

    async def _reembed(self, model: ActiveModel) -> None:
        job = self._job
        try:
            for table in TABLES:
                while True:
                    batch = await self.store.stale_batch(table, model, self._reembed_batch)
                    if not batch:
                        break
                    vectors = await self._embed([body for _, body in batch])
                    rows = [
                        (rid, body, vec) for (rid, body), vec in zip(batch, vectors, strict=True)
                    ]
                    await self.store.set_vectors(table, rows, model)
                    job.done += len(rows)
                    # A row rewritten meanwhile keeps its text's new vector; rows that
                    # still differ are picked up again by the next batch.
                    if len(batch) < self._reembed_batch:
                        break
            job.state = "done"
        except asyncio.CancelledError:
            job.state = "failed"
            job.error = "stopped with the service; POST /v1/memory/reembed resumes it"
            raise
        except Exception as exc:
            log.exception("re-embedding failed")
            job.state = "failed"
            job.error = f"{type(exc).__name__}: {str(exc)[:500]}"
