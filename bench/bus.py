"""Event-bus benchmarks B1, B2 and B5 (ARCHITECTURE §7), each beside a raw redis-py baseline.

Usage: .venv/bin/python bench/bus.py [--redis-url URL] [--seconds 5] [--subscribers 1000]

Starts the event service on Redis in a subprocess (pinned to core 0 when there are two or
more cores; the load generator pins itself to the last core), measures the same things
directly with redis-py on the same Redis, and prints a table of numbers and ratios.
Results are also written to bench/results/bus-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import platform
import resource
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import orjson
import redis.asyncio as aioredis

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import ROOT, CpuMeter, UvicornService, pct, pin_load_generator
from loadgen import KeepAliveClient, sse_frames

TOPIC = "bench-events"
T = TypeVar("T")


@dataclass
class Results:
    rows: list[dict] = field(default_factory=list)

    def add(
        self,
        bench: str,
        what: str,
        raw: float,
        service: float,
        unit: str,
        target: str,
        **extra: object,
    ) -> None:
        ratio = service / raw if raw else float("nan")
        self.rows.append(
            {
                "bench": bench,
                "what": what,
                "raw": raw,
                "service": service,
                "unit": unit,
                "ratio": ratio,
                "target": target,
                **extra,
            }
        )


# ---------------------------------------------------------------- raw redis-py baselines


async def raw_latency(url: str, key: str, rate: int, seconds: float) -> list[float]:
    r = aioredis.from_url(url)
    reader = aioredis.from_url(url)
    await r.xgroup_create(key, "g", id="$", mkstream=True)
    latencies: list[float] = []
    total = int(rate * seconds)

    async def consume() -> None:
        while len(latencies) < total:
            resp = await reader.xreadgroup("g", "c", {key: ">"}, count=100, block=1000)
            now = time.perf_counter()
            for _, entries in resp or []:
                ids = []
                for entry_id, fields in entries:
                    latencies.append((now - float(fields[b"t"])) * 1000)
                    ids.append(entry_id)
                await reader.xack(key, "g", *ids)

    task = asyncio.create_task(consume())
    start = time.perf_counter()
    for i in range(total):
        target = start + i / rate
        delay = target - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        await r.xadd(key, {"t": repr(time.perf_counter()), "d": b"x" * 200})
    await asyncio.wait_for(task, 30)
    await r.aclose()
    await reader.aclose()
    return latencies


async def raw_throughput(
    url: str, key: str, seconds: float, *, batch: int, publishers: int = 4
) -> float:
    r = aioredis.from_url(url)
    reader = aioredis.from_url(url)
    await r.xgroup_create(key, "g", id="$", mkstream=True)
    published = 0
    delivered = 0
    stop = asyncio.Event()
    payload = {"d": b"x" * 200}

    async def publish() -> None:
        nonlocal published
        while not stop.is_set():
            if batch == 1:
                await r.xadd(key, payload)
                published += 1
            else:
                async with r.pipeline(transaction=False) as pipe:
                    for _ in range(batch):
                        pipe.xadd(key, payload)
                    await pipe.execute()
                published += batch

    async def consume() -> None:
        nonlocal delivered
        while not (stop.is_set() and delivered >= published):
            resp = await reader.xreadgroup("g", "c", {key: ">"}, count=500, block=200)
            for _, entries in resp or []:
                delivered += len(entries)
                await reader.xack(key, "g", *[e[0] for e in entries])

    start = time.perf_counter()
    consumer = asyncio.create_task(consume())
    pubs = [asyncio.create_task(publish()) for _ in range(publishers)]
    await asyncio.sleep(seconds)
    stop.set()
    await asyncio.gather(*pubs)
    await asyncio.wait_for(consumer, 60)
    elapsed = time.perf_counter() - start
    await r.aclose()
    await reader.aclose()
    return delivered / elapsed


# ---------------------------------------------------------------- the event service


_RUN = uuid.uuid4().hex[:12]
_ids = itertools.count()


def envelope(i: int, topic: str = TOPIC) -> dict:
    # Envelopes carry their id, as the SDK sends them (it builds each EventEnvelope
    # client-side); a counter keeps the load generator cheap.
    return {
        "id": f"{_RUN}-{next(_ids)}",
        "type": "bench.tick",
        "topic": topic,
        "data": {"i": i, "t": time.perf_counter(), "pad": "x" * 200},
    }


class ServiceUnderTest(UvicornService):
    """The event service on Redis, under a key prefix of its own."""

    def __init__(self, redis_url: str, port: int) -> None:
        self.prefix = f"bench-{uuid.uuid4().hex[:8]}"
        self.redis_url = redis_url
        super().__init__(
            name="event service",
            factory="event_service.app:create_app",
            port=port,
            env={
                "SOORMA_EVENT_BACKEND": "redis",
                "SOORMA_REDIS_URL": redis_url,
                "SOORMA_REDIS_PREFIX": self.prefix,
                "SOORMA_LOG_LEVEL": "WARNING",
            },
            ready_marker=b'"event-service"',
        )

    async def cleanup(self) -> None:
        r = aioredis.from_url(self.redis_url)
        keys = [k async for k in r.scan_iter(match=f"{self.prefix}*", count=1000)]
        if keys:
            await r.delete(*keys)
        await r.aclose()


async def open_stream(svc: ServiceUnderTest, path: str):
    frames = sse_frames(svc.url, path).__aiter__()
    while True:
        event, _, _ = await frames.__anext__()
        if event == "ready":
            return frames


async def service_latency(
    svc: ServiceUnderTest, rate: int, seconds: float, connections: int = 4
) -> list[float]:
    topic = f"lat-{uuid.uuid4().hex[:6]}"
    frames = await open_stream(svc, f"/v1/events/stream?topics={topic}")
    total = int(rate * seconds)
    latencies: list[float] = []

    async def consume() -> None:
        async for event, _, data in frames:
            if event != "message":
                continue
            now = time.perf_counter()
            latencies.append((now - orjson.loads(data)["data"]["t"]) * 1000)
            if len(latencies) >= total:
                return

    clients = [KeepAliveClient(svc.url) for _ in range(connections)]
    for c in clients:
        await c.connect()
    task = asyncio.create_task(consume())
    queue: asyncio.Queue[int] = asyncio.Queue()

    async def sender(client: KeepAliveClient) -> None:
        while True:
            i = await queue.get()
            if i < 0:
                return
            status, body = await client.post(
                "/v1/events/publish", orjson.dumps({"event": envelope(i, topic)})
            )
            if status != 200:
                raise RuntimeError(f"publish failed: {status} {body[:200]!r}")

    senders = [asyncio.create_task(sender(c)) for c in clients]
    start = time.perf_counter()
    for i in range(total):
        delay = start + i / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        queue.put_nowait(i)
    for _ in clients:
        queue.put_nowait(-1)
    await asyncio.gather(*senders)
    await asyncio.wait_for(task, 60)
    for c in clients:
        await c.close()
    return latencies


async def service_throughput(
    svc: ServiceUnderTest, seconds: float, *, batch: int, publishers: int = 4
) -> float:
    topic = f"thr-{uuid.uuid4().hex[:6]}"
    frames = await open_stream(svc, f"/v1/events/stream?topics={topic}")
    published = 0
    delivered = 0
    stop = asyncio.Event()
    done = asyncio.Event()

    async def consume() -> None:
        nonlocal delivered
        async for event, _, _ in frames:
            if event == "message":
                delivered += 1
                if stop.is_set() and delivered >= published:
                    done.set()
                    return

    async def publish() -> None:
        nonlocal published
        client = KeepAliveClient(svc.url)
        await client.connect()
        while not stop.is_set():
            if batch == 1:
                body = orjson.dumps({"event": envelope(published, topic)})
                path = "/v1/events/publish"
            else:
                body = orjson.dumps({"events": [envelope(i, topic) for i in range(batch)]})
                path = "/v1/events/publish-batch"
            status, resp = await client.post(path, body)
            if status != 200:
                raise RuntimeError(f"publish failed: {status} {resp[:200]!r}")
            published += batch
        await client.close()

    start = time.perf_counter()
    consumer = asyncio.create_task(consume())
    pubs = [asyncio.create_task(publish()) for _ in range(publishers)]
    await asyncio.sleep(seconds)
    stop.set()
    await asyncio.gather(*pubs)
    if delivered < published:
        await asyncio.wait_for(done.wait(), 120)
    elapsed = time.perf_counter() - start
    consumer.cancel()
    return delivered / elapsed


async def service_fanout(svc: ServiceUnderTest, subscribers: int, burst: int) -> dict:
    topic = f"fan-{uuid.uuid4().hex[:6]}"
    rss_before = svc.rss_kib()
    streams = []
    for chunk in range(0, subscribers, 100):
        streams += await asyncio.gather(
            *[
                open_stream(svc, f"/v1/events/stream?topics={topic}")
                for _ in range(chunk, min(subscribers, chunk + 100))
            ]
        )
    await asyncio.sleep(0.5)
    rss_after = svc.rss_kib()
    counts = [0] * subscribers
    finished = asyncio.Event()
    remaining = subscribers

    async def drain(idx: int, frames) -> None:
        nonlocal remaining
        async for event, _, _ in frames:
            if event == "message":
                counts[idx] += 1
                if counts[idx] == burst:
                    remaining -= 1
                    if remaining == 0:
                        finished.set()
                    return

    tasks = [asyncio.create_task(drain(i, s)) for i, s in enumerate(streams)]
    client = KeepAliveClient(svc.url)
    await client.connect()
    start = time.perf_counter()
    status, _ = await client.post(
        "/v1/events/publish-batch",
        orjson.dumps({"events": [envelope(i, topic) for i in range(burst)]}),
    )
    assert status == 200
    try:
        await asyncio.wait_for(finished.wait(), 120)
    except TimeoutError:
        pass
    drain_s = time.perf_counter() - start
    await client.close()
    for t in tasks:
        t.cancel()
    return {
        "subscribers": subscribers,
        "burst": burst,
        "all_delivered": all(c == burst for c in counts),
        "delivered": sum(counts),
        "drain_s": round(drain_s, 3),
        "rss_per_connection_kib": round((rss_after - rss_before) / subscribers, 1),
    }


# ---------------------------------------------------------------- main


def raise_open_files_limit(wanted: int = 65536) -> None:
    """B5 holds two sockets per subscriber (client and server side, both processes
    inherit this limit): raise the soft limit as far as the hard one allows."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


