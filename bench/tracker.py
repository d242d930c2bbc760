"""B6: tracker projection (ARCHITECTURE §7 / issue 7), each figure beside a baseline measured
in the same run.

Usage: .venv/bin/python bench/tracker.py [--events 20000] [--plans 100000] [--seconds 10]

Needs Redis and PostgreSQL (``SOORMA_TEST_REDIS_URL``, ``SOORMA_TEST_DATABASE_URL``; a fresh
database is created and dropped). Starts the event service (Redis Streams) and the tracker
(PostgreSQL) as uvicorn subprocesses, then measures:

1. **projection ev/s**: ``--events`` plan events (10 per plan: lifecycle, requests, answers)
   are published while the tracker is stopped; the tracker is started and the time until
   all are projected gives sustained events/s (target ≥ 2,000). Baseline: the same events
   inserted raw into a PostgreSQL table in 500-row transactions (asyncpg ``executemany``):
   the floor any batched projection pays.
2. **publish → visible lag**: while plans run at a steady rate (B3-like load: each plan
   started, 3 request/answer pairs, state changes, completed), the time from publishing
   ``plan.started`` to ``GET /v1/tracker/plans/{id}`` answering 200 (p50/p99, target p99
   ≤ 1 s). Baseline: the event bus's own publish → SSE delivery on the same stream.
3. **GET /plans p99 with ``--plans`` stored** (target ≤ 50 ms): rows inserted directly, then
   the first page, a status-filtered page and a cursor page, sequentially. Baseline: the
   same SQL query straight on asyncpg.
Results are printed and written to bench/results/tracker-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import orjson
import redis.asyncio as aioredis

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import ROOT, UvicornService, pct, pin_load_generator

EVENTS_PER_PLAN = 10
SAMPLE = 5
TENANT = "bench"
HEADERS = {"X-Tenant-ID": TENANT}


def plan_events(plan_id: str) -> list[dict[str, Any]]:
    """Ten events of one plan, as a state-machine planner and its workers publish them."""
    lc = {
        "topic": "system-events",
        "plan_id": plan_id,
        "correlation_id": plan_id,
        "source": "bench-planner",
    }
    out = [{**lc, "type": "plan.started", "data": {"plan_id": plan_id, "status": "running"}}]
    for step in range(3):
        cid = f"{plan_id}-{step}"
        out.append(
            {
                "topic": "action-requests",
                "type": f"step{step}.requested",
                "plan_id": plan_id,
                "correlation_id": cid,
                "response_event": f"step{step}.done",
                "source": "bench-planner",
                "data": {"n": step},
            }
        )
        out.append(
            {
                "topic": "action-results",
                "type": f"step{step}.done",
                "plan_id": plan_id,
                "correlation_id": cid,
                "source": "bench-worker",
                "data": {"status": "completed", "result": {"n": step}},
            }
        )
    for step in range(2):
        out.append(
            {
                **lc,
                "type": "plan.state_changed",
                "data": {
                    "plan_id": plan_id,
                    "from_state": f"s{step}",
                    "to_state": f"s{step + 1}",
                    "status": "running",
                },
            }
        )
    out.append(
        {**lc, "type": "plan.completed", "data": {"plan_id": plan_id, "status": "completed"}}
    )
    return out


async def fresh_database(server_url: str) -> tuple[str, str]:
    plain = server_url.replace("postgresql+asyncpg://", "postgresql://")
    name = f"soorma_bench_tracker_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(plain)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    base = server_url.rpartition("/")[0]
    return f"{base}/{name}", name


async def drop_database(server_url: str, name: str) -> None:
    admin = await asyncpg.connect(server_url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


async def publish_plans(client: httpx.AsyncClient, events_url: str, plan_ids: list[str]) -> None:
    for start in range(0, len(plan_ids), 20):
        batch = [e for p in plan_ids[start : start + 20] for e in plan_events(p)]
        r = await client.post(
            f"{events_url}/v1/events/publish-batch", json={"events": batch}, headers=HEADERS
        )
        r.raise_for_status()


async def projected(db_plain: str) -> int:
    """The tracker's own count of projected events (read in SQL: cheaper than /metrics)."""
    conn = await asyncpg.connect(db_plain)
    try:
        value = await conn.fetchval("SELECT value FROM tracker_counters WHERE name = 'events'")
        return int(value or 0)
    finally:
        await conn.close()


