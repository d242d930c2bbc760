"""Vector index of semantic memory on PostgreSQL, built in bulk by segments.

pgvector inserts into an HNSW index row by row: each row searches the graph and rewrites
its neighbours' pages, and that capped ingest at a few hundred rows a second (B8). Here
rows land unindexed and the index is built in bulk instead:

- Every row has an immutable ``seq`` (an identity column, in insert order). A *segment*
  is a range ``[lo, hi)`` of ``seq`` with its own partial HNSW index, built once by
  ``CREATE INDEX CONCURRENTLY ... WHERE <active model> AND seq >= lo AND seq < hi``.
  Rows never move: sealing and merging only build and drop indexes.
- A search ranks each segment of the *cover* (segments tiling ``[0, sealed_hi)``) through
  its index and the *tail* (``seq >= sealed_hi``: rows not yet sealed) exactly, and
  merges the per-branch top k (one statement, ``UNION ALL``).
- A builder (one per cluster: an advisory lock) seals the tail once it holds
  ``seal_rows`` rows, merges the newest segments so that few remain (sizes roughly
  double from newest to oldest), and when writes pause for ``idle_seconds`` merges
  everything into one index, the state searches are fastest in.

Correctness never depends on an index: any tiling of ``seq`` into ranges gives the same
hits (an index only makes its range fast, and with ``hnsw.iterative_scan`` filters keep
working), so a build killed half-way (an INVALID index, ignored by the planner and dropped
by the next builder) loses nothing. The cover is read from the catalog (valid indexes
named ``msv_<model tag>_<lo>_<hi>``): there is no second record of it to keep in step.
Updates (upsert by external id, re-embedding) keep the row's ``seq``, so the new version
enters its segment's index row by row, as before; rows on another model are in no index.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from memory_service.longterm.schema import STATIC_SEARCH_PREFIX, drop_static_search_functions

log = logging.getLogger("memory_service.longterm.segments")

TABLE = "memory_semantic"
# Advisory lock key of the builder (any constant unique to this purpose).
BUILDER_LOCK = 0x50_6F_72_6D_61_17
_NAME = re.compile(r"^msv_([0-9a-f]{12})_(\d+)_(\d+)$")
DEFAULT_SEAL_ROWS = 5_000
DEFAULT_IDLE_SECONDS = 2.0
DEFAULT_BUILD_MEMORY_MB = 512
# At most this many segments at once: more are merged even while the tail is small.
MAX_SEGMENTS = 6
# While writes go on, sealed tails are not merged until there are this many segments:
# a merge rebuilds rows already indexed, and on a small machine those builds took the
# CPU a bulk load's inserts needed (B8: 100,000 chunks at 1,663/s with merges during the
# load, 3,191/s with no builds at all). Writes pausing merge everything into one index.
MAX_SEGMENTS_WRITING = 16


@functools.lru_cache(maxsize=64)
def model_tag(name: str, dims: int) -> str:
    """The model's short name in index names (every search reads its cover by it)."""
    return hashlib.sha256(f"{name}@{dims}".encode()).hexdigest()[:12]


def index_name(tag: str, lo: int, hi: int) -> str:
    return f"msv_{tag}_{lo}_{hi}"


@dataclass(frozen=True, slots=True)
class Cover:
    """Segments tiling ``[0, sealed_hi)`` in order; rows at or after ``sealed_hi`` are
    the tail, searched exactly."""

    segments: tuple[tuple[int, int], ...] = ()

    @property
    def sealed_hi(self) -> int:
        return self.segments[-1][1] if self.segments else 0


def choose_cover(ranges: Sequence[tuple[int, int]]) -> Cover:
    """The widest tiling from 0 that the valid indexes' ranges allow (a merged range
    wins over the pieces it replaces while both exist)."""
    by_lo: dict[int, int] = {}
    for lo, hi in ranges:
        if hi > lo:
            by_lo[lo] = max(by_lo.get(lo, lo), hi)
    out: list[tuple[int, int]] = []
    cur = 0
    while cur in by_lo:
        out.append((cur, by_lo[cur]))
        cur = by_lo[cur]
    return Cover(tuple(out))


def layout_prefix(tag: str, cover: Cover) -> str:
    """Name prefix of the generated search functions of one cover (``static_name``)."""
    layout = hashlib.sha256(repr(cover.segments).encode()).hexdigest()[:8]
    return f"{STATIC_SEARCH_PREFIX}{tag}_{layout}_"


