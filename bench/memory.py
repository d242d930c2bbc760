"""Memory-service benchmark B4 (ARCHITECTURE §7) beside a plain-asyncpg baseline.

Usage: .venv/bin/python bench/memory.py [--database-url URL] [--seconds 5] [--clients 50]
       [--runs 3]

Creates a fresh PostgreSQL database, starts the memory service on it (uvicorn subprocess,
uvloop + httptools, pinned to core 0; the load generator pins itself to the last core),
and measures with 50 concurrent keep-alive clients:

- plan-context read+write: ``GET /v1/memory/plan-context/{id}`` then ``PUT`` it back with
  ``If-Match`` (one op = both requests; each client owns one plan, so no conflicts);
- by-correlation lookup: ``GET /v1/memory/plan-context/by-correlation/{id}``.

In the same run, the SAME SQL statements the service issues for these operations are sent
directly with asyncpg (50 concurrent tasks on a pool as large as the service's), on the
same tables, in the same transaction shape: a read is one SELECT outside a transaction, a
write one transaction of UPDATE ... RETURNING and the correlation side-table sync. Prints
p50/p99 and ops/s with the service/asyncpg ratios (target: service p99 <= 3x asyncpg p99),
writes bench/results/memory-<timestamp>.json and the "B4" section
of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import ROOT, UvicornService, cpu_seconds, pct, pin_load_generator
from loadgen import KeepAliveClient

DOC = ROOT / "docs" / "benchmarks.md"
TENANT = "bench"
# The service's connection pool (memory_service.sql.POOL_SIZE, no overflow): the baseline
# gets the same number of connections.
SERVICE_POOL_SIZE = 20
EXTRA_PLANS = 500


class RestClient(KeepAliveClient):
    """The lean keep-alive client with GET/PUT/POST and per-request headers."""

    async def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, bytes]:
        assert self._writer is not None
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items()).encode()
        head = b"%s %s HTTP/1.1\r\n%s%s" % (method.encode(), path.encode(), self._head_bytes, extra)
        if body is None:
            self._writer.write(head + b"\r\n")
        else:
            self._writer.write(
                b"%sContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                % (head, len(body), body)
            )
        return await self._read_response()


def plan_body(plan_id: str, n: int, step: int = 0) -> dict:
    """A plan context of realistic size: a small state machine, results, 3 correlation ids."""
    return {
        "plan_id": plan_id,
        "session_id": f"s-{n % 10}",
        "goal_event": "research.goal",
        "goal_data": {"topic": f"topic {n}", "depth": 2},
        "response_event": "research.done",
        "status": "running",
        "current_state": f"step{step % 3}",
        "state_machine": {
            f"step{i}": {"action": f"do.{i}", "next": f"step{i + 1}"} for i in range(3)
        },
        "results": {f"step{i}": {"ok": True, "items": list(range(5))} for i in range(step % 3)},
        "correlation_ids": [f"{plan_id}-c{i}" for i in range(3)],
        "state": {"attempt": step},
    }


# ---------------------------------------------------------------- the service


class MemoryService(UvicornService):
    """The memory service on ``database_url``, with a data dir of its own."""

    def __init__(self, database_url: str, port: int) -> None:
        self.database_url = database_url
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
            },
            ready_attempts=400,
        )

    def stop(self) -> None:
        super().stop()
        self._tmp.cleanup()


async def seed(svc: MemoryService, plan_ids: list[str]) -> None:
    queue = list(enumerate(plan_ids))

    async def writer() -> None:
        client = RestClient(svc.url, {"X-Tenant-ID": TENANT})
        await client.connect()
        while queue:
            n, plan_id = queue.pop()
            status, body = await client.request(
                "POST", "/v1/memory/plan-context", orjson.dumps(plan_body(plan_id, n))
            )
            if status != 200:
                raise RuntimeError(f"seeding failed: {status} {body[:200]!r}")
        await client.close()

    await asyncio.gather(*(writer() for _ in range(10)))


Op = Callable[[int, int], Awaitable[None]]


async def run_load(
    clients: int,
    seconds: float,
    make_op: Callable[[int], Awaitable[Op]],
    server_pid: int | None = None,
) -> dict:
    """Run ``clients`` concurrent loops of one op for ``seconds``; latencies in ms."""
    ops = [await make_op(i) for i in range(clients)]
    latencies: list[float] = []
    stop = time.perf_counter() + seconds

    async def loop(i: int) -> None:
        op = ops[i]
        step = 0
        while time.perf_counter() < stop:
            step += 1
            t0 = time.perf_counter()
            await op(i, step)
            latencies.append((time.perf_counter() - t0) * 1000)

    srv0 = cpu_seconds(server_pid) if server_pid else 0.0
    cpu0, t0 = cpu_seconds(), time.perf_counter()
    await asyncio.gather(*(loop(i) for i in range(clients)))
    wall = time.perf_counter() - t0
    row = {
        "ops": len(latencies),
        "ops_s": len(latencies) / wall,
        "p50_ms": pct(latencies, 50),
        "p99_ms": pct(latencies, 99),
        "client_cpu_pct": 100 * (cpu_seconds() - cpu0) / wall,
    }
    if server_pid:
        row["server_cpu_pct"] = 100 * (cpu_seconds(server_pid) - srv0) / wall
    return row


OpFactories = dict[str, Callable[[int], Awaitable[Op]]]


def service_ops(svc: MemoryService, plan_ids: list[str]) -> OpFactories:
    async def read_write(i: int) -> Op:
        client = RestClient(svc.url, {"X-Tenant-ID": TENANT})
        await client.connect()
        plan_id = plan_ids[i]
        path = f"/v1/memory/plan-context/{plan_id}"

        async def op(_: int, step: int) -> None:
            status, body = await client.request("GET", path)
            assert status == 200, body
            plan = orjson.loads(body)
            plan["current_state"] = f"step{step % 3}"
            plan["state"] = {"attempt": step}
            status, body = await client.request(
                "PUT", path, orjson.dumps(plan), {"If-Match": str(plan["version"])}
            )
            assert status == 200, body

        return op

    async def by_correlation(i: int) -> Op:
        client = RestClient(svc.url, {"X-Tenant-ID": TENANT})
        await client.connect()
        rng = random.Random(i)

        async def op(_: int, step: int) -> None:
            cid = f"{rng.choice(plan_ids)}-c{step % 3}"
            status, body = await client.request(
                "GET", f"/v1/memory/plan-context/by-correlation/{cid}"
            )
            assert status == 200, body

        return op

    return {"read_write": read_write, "by_correlation": by_correlation}


# ---------------------------------------------------------------- asyncpg baseline

PLAN_COLUMNS = (
    "session_id",
    "parent_plan_id",
    "goal_event",
    "goal_data",
    "response_event",
    "status",
    "current_state",
    "state_machine",
    "results",
    "state",
    "correlation_ids",
)
JSON_COLUMNS = {"goal_data", "state_machine", "results", "state", "correlation_ids"}
# The service reads and returns whole rows (every column, in table order).
ALL_COLUMNS = (
    "tenant_id, plan_id, session_id, parent_plan_id, goal_event, goal_data, "
    "response_event, status, current_state, state_machine, results, state, "
    "version, created_at, updated_at, correlation_ids"
)


async def baseline_ops(pool: asyncpg.Pool, plan_ids: list[str]) -> OpFactories:
    """The statements the service issues (see memory_service/sql/plans.py), sent directly.

    Read: one ``SELECT`` outside a transaction. Write: one transaction of the
    version-guarded ``UPDATE ... RETURNING`` and the correlation side-table sync (delete
    the ids no longer listed, insert the listed ones ``ON CONFLICT DO NOTHING``).
    By-correlation: one ``SELECT`` (the plan named by the id, else the one listing it).
    """
    async with pool.acquire() as conn:
        kind = await conn.fetchval(
            "SELECT data_type FROM information_schema.columns "
            "WHERE table_name = 'memory_plans' AND column_name = 'results'"
        )
    cast = {"jsonb": "::jsonb", "json": "::json"}.get(kind, "")
    sets = ", ".join(
        f"{c} = ${n + 3}{cast if c in JSON_COLUMNS else ''}" for n, c in enumerate(PLAN_COLUMNS)
    )
    k = len(PLAN_COLUMNS) + 3
    update = (
        f"UPDATE memory_plans SET {sets}, version = version + 1, updated_at = ${k} "
        f"WHERE tenant_id = $1 AND plan_id = $2 AND version = ${k + 1} "
        f"RETURNING {ALL_COLUMNS}"
    )
    select_plan = f"SELECT {ALL_COLUMNS} FROM memory_plans WHERE tenant_id = $1 AND plan_id = $2"
    delete_corr = (
        "DELETE FROM memory_plan_correlations WHERE tenant_id = $1 AND plan_id = $2 "
        "AND correlation_id <> ALL($3::varchar[])"
    )
    insert_corr = (
        "INSERT INTO memory_plan_correlations (tenant_id, correlation_id, plan_id, "
        "position) VALUES ($1, $2, $3, $4) "
        "ON CONFLICT (tenant_id, correlation_id, plan_id) DO NOTHING"
    )
    by_corr = (
        f"SELECT {ALL_COLUMNS} FROM memory_plans WHERE tenant_id = $1 AND plan_id = coalesce("
        "(SELECT exact.plan_id FROM memory_plans AS exact "
        " WHERE exact.tenant_id = $1 AND exact.plan_id = $2), "
        "(SELECT c.plan_id FROM memory_plan_correlations AS c "
        " WHERE c.tenant_id = $1 AND c.correlation_id = $2 "
        " ORDER BY (SELECT owner.updated_at FROM memory_plans AS owner "
        "           WHERE owner.tenant_id = c.tenant_id AND owner.plan_id = c.plan_id) DESC "
        " LIMIT 1))"
    )

    def encode(column: str, value: object) -> object:
        return orjson.dumps(value).decode() if column in JSON_COLUMNS else value

    async def read_write(i: int) -> Op:
        plan_id = plan_ids[i]

        async def op(_: int, step: int) -> None:
            async with pool.acquire() as conn:
                plan = dict(await conn.fetchrow(select_plan, TENANT, plan_id))
            values = {c: plan[c] for c in PLAN_COLUMNS}
            for c in JSON_COLUMNS:
                if isinstance(values[c], str):
                    values[c] = orjson.loads(values[c])
            values["current_state"] = f"step{step % 3}"
            values["state"] = {"attempt": step}
            ids = values["correlation_ids"]
            async with pool.acquire() as conn, conn.transaction():
                row = await conn.fetchrow(
                    update,
                    TENANT,
                    plan_id,
                    *(encode(c, values[c]) for c in PLAN_COLUMNS),
                    datetime.now(UTC),
                    plan["version"],
                )
                assert row is not None
                await conn.execute(delete_corr, TENANT, plan_id, ids)
                await conn.executemany(
                    insert_corr, [(TENANT, cid, plan_id, n) for n, cid in enumerate(ids)]
                )

        return op

    async def by_correlation(i: int) -> Op:
        rng = random.Random(i)

        async def op(_: int, step: int) -> None:
            cid = f"{rng.choice(plan_ids)}-c{step % 3}"
            async with pool.acquire() as conn:
                assert await conn.fetchrow(by_corr, TENANT, cid) is not None

        return op

    return {"read_write": read_write, "by_correlation": by_correlation}


# ---------------------------------------------------------------- report


def table(rows: list[dict]) -> str:
    lines = [
        "| operation (50 clients) | asyncpg p50 / p99 ms | service p50 / p99 ms | "
        "asyncpg ops/s | service ops/s | p99 ratio (median run) | every run | target |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        raw, svc = r["asyncpg"], r["service"]
        each = ", ".join(f"{x:.2f}x" for x in r.get("run_ratios", [r["p99_ratio"]]))
        lines.append(
            f"| {r['what']} | {raw['p50_ms']:.2f} / {raw['p99_ms']:.2f} | "
            f"{svc['p50_ms']:.2f} / {svc['p99_ms']:.2f} | {raw['ops_s']:.0f} | "
            f"{svc['ops_s']:.0f} | {r['p99_ratio']:.2f}x | {each} | <= 3x "
            f"{'met' if r['p99_ratio'] <= 3 else 'NOT met'} |"
        )
    return "\n".join(lines)


def write_doc(rows: list[dict], meta: dict) -> None:
    section = (
        "## B4 — memory service vs. asyncpg\n\n"
        "`bench/memory.py`: plan-context read+write (GET then PUT with `If-Match`, one op) and "
        "by-correlation lookup through the memory service on PostgreSQL (uvicorn, uvloop + "
        "httptools, one process pinned to core 0), 50 concurrent keep-alive clients, beside "
        "the same SQL statements sent directly with asyncpg (pool of "
        f"{SERVICE_POOL_SIZE}, like the service's) in the same run.\n\n"
        f"Run {meta['when']} on {meta['machine']}, {meta['seconds']:g} s per measurement, "
        f"{meta.get('runs', 1)} runs of each (the table shows the run with the median p99 "
        f"ratio; load average at the start: {meta['load']}).\n\n"
        f"{table(rows)}\n\n"
        "CPU during the service runs shown (client = load generator, one core): "
        + "; ".join(
            f"{r['what']}: client {r['service']['client_cpu_pct']:.0f} %, "
            f"server {r['service'].get('server_cpu_pct', float('nan')):.0f} %"
            for r in rows
        )
        + ".\n\n"
        "Where the time went, and what changed (py-spy on the service, 2026-11-22). The "
        "first measurement (read+write 3.28x, by-correlation 5.54x) was CPU-bound in layers "
        "around the database rather than in it: (1) the SQLAlchemy pool was 20 + 20 overflow, "
        "so at 50 clients overflow connections were opened and closed per request (~40 % of "
        "the CPU in asyncpg connect/close); (2) every checkout pre-pinged (three round trips "
        "on asyncpg: BEGIN, ping, ROLLBACK); (3) a read was a REPEATABLE READ transaction of "
        "two SELECTs (plan row + correlation ids), by-correlation up to four, a write seven "
        "statements; (4) statements were rebuilt per call (alias column collections alone "
        "~20 % of by-correlation's CPU); (5) FastAPI's middleware, routing, dependency "
        "solving and response-model re-validation ~25 %; (6) SQLAlchemy's execution layer "
        "cost more than the asyncpg driver under it; (7) each full garbage collection "
        "walked every long-lived object (46-112 ms pauses under load, landing on every "
        "request in flight: the p99). Now the pool is a fixed 20 without "
        "pre-ping (a dropped connection replaces the pool; reads retry once), a plan row "
        "carries its correlation ids (one-row read; by-correlation one index-seek SELECT), "
        "a write is one transaction of UPDATE ... RETURNING plus the correlation side-table "
        "sync, the statements are SQLAlchemy Core built and compiled once and sent to the "
        "pooled asyncpg connection directly, and the three hot routes are answered by a "
        "pure-ASGI fast path (same validation and store calls; malformed requests go to the "
        "FastAPI routes); the service freezes its start-up objects out of the collector "
        "(gc.freeze(): full collections < 3 ms). What remains per request is HTTP parsing "
        "(uvicorn/httptools), "
        "pydantic validation of the written record and its storability checks, building "
        "and serializing the response model, and the asyncpg calls the baseline also makes "
        "— in one process on one core, which also shares the machine with PostgreSQL and "
        "other work (see the load average and the server CPU share), so p99 still moves "
        "between runs. Lookups need planner statistics: on a fresh, un-ANALYZEd database "
        "PostgreSQL scans the tenant's rows through a secondary index for these lookups "
        "(EXPLAIN ANALYZE: ~1 ms at 1,000 plans per tenant instead of 0.07 ms) until "
        "autovacuum analyzes the tables, so the benchmark runs ANALYZE after seeding.\n"
    )
    text = DOC.read_text() if DOC.exists() else "# Benchmarks\n\nResults of `bench/`.\n"
    start = text.find("## B4")
    if start == -1:
        text = text.rstrip("\n") + "\n\n" + section
    else:
        end = text.find("\n## ", start + 1)
        text = text[:start] + section + ("" if end == -1 else text[end:])
    DOC.write_text(text)


async def main(args: argparse.Namespace) -> None:
    pin_load_generator()
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    admin_url = args.database_url.replace("postgresql+asyncpg://", "postgresql://")
    name = f"soorma_bench_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(admin_url)
    await admin.execute(f'CREATE DATABASE "{name}"')
    await admin.close()
    db_url = f"{admin_url.rpartition('/')[0]}/{name}"
    svc = MemoryService(db_url.replace("postgresql://", "postgresql+asyncpg://"), args.port)
    rows: list[dict] = []
    try:
        svc.start()
        plan_ids = [f"plan-{n}" for n in range(args.clients + EXTRA_PLANS)]
        await seed(svc, plan_ids)
        # A fresh database has no planner statistics until autovacuum gets to it; without
        # them Postgres scans the whole tenant through a secondary index for these lookups
        # (~1 ms at 1,000 plans per tenant instead of ~0.07 ms). A long-running database
        # has them.
        analyze = await asyncpg.connect(db_url)
        await analyze.execute("ANALYZE")
        await analyze.close()
        pool = await asyncpg.create_pool(
            db_url, min_size=SERVICE_POOL_SIZE, max_size=SERVICE_POOL_SIZE
        )
        try:
            raw_ops = await baseline_ops(pool, plan_ids)
            http_ops = service_ops(svc, plan_ids)
            runs: dict[str, list[dict]] = {}
            for _ in range(args.runs):
                for key, what in (
                    ("read_write", "plan-context read+write"),
                    ("by_correlation", "by-correlation lookup"),
                ):
                    # Warm both paths (connections, statement caches) before measuring.
                    await run_load(args.clients, 1.0, http_ops[key])
                    await run_load(args.clients, 1.0, raw_ops[key])
                    raw = await run_load(args.clients, args.seconds, raw_ops[key])
                    service = await run_load(
                        args.clients,
                        args.seconds,
                        http_ops[key],
                        server_pid=svc.proc.pid if svc.proc else None,
                    )
                    runs.setdefault(what, []).append(
                        {
                            "what": what,
                            "asyncpg": raw,
                            "service": service,
                            "p99_ratio": service["p99_ms"] / raw["p99_ms"],
                        }
                    )
                    print(f"{what}: asyncpg {raw}\n  service {service}", flush=True)
            # The shared machine is noisy: report the run with the median p99 ratio, and
            # every run's ratio beside it.
            for measured in runs.values():
                ordered = sorted(measured, key=lambda r: r["p99_ratio"])
                rows.append(
                    {
                        **ordered[(len(ordered) - 1) // 2],
                        "run_ratios": [r["p99_ratio"] for r in measured],
                    }
                )
        finally:
            await pool.close()
    finally:
        svc.stop()
        admin = await asyncpg.connect(admin_url)
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()
    meta = {
        "when": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}",
        "seconds": args.seconds,
        "clients": args.clients,
        "runs": args.runs,
        "load": load,
    }
    print()
    print(table(rows))
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    (out / f"memory-{stamp}.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    if not args.no_doc:
        write_doc(rows, meta)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--database-url",
        default=os.environ.get(
            "SOORMA_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test"
        ),
    )
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument(
        "--runs",
        type=int,
        default=3,
        help="measure each operation this many times (median reported)",
    )
    parser.add_argument("--port", type=int, default=18083)
    parser.add_argument("--no-doc", action="store_true", help="do not update docs/benchmarks.md")
    asyncio.run(main(parser.parse_args()))