# -- 1. projection throughput ------------------------------------------------------------


async def baseline_inserts(db_plain: str, n_events: int) -> float:
    conn = await asyncpg.connect(db_plain)
    try:
        await conn.execute(
            "CREATE TABLE bench_raw (seq bigserial primary key, tenant_id text, "
            "event_id text, plan_id text, type text, topic text, "
            "time timestamptz, data jsonb, UNIQUE (tenant_id, event_id))"
        )
        rows = []
        now = datetime.now(UTC)
        for i in range(n_events // EVENTS_PER_PLAN):
            for e in plan_events(f"raw-{i}"):
                rows.append(
                    (
                        TENANT,
                        str(uuid.uuid4()),
                        e["plan_id"],
                        e["type"],
                        e["topic"],
                        now,
                        orjson.dumps(e.get("data", {})).decode(),
                    )
                )
        start = time.perf_counter()
        for i in range(0, len(rows), 500):
            async with conn.transaction():
                await conn.executemany(
                    "INSERT INTO bench_raw (tenant_id, event_id, plan_id, type, topic, time, "
                    "data) VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb)",
                    rows[i : i + 500],
                )
        elapsed = time.perf_counter() - start
        await conn.execute("DROP TABLE bench_raw")
        return len(rows) / elapsed
    finally:
        await conn.close()


# -- 2. publish -> visible lag -----------------------------------------------------------


async def lag_run(
    client: httpx.AsyncClient, events_url: str, tracker_url: str, seconds: float, rate: int
) -> list[float]:
    """Plans started at ``rate`` per second for ``seconds``; lag of each plan.started."""
    lags: list[float] = []

    async def one(plan_id: str, sampled: bool) -> None:
        events = plan_events(plan_id)
        t0 = time.perf_counter()
        r = await client.post(
            f"{events_url}/v1/events/publish", json={"event": events[0]}, headers=HEADERS
        )
        r.raise_for_status()
        rest = client.post(
            f"{events_url}/v1/events/publish-batch", json={"events": events[1:]}, headers=HEADERS
        )
        rest_task = asyncio.create_task(rest)
        # Polling costs the tracker too: one plan in SAMPLE is watched, every 20 ms.
        while sampled:
            got = await client.get(
                f"{tracker_url}/v1/tracker/plans/{plan_id}",
                params={"context": "false"},
                headers=HEADERS,
            )
            if got.status_code == 200:
                lags.append(time.perf_counter() - t0)
                break
            await asyncio.sleep(0.02)
        (await rest_task).raise_for_status()

    tasks = []
    interval = 1.0 / rate
    deadline = time.perf_counter() + seconds
    n = 0
    while time.perf_counter() < deadline:
        tasks.append(asyncio.create_task(one(f"lag-{uuid.uuid4()}", n % SAMPLE == 0)))
        n += 1
        await asyncio.sleep(interval)
    await asyncio.gather(*tasks)
    return lags


async def bus_lag(client: httpx.AsyncClient, events_url: str, n: int) -> list[float]:
    """Baseline: publish -> delivery on an SSE stream of the same service."""
    lags: list[float] = []
    got: asyncio.Queue[float] = asyncio.Queue()

    async def read() -> None:
        async with client.stream(
            "GET",
            f"{events_url}/v1/events/stream",
            params={"topics": "bench-lag"},
            headers=HEADERS,
            timeout=httpx.Timeout(10, read=None),
        ) as resp:
            async for line in resp.aiter_lines():
                if line.startswith("event: ready"):
                    await got.put(0.0)
                if line.startswith("data: ") and "bench.lag" in line:
                    await got.put(time.perf_counter())

    reader = asyncio.create_task(read())
    await got.get()
    for _ in range(n):
        t0 = time.perf_counter()
        r = await client.post(
            f"{events_url}/v1/events/publish",
            headers=HEADERS,
            json={"event": {"topic": "bench-lag", "type": "bench.lag"}},
        )
        r.raise_for_status()
        lags.append(await got.get() - t0)
        await asyncio.sleep(0.01)
    reader.cancel()
    return lags


# -- 3. GET /plans with many plans -------------------------------------------------------


async def fill_plans(db_plain: str, n: int) -> None:
    conn = await asyncpg.connect(db_plain)
    try:
        base = datetime.now(UTC) - timedelta(days=30)
        statuses = ["completed"] * 7 + ["failed", "running", "paused"]
        rows = [
            (
                TENANT,
                f"bulk-{i:07d}",
                statuses[i % 10],
                2 if i % 10 < 8 else 1,
                base,
                f"goal{i % 5}.requested",
                "bench-planner",
                "[]",
                base + timedelta(seconds=i * 2),
                base + timedelta(seconds=i * 2 + 1),
                10,
            )
            for i in range(n)
        ]
        await conn.copy_records_to_table(
            "tracker_plans",
            records=rows,
            columns=[
                "tenant_id",
                "plan_id",
                "status",
                "status_rank",
                "status_time",
                "goal_event",
                "planner",
                "state_path",
                "created_at",
                "updated_at",
                "event_count",
            ],
        )
        await conn.execute("ANALYZE tracker_plans")
    finally:
        await conn.close()


async def list_latency(
    client: httpx.AsyncClient, tracker_url: str, n: int
) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"first page": [], "status=failed": [], "cursor page": []}
    first = (await client.get(f"{tracker_url}/v1/tracker/plans", headers=HEADERS)).json()
    cursor = first["next_cursor"]
    for i in range(n):
        for name, params in (
            ("first page", {}),
            ("status=failed", {"status": "failed"}),
            ("cursor page", {"cursor": cursor}),
        ):
            t0 = time.perf_counter()
            r = await client.get(f"{tracker_url}/v1/tracker/plans", params=params, headers=HEADERS)
            out[name].append(time.perf_counter() - t0)
            r.raise_for_status()
        if i == 0:
            assert len(first["plans"]) == 50
    return out