def static_name(tag: str, cover: Cover, sql: str) -> str:
    """The generated search function running ``sql`` (a ranking over ``cover``)."""
    return layout_prefix(tag, cover) + hashlib.sha256(sql.encode()).hexdigest()[:12]


@dataclass(frozen=True, slots=True)
class Build:
    """Build the index of ``[lo, hi)``, then drop the indexes of ``replaces``."""

    lo: int
    hi: int
    replaces: tuple[tuple[int, int], ...]


def plan_step(
    cover: Cover,
    sizes: Sequence[int],
    tail_rows: int,
    next_seq: int,
    *,
    idle: bool,
    seal_rows: int,
    max_segments: int = MAX_SEGMENTS,
    max_segments_writing: int = MAX_SEGMENTS_WRITING,
) -> Build | None:
    """The builder's next step (pure): ``sizes`` are the rows of each cover segment,
    ``tail_rows`` those at or after ``cover.sealed_hi`` (active model), ``next_seq`` is
    past every row's ``seq``. None: nothing to do."""
    segments, sizes = list(cover.segments), list(sizes)
    if idle and tail_rows + len(segments) > 1 and (segments or tail_rows):
        # Writes paused: everything into one index, the fastest state to search, when
        # what lies outside the largest segment is worth a rebuild of it (at least an
        # eighth of it: rebuilds stay geometric under a trickle of writes).
        largest = max(sizes, default=0)
        if (sum(sizes) - largest + tail_rows) * 8 >= largest and (
            len(segments) > 1 or tail_rows >= max(1, seal_rows // 10) or not segments
        ):
            return Build(0, max(next_seq, cover.sealed_hi), tuple(segments))
    if tail_rows >= seal_rows and not idle and len(segments) < max_segments_writing:
        # Writes go on: seal the tail on its own (each row built once during a load).
        return Build(cover.sealed_hi, max(next_seq, cover.sealed_hi), ())
    if tail_rows >= seal_rows or (idle and tail_rows >= max(1, seal_rows // 10)):
        lo, hi, size = cover.sealed_hi, max(next_seq, cover.sealed_hi), tail_rows
        replaces: list[tuple[int, int]] = []
    elif len(segments) > (max_segments if idle else max(max_segments, max_segments_writing)):
        (lo, _), (_, hi) = segments[-2], segments[-1]
        return Build(lo, hi, tuple(segments[-2:]))
    else:
        return None
    # Merge the newest segments into the new one while they are not larger than it:
    # sizes then at least double from newest to oldest, so there are about
    # log2(rows / seal_rows) segments and each row is built about that many times.
    while segments and (sizes[-1] <= size or len(segments) >= max_segments):
        replaces.append(segments.pop())
        size += sizes.pop()
        lo = replaces[-1][0]
    if hi <= lo:
        return None
    return Build(lo, hi, tuple(sorted(replaces)))


class SegmentIndex:
    """The cover of the active model (cached, refreshed from the catalog) and the
    builder task that seals and merges segments (PostgreSQL only)."""

    REFRESH_SECONDS = 1.0
    POLL_SECONDS = 0.5
    SWEEP_SECONDS = 30.0

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        seal_rows: int = DEFAULT_SEAL_ROWS,
        idle_seconds: float = DEFAULT_IDLE_SECONDS,
        build_memory_mb: int = DEFAULT_BUILD_MEMORY_MB,
    ) -> None:
        self.engine = engine
        self.seal_rows = seal_rows
        self.idle_seconds = idle_seconds
        self.build_memory_mb = build_memory_mb
        self._covers: dict[str, tuple[float, Cover]] = {}
        self._task: asyncio.Task[None] | None = None
        self.builds = 0

    # --- the cover ----------------------------------------------------------------------

    async def _valid_ranges(self, conn: Any, tag: str) -> list[tuple[int, int]]:
        rows = await conn.fetch(
            "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE i.indrelid = $1::regclass AND i.indisvalid AND c.relname LIKE $2",
            TABLE,
            f"msv\\_{tag}\\_%",
        )
        out = []
        for row in rows:
            match = _NAME.match(row["relname"])
            if match:
                out.append((int(match[2]), int(match[3])))
        return out

    async def cover(self, name: str, dims: int, conn: Any) -> Cover:
        """The cover searches use (at most ``REFRESH_SECONDS`` old: another process may
        build; a stale cover is still a correct tiling, only slower); ``conn``: an
        asyncpg connection to read the catalog on when the cached cover is too old."""
        tag = model_tag(name, dims)
        cached = self._covers.get(tag)
        now = time.monotonic()
        if cached is not None and now - cached[0] < self.REFRESH_SECONDS:
            return cached[1]
        cover = choose_cover(await self._valid_ranges(conn, tag))
        self._covers[tag] = (now, cover)
        return cover

    # --- the builder --------------------------------------------------------------------

    def start(self, name: str, dims: int) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(name, dims), name="memory-vector-builder")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self, name: str, dims: int) -> None:
        while True:
            try:
                await self._serve(name, dims)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("vector index builder failed; retrying")
                await asyncio.sleep(5.0)

    async def _serve(self, name: str, dims: int) -> None:
        async with self.engine.connect() as sa:
            await sa.execution_options(isolation_level="AUTOCOMMIT")
            conn = (await sa.get_raw_connection()).driver_connection
            assert conn is not None
            # One builder per database; the others wait here (their covers refresh).
            while True:
                if await conn.fetchval("SELECT pg_try_advisory_lock($1)", BUILDER_LOCK):
                    break
                await asyncio.sleep(self.POLL_SECONDS * 4)
            try:
                await conn.execute(f"SET maintenance_work_mem = '{int(self.build_memory_mb)}MB'")
                await self._drop_invalid(conn)
                await self._loop(conn, name, dims)
            finally:
                with contextlib.suppress(Exception):
                    await conn.execute("RESET maintenance_work_mem")
                    await conn.fetchval("SELECT pg_advisory_unlock($1)", BUILDER_LOCK)

    async def _drop_invalid(self, conn: Any) -> None:
        """Indexes left INVALID by a build that was killed (never used by the planner)."""
        rows = await conn.fetch(
            "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE i.indrelid = $1::regclass AND NOT i.indisvalid AND c.relname LIKE 'msv\\_%'",
            TABLE,
        )
        for row in rows:
            log.info("dropping the unfinished vector index %s", row["relname"])
            await conn.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{row["relname"]}"')

    async def _loop(self, conn: Any, name: str, dims: int) -> None:
        tag = model_tag(name, dims)
        literal = name.replace("'", "''")
        on_model = f"embedding_model = '{literal}' AND embedding_dims = {int(dims)}"
        last_seq: int | None = None
        analyzed = 0
        counted: dict[tuple[int, int], int] = {}
        changed_at = time.monotonic()
        swept: tuple[str, float] = ("", 0.0)
        while True:
            ranges = await self._valid_ranges(conn, tag)
            cover = choose_cover(ranges)
            self._covers[tag] = (time.monotonic(), cover)
            keep = layout_prefix(tag, cover)
            if keep != swept[0] or time.monotonic() - swept[1] >= self.SWEEP_SECONDS:
                # Search functions of other covers (a search still holding an older
                # cover finds its function gone and uses SEARCH_FUNCTION instead).
                try:
                    await conn.execute(drop_static_search_functions(keep))
                except Exception as exc:  # e.g. a search creating one meanwhile
                    log.info("search functions not swept: %s", exc)
                swept = (keep, time.monotonic())
            next_seq = int(await conn.fetchval(f"SELECT coalesce(max(seq), 0) + 1 FROM {TABLE}"))
            if next_seq != last_seq:
                last_seq, changed_at = next_seq, time.monotonic()
            if next_seq > analyzed * 1.25 + 1000:
                # Statistics that lag a bulk load make the planner scan a user's rows
                # for each batch's key lookups instead of probing the key index (and
                # misjudge searches); autovacuum's analyze comes too late for a load.
                await conn.execute(f"ANALYZE {TABLE}")
                analyzed = next_seq
            idle = time.monotonic() - changed_at >= self.idle_seconds
            tail = int(
                await conn.fetchval(
                    f"SELECT count(*) FROM {TABLE} WHERE seq >= $1 AND {on_model}",
                    cover.sealed_hi,
                )
            )
            # A segment's range never changes, so its row count is counted once (only
            # the merge policy reads it: drift from later deletes does not matter).
            for lo, hi in cover.segments:
                if (lo, hi) not in counted:
                    counted[(lo, hi)] = int(
                        await conn.fetchval(
                            f"SELECT count(*) FROM {TABLE} WHERE seq >= $1 AND seq < $2 "
                            f"AND {on_model}",
                            lo,
                            hi,
                        )
                    )
            sizes = [counted[segment] for segment in cover.segments]
            step = plan_step(cover, sizes, tail, next_seq, idle=idle, seal_rows=self.seal_rows)
            kept = set(cover.segments)
            leftovers = [r for r in ranges if r not in kept]
            if step is None:
                # Pieces a finished merge replaced but a crash left behind.
                for lo, hi in leftovers:
                    name = index_name(tag, lo, hi)
                    await conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
                await asyncio.sleep(self.POLL_SECONDS)
                continue
            await self._build(conn, tag, on_model, dims, step)

    async def _build(self, conn: Any, tag: str, on_model: str, dims: int, step: Build) -> None:
        name = index_name(tag, step.lo, step.hi)
        started = time.monotonic()
        # CONCURRENTLY: writers go on meanwhile, and a build that dies leaves an INVALID
        # index (ignored by searches), never a half-built valid one.
        await conn.execute(
            f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON {TABLE} USING hnsw "
            f"((embedding::vector({int(dims)})) vector_cosine_ops) "
            f"WHERE {on_model} AND seq >= {step.lo} AND seq < {step.hi}"
        )
        self.builds += 1
        log.info(
            "vector index %s built in %.1f s (replaces %d)",
            name,
            time.monotonic() - started,
            len(step.replaces),
        )
        # Searches planned from now on use the new index (the refreshed cover prefers the
        # wider range); the replaced ones go once their last searches finish.
        self._covers.pop(tag, None)
        for lo, hi in step.replaces:
            if (lo, hi) != (step.lo, step.hi):
                await conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {index_name(tag, lo, hi)}")


