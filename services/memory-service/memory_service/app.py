"""App factory for the memory-service."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI

from memory_service.embeddings import make_embedder
from memory_service.fastpath import FastPaths, PlanContextFastPath
from memory_service.longterm.service import LongTermMemory
from memory_service.longterm.store import LongTermStore
from memory_service.retention import long_term_retention, run_long_term_pruner, run_pruner
from memory_service.routes import ROUTERS
from memory_service.search_fastpath import SemanticSearchFastPath
from memory_service.settings import Settings
from memory_service.sql import open_sql_store
from memory_service.sql.answers import SqlAnswers
from memory_service.sql.claims import SqlClaims
from servicekit import create_service_app
from servicekit.db import database_url
from soorma_common.clock import SYSTEM_CLOCK, Clock

LONG_TERM_MAX_BODY_BYTES = 8 * 1024 * 1024


@functools.cache
def _freeze_start_up_heap() -> None:
    """Move everything built at start-up out of the collector's generations, once a process.

    The app, routes, models, SQLAlchemy metadata and statements live as long as the
    process: frozen, full collections stay short (measured under load: 46-112 ms each
    before, < 3 ms after), and those pauses were the p99 latency of every request in
    flight. Once: a process that starts many apps (a test suite, the harness) would pay
    a full collection for each and freeze each one's garbage-to-be.
    """
    gc.collect()
    gc.freeze()


def create_app(
    settings: Settings | None = None,
    *,
    fast_path: PlanContextFastPath | None = None,
    search_fast_path: SemanticSearchFastPath | None = None,
    clock: Clock = SYSTEM_CLOCK,
) -> FastAPI:
    """Build the memory-service app. Nothing connects until the lifespan starts.

    The lifespan opens the SQL store (applying migrations), starts the retention pruner
    and yields the store as request state (``request.state.store``).

    Args:
        settings: Service settings (from the environment when omitted).
        fast_path: The plan-context fast path to use when
            ``settings.plan_context_fast_path`` is on (``SOORMA_PLAN_CONTEXT_FAST_PATH``,
            the switch; default: a new :class:`PlanContextFastPath`). Off, FastAPI's
            routes answer every request.
        search_fast_path: The semantic-search fast path to use when
            ``settings.semantic_search_fast_path`` is on
            (``SOORMA_SEMANTIC_SEARCH_FAST_PATH``; default: a new
            :class:`SemanticSearchFastPath`).
        clock: Time for claims on requests (their leases) and recorded answers (their
            retention): a test passes a ``ManualClock`` and lets a lease run out
            without waiting.
    """
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, Any]]:
        url = database_url(settings, "memory", settings.memory_database_url)
        store = await open_sql_store(url)
        longterm = LongTermMemory(
            await LongTermStore.open(
                store.engine,
                seal_rows=settings.memory_vector_seal_rows,
                idle_seconds=settings.memory_vector_idle_seconds,
                build_memory_mb=settings.memory_vector_build_memory_mb,
            ),
            make_embedder(
                settings.embedding_model,
                api_base=settings.embedding_api_base,
                api_key=settings.embedding_api_key,
                dimensions=settings.embedding_dimensions,
                batch_size=settings.embedding_batch_size,
                retries=settings.embedding_retries,
                timeout_seconds=settings.embedding_timeout_seconds,
            ),
            reembed_batch=settings.reembed_batch_size,
        )
        await longterm.start()
        pruner = None
        if settings.memory_retention_days > 0:
            pruner = asyncio.create_task(
                run_pruner(
                    store,
                    retention_days=settings.memory_retention_days,
                    interval=settings.memory_prune_interval_seconds,
                ),
                name="memory-retention",
            )
        retention = long_term_retention(settings)
        long_term_pruner = None
        if retention and longterm.store.available:
            long_term_pruner = asyncio.create_task(
                run_long_term_pruner(
                    longterm, retention, interval=settings.memory_prune_interval_seconds
                ),
                name="memory-long-term-retention",
            )
        _freeze_start_up_heap()
        try:
            # Requests get the store with each call timed (storage latency metrics).
            metrics = getattr(app, "metrics", None)
            served = metrics.timed_store(store) if metrics is not None else store
            yield {
                "store": served,
                "answers": SqlAnswers(engine=store.engine, clock=clock),
                "claims": SqlClaims(engine=store.engine, clock=clock),
                "longterm": longterm,
                "ready_checks": {"database": store.ping},
            }
        finally:
            for task in (pruner, long_term_pruner):
                if task is not None:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
            await longterm.close()
            await store.close()

    # Batches of 1,000 items and long documents: each body is still validated per
    # field (content, query, item count) by the long-term memory DTOs.
    max_body_bytes = max(settings.max_payload_bytes * 4, LONG_TERM_MAX_BODY_BYTES)
    # The accelerator switches: each fast path is on unless its setting turns it off.
    paths: list[PlanContextFastPath | SemanticSearchFastPath] = []
    if settings.plan_context_fast_path:
        paths.append(fast_path or PlanContextFastPath(settings=settings))
    if settings.semantic_search_fast_path:
        paths.append(
            search_fast_path
            or SemanticSearchFastPath(settings=settings, max_body_bytes=max_body_bytes)
        )
    return create_service_app(
        name="memory-service",
        settings=settings,
        lifespan=lifespan,
        routers=ROUTERS,
        fast_path=FastPaths(*paths) if paths else None,
        max_body_bytes=max_body_bytes,
    )