async def raw_list_latency(db_plain: str, n: int) -> list[float]:
    conn = await asyncpg.connect(db_plain)
    try:
        out = []
        for _ in range(n):
            t0 = time.perf_counter()
            await conn.fetch(
                "SELECT * FROM tracker_plans WHERE tenant_id = $1 ORDER BY "
                "created_at DESC, plan_id DESC LIMIT 51",
                TENANT,
            )
            out.append(time.perf_counter() - t0)
        return out
    finally:
        await conn.close()


# -- main --------------------------------------------------------------------------------


async def main(args: argparse.Namespace) -> None:
    pin_load_generator()
    load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    db_url, db_name = await fresh_database(args.database_url)
    db_plain = db_url.replace("postgresql+asyncpg://", "postgresql://")
    prefix = f"bench-tracker-{uuid.uuid4().hex[:8]}"
    common = {"SOORMA_LOG_LEVEL": "WARNING", "SOORMA_DATA_DIR": "/tmp/soorma-bench-tracker"}
    events = UvicornService(
        name="event service",
        factory="event_service.app:create_app",
        port=args.port,
        env={
            **common,
            "SOORMA_EVENT_BACKEND": "redis",
            "SOORMA_REDIS_URL": args.redis_url,
            "SOORMA_REDIS_PREFIX": prefix,
        },
        ready_marker=b"event-service",
        ready_attempts=1200,
    )
    tracker_env = {
        **common,
        "SOORMA_TRACKER_DATABASE_URL": db_url,
        "SOORMA_EVENT_SERVICE_URL": f"http://127.0.0.1:{args.port}",
        "SOORMA_MEMORY_URL": "http://127.0.0.1:1",
        "SOORMA_TRACKER_CONSUMER": "bench-tracker",
    }
    tracker = UvicornService(
        name="tracker",
        factory="tracker_service.app:create_app",
        port=args.port + 1,
        env=tracker_env,
        ready_marker=b"tracker-service",
        ready_attempts=1200,
    )
    results: dict[str, Any] = {}
    try:
        events.start()
        async with httpx.AsyncClient(timeout=30) as client:
            # 1. projection throughput: publish while the tracker is down, then catch up.
            n_plans = args.events // EVENTS_PER_PLAN
            await publish_plans(client, events.url, [f"tp-{i}" for i in range(n_plans)])
            tracker.start()
            start = time.perf_counter()
            total = n_plans * EVENTS_PER_PLAN
            while True:
                if await projected(db_plain) >= total:
                    break
                await asyncio.sleep(0.1)
            elapsed = time.perf_counter() - start
            results["projection_ev_s"] = total / elapsed
            results["baseline_insert_ev_s"] = await baseline_inserts(db_plain, total)
            # 2. publish -> visible lag under load.
            lags = await lag_run(client, events.url, tracker.url, args.seconds, args.rate)
            bus = await bus_lag(client, events.url, 200)
            results["lag_ms"] = {
                "p50": pct(lags, 50) * 1000,
                "p99": pct(lags, 99) * 1000,
                "n": len(lags),
            }
            results["bus_lag_ms"] = {"p50": pct(bus, 50) * 1000, "p99": pct(bus, 99) * 1000}
            # 3. GET /plans with many plans stored.
            await fill_plans(db_plain, args.plans)
            listing = await list_latency(client, tracker.url, args.requests)
            raw = await raw_list_latency(db_plain, args.requests)
            results["list_ms"] = {
                name: {"p50": pct(v, 50) * 1000, "p99": pct(v, 99) * 1000}
                for name, v in listing.items()
            }
            results["raw_list_ms"] = {"p50": pct(raw, 50) * 1000, "p99": pct(raw, 99) * 1000}
    finally:
        tracker.stop()
        events.stop()
        await drop_database(args.database_url, db_name)
        r = aioredis.from_url(args.redis_url)
        keys = [k async for k in r.scan_iter(match=f"{prefix}*")]
        if keys:
            await r.delete(*keys)
        await r.aclose()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"machine: {platform.node()} {os.cpu_count()} cores, {platform.python_version()}, "
        f"{time.strftime('%Y-%m-%d %H:%M')}, load average {load} (before: {load_before})"
    )
    p, b = results["projection_ev_s"], results["baseline_insert_ev_s"]
    print(
        f"B6 projection: {p:,.0f} ev/s (raw PostgreSQL inserts {b:,.0f} ev/s, ratio "
        f"{p / b:.2f}x; target >= 2,000 ev/s)"
    )
    lag, bus = results["lag_ms"], results["bus_lag_ms"]
    print(
        f"B6 publish->visible: p50 {lag['p50']:.1f} ms, p99 {lag['p99']:.1f} ms over "
        f"{lag['n']} plans at {args.rate} plans/s (bus publish->SSE p50 {bus['p50']:.1f} / "
        f"p99 {bus['p99']:.1f} ms; target p99 <= 1000 ms)"
    )
    raw = results["raw_list_ms"]
    for name, v in results["list_ms"].items():
        print(
            f"B6 GET /plans ({name}, {args.plans:,} plans): p50 {v['p50']:.1f} ms, "
            f"p99 {v['p99']:.1f} ms (raw SQL p99 {raw['p99']:.1f} ms; target p99 <= 50 ms)"
        )
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"tracker-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(
        json.dumps(
            {**results, "load_before": load_before, "load_after": load, "args": vars(args)},
            indent=2,
            default=str,
        )
    )
    print(f"results: {path.relative_to(ROOT)}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--redis-url", default=os.environ.get("SOORMA_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
    )
    parser.add_argument(
        "--database-url",
        default=os.environ.get(
            "SOORMA_TEST_DATABASE_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
        ),
    )
    parser.add_argument("--port", type=int, default=18182)
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--plans", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rate", type=int, default=50, help="plans started per second")
    parser.add_argument("--requests", type=int, default=200)
    asyncio.run(main(parser.parse_args()))