async def main(args: argparse.Namespace) -> None:
    raise_open_files_limit()
    pin_load_generator()
    res = Results()
    load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    base = f"bench-raw-{uuid.uuid4().hex[:8]}"
    svc = ServiceUnderTest(args.redis_url, args.port)
    svc.start()
    meter = CpuMeter(svc.proc.pid if svc.proc else None)
    cpu: dict[str, dict] = {}

    async def metered(name: str, run: Awaitable[T]) -> T:
        """Await ``run``, recording its wall time and CPU shares under ``name``."""
        start = meter.snapshot()
        result = await run
        cpu[name] = meter.report(start, meter.snapshot())
        return result

    try:
        raw_lat = await metered(
            "raw B1", raw_latency(args.redis_url, f"{base}:lat", args.rate, args.seconds)
        )
        svc_lat = await metered("service B1", service_latency(svc, args.rate, args.seconds))
        for q in (50, 99):
            res.add(
                "B1",
                f"publish→deliver p{q} @ {args.rate} ev/s",
                pct(raw_lat, q),
                pct(svc_lat, q),
                "ms",
                "≤ 3x",
            )

        raw_single = await metered(
            "raw B2 single", raw_throughput(args.redis_url, f"{base}:t1", args.seconds, batch=1)
        )
        svc_single = await metered(
            "service B2 single", service_throughput(svc, args.seconds, batch=1)
        )
        res.add(
            "B2",
            "single publishes, 4 keep-alive publishers",
            raw_single,
            svc_single,
            "ev/s",
            "≥ 0.40x",
        )

        raw_batch = await metered(
            "raw B2 batch",
            raw_throughput(args.redis_url, f"{base}:t2", args.seconds, batch=100),
        )
        svc_batch = await metered(
            "service B2 batch", service_throughput(svc, args.seconds, batch=100)
        )
        res.add(
            "B2", "publish-batch (100/batch), 4 publishers", raw_batch, svc_batch, "ev/s", "≥ 0.50x"
        )

        fan = await metered("service B5", service_fanout(svc, args.subscribers, 100))
    finally:
        svc.stop()
        await svc.cleanup()
        r = aioredis.from_url(args.redis_url)
        keys = [k async for k in r.scan_iter(match=f"{base}*")]
        if keys:
            await r.delete(*keys)
        await r.aclose()

    # Other work on the machine skews every number: record how busy it was.
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"\nmachine: {platform.node()} {os.cpu_count()} cores, {platform.python_version()}, "
        f"{time.strftime('%Y-%m-%d %H:%M')}, load average {load} (before: {load_before})"
    )
    print(
        f"{'bench':5} {'what':45} {'raw redis-py':>13} {'service':>10} {'unit':>5} "
        f"{'ratio':>7} {'target':>8}"
    )
    for row in res.rows:
        print(
            f"{row['bench']:5} {row['what']:45} {row['raw']:13.2f} {row['service']:10.2f} "
            f"{row['unit']:>5} {row['ratio']:6.2f}x {row['target']:>8}"
        )
    print(
        f"B5    {fan['subscribers']} SSE subscribers x {fan['burst']}-event burst: "
        f"all delivered={fan['all_delivered']} ({fan['delivered']}), drain "
        f"{fan['drain_s']} s, server RSS/connection {fan['rss_per_connection_kib']} KiB"
    )
    print("cpu (client = load generator, server = event service):")
    for name, c in cpu.items():
        print(
            f"  {name:20} wall {c['wall_s']:6.2f} s  client {c['client_cpu_pct']:5.1f}%  "
            f"server {c['server_cpu_pct']:5.1f}%"
        )
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"bus-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(
        json.dumps(
            {
                "rows": res.rows,
                "b5": fan,
                "cpu": cpu,
                "load_before": load_before,
                "load_after": load,
            },
            indent=2,
        )
    )
    print(f"results: {path.relative_to(ROOT)}")
    _ = statistics  # kept for ad-hoc analysis


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--redis-url", default=os.environ.get("SOORMA_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
    )
    parser.add_argument("--port", type=int, default=18082)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--subscribers", type=int, default=1000)
    asyncio.run(main(parser.parse_args()))