def ranking_sql(
    cover: Cover,
    *,
    columns: str,
    distance: str,
    where: str,
    tenant: str = ":t",
    limit: str = ":k",
) -> str:
    """One statement ranking every segment through its index and the tail exactly,
    best ``limit`` overall (``where``: scope and active model, alias ``s``).

    A segment holding none of the tenant's rows is skipped by a one-time check (the
    gate): a filtered HNSW scan finding nothing would walk its whole graph first. The
    gate reads the tenant's first ``seq`` in the range in index order (``ORDER BY ...
    LIMIT 1``), which only a btree answers without reading every row, so the planner
    probes the ``(tenant_id, seq)`` (or ``seq``) index: written as ``EXISTS``, where one
    tenant holds most rows, it could choose a sequential scan from the table's start
    instead (8 ms per segment at 20,000 rows). The range is written as row comparisons
    on ``(tenant_id, seq)`` alone (they imply the tenant), which only that index takes as
    its bounds: with plain ``seq`` bounds the planner could probe the ``seq`` index and
    filter by tenant, reading every row of a segment holding none of the tenant's (1,000
    rows, 0.45 ms per search, B8); with a ``tenant_id =`` condition beside them the btree
    started at the tenant's first entry and read them all (78 pages)."""
    branches = [
        f"SELECT {columns}, {distance} AS distance FROM {TABLE} s WHERE {where} "
        f"AND s.seq >= {lo} AND s.seq < {hi} AND (SELECT e.seq FROM {TABLE} e "
        f"WHERE (e.tenant_id, e.seq) >= ({tenant}, {lo}) "
        f"AND (e.tenant_id, e.seq) < ({tenant}, {hi}) "
        f"ORDER BY e.tenant_id, e.seq LIMIT 1) IS NOT NULL "
        f"ORDER BY {distance} LIMIT {limit}"
        for lo, hi in cover.segments
    ]
    tail = (
        f"SELECT {columns}, {distance} AS distance FROM {TABLE} s WHERE {where} "
        f"AND s.seq >= {cover.sealed_hi} ORDER BY {distance} LIMIT {limit}"
    )
    if not branches:
        return tail
    branches.append(tail)
    union = " UNION ALL ".join(f"({b})" for b in branches)
    return f"SELECT * FROM ({union}) r ORDER BY r.distance LIMIT {limit}"
