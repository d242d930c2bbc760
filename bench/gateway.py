"""B7: SendMessage (blocking) through the A2A gateway vs the same round trip with bus.call.

Usage: .venv/bin/python bench/gateway.py [--seconds 10] [--clients 8]
       [--redis-url URL] [--database-url postgresql+asyncpg://...]

Starts the event service (Redis Streams), the registry and the gateway (PostgreSQL) as
uvicorn subprocesses, and an echo Tool in this process. Then, for the same number of
concurrent clients and the same echo Tool:

- ``bus.call``: each client calls ``bench.echo.requested`` and waits for its answer (the
  SDK's request/response over the bus; the baseline);
- ``gateway``: each client sends a blocking ``SendMessage`` with the official a2a-sdk
  client (JSON-RPC) to skill ``echo``; the gateway publishes the request, the Tool answers
  on the bus, the gateway completes the task (stored in PostgreSQL) and answers.

The two modes run alternately (``--rounds``) so both see the same machine load. Prints
p50/p99 latency, tasks/s, CPU of each service and the gateway/bus.call p50 ratio (target
<= 2x); the JSON goes to bench/results/gateway-<timestamp>.json.
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
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import (
    ROOT,
    UvicornService,
    cpu_seconds,
    create_database,
    drop_database,
    free_port,
    pct,
)

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def echo_tool(context: Any) -> Any:
    from soorma import AgentOptions, Tool
    from soorma_common.registry import AgentCapability, EventDefinition

    tool = Tool(
        name="bench-echo",
        context=context,
        options=AgentOptions(max_concurrency=64),
        # No recorded answers: B7 measures the bus and the gateway, not the memory
        # service (none runs here; the Tool would retry it before every answer).
        answer_retention=0,
        capabilities=[
            AgentCapability(
                task_name="echo",
                consumed_event=EventDefinition(
                    event_name="bench.echo.requested", payload_schema=SCHEMA
                ),
            )
        ],
    )

    @tool.on_invoke("bench.echo.requested")
    async def echo(request, ctx):
        return {"n": request.data["n"]}

    return tool


async def run_clients(clients: int, seconds: float, call: Any) -> list[float]:
    """``clients`` loops calling ``call(i)`` for ``seconds``; the latencies."""
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds

    async def loop(client: int) -> None:
        i = 0
        while time.perf_counter() < deadline:
            start = time.perf_counter()
            await call(client * 1_000_000 + i)
            latencies.append(time.perf_counter() - start)
            i += 1

    await asyncio.gather(*(loop(c) for c in range(clients)))
    return latencies


def summary(latencies: list[float], wall: float) -> dict[str, Any]:
    return {
        "requests": len(latencies),
        "per_s": round(len(latencies) / wall, 1),
        "p50_ms": round(pct(latencies, 50) * 1000, 2),
        "p99_ms": round(pct(latencies, 99) * 1000, 2),
    }


async def main(args: argparse.Namespace) -> dict[str, Any]:
    from a2a.client import ClientConfig, ClientFactory
    from a2a.helpers.proto_helpers import new_data_part
    from a2a.types.a2a_pb2 import Message, Role, SendMessageRequest, TaskState
    from google.protobuf.struct_pb2 import Struct

    from soorma import PlatformContext, PlatformSettings

    tmp = ROOT / ".soorma" / f"bench-gw-{uuid.uuid4().hex[:6]}"
    tmp.mkdir(parents=True, exist_ok=True)
    db_url = (
        await create_database(args.database_url, "soorma_bench_gw")
        if args.gateway_db == "postgres"
        else f"sqlite+aiosqlite:///{tmp}/gateway.db"
    )
    events = UvicornService(
        name="event service",
        factory="event_service.app:create_app",
        port=free_port(),
        env={
            "SOORMA_EVENT_BACKEND": "redis",
            "SOORMA_REDIS_URL": args.redis_url,
            "SOORMA_REDIS_PREFIX": f"bench-gw-{uuid.uuid4().hex[:8]}",
        },
        ready_attempts=1200,
    )
    registry = UvicornService(
        name="registry",
        factory="registry_service.app:create_app",
        port=free_port(),
        env={"SOORMA_DATA_DIR": str(tmp)},
        ready_attempts=1200,
    )
    gateway_port = free_port()
    gateway = UvicornService(
        name="gateway",
        factory="gateway_a2a.app:create_app",
        port=gateway_port,
        env={
            "SOORMA_EVENT_SERVICE_URL": events.url,
            "SOORMA_REGISTRY_URL": registry.url,
            "SOORMA_GATEWAY_DATABASE_URL": db_url,
            "SOORMA_GATEWAY_URL": f"http://127.0.0.1:{gateway_port}",
            "SOORMA_GATEWAY_REPLICA_ID": "bench",
            "SOORMA_GATEWAY_CARD_TTL_SECONDS": "5",
            "SOORMA_DATA_DIR": str(tmp),
        },
        ready_attempts=1200,
    )
    services = {"events": events, "registry": registry, "gateway": gateway}
    report: dict[str, Any] = {
        "bench": "B7",
        "gateway_db": args.gateway_db,
        "clients": args.clients,
        "seconds": args.seconds,
        "rounds": args.rounds,
        "machine": {
            "cpus": os.cpu_count(),
            "load_avg_at_start": os.getloadavg(),
            "python": platform.python_version(),
        },
        "runs": [],
    }
    http = httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=64))
    try:
        events.start()
        registry.start()
        gateway.start()
        settings = PlatformSettings(event_service_url=events.url, registry_url=registry.url)
        context = PlatformContext.from_env(settings=settings)
        tool = echo_tool(context)
        await tool.start()
        a2a = ClientFactory(ClientConfig(streaming=False, httpx_client=http))
        client = await a2a.create_from_url(gateway.url)
        meta = Struct()
        meta.update({"skill": "echo"})

        async def via_gateway(n: int) -> None:
            request = SendMessageRequest(
                message=Message(
                    message_id=str(uuid.uuid4()),
                    role=Role.ROLE_USER,
                    parts=[new_data_part({"n": n})],
                    metadata=meta,
                )
            )
            async for event in client.send_message(request):
                if event.task.status.state != TaskState.TASK_STATE_COMPLETED:
                    raise RuntimeError(f"task ended {event.task.status.state}")

        async def via_bus(n: int) -> None:
            answer = await context.bus.call(
                "bench.echo.requested", {"n": n}, response_event="bench.echo.done", timeout=30
            )
            if not answer.data.get("success"):
                raise RuntimeError(answer.data)

        modes = {"bus.call": via_bus, "gateway": via_gateway}
        for call in modes.values():  # warm-up: connections, caches, the card
            await run_clients(args.clients, 1.0, call)
        totals: dict[str, list[float]] = {name: [] for name in modes}
        walls: dict[str, float] = {name: 0.0 for name in modes}
        for round_ in range(args.rounds):
            for name, call in modes.items():
                cpu_before = {
                    k: cpu_seconds(s.proc.pid) for k, s in services.items() if s.proc is not None
                }
                client_before = time.process_time()
                start = time.perf_counter()
                latencies = await run_clients(args.clients, args.seconds, call)
                wall = time.perf_counter() - start
                cpu = {
                    k: round(100 * (cpu_seconds(s.proc.pid) - cpu_before[k]) / wall, 1)
                    for k, s in services.items()
                    if s.proc is not None
                }
                cpu["client+tool"] = round(100 * (time.process_time() - client_before) / wall, 1)
                run = {"round": round_, "mode": name, **summary(latencies, wall), "cpu_pct": cpu}
                report["runs"].append(run)
                totals[name] += latencies
                walls[name] += wall
                print(json.dumps(run), flush=True)
        result = {name: summary(totals[name], walls[name]) for name in modes}
        result["p50_ratio_gateway_vs_bus_call"] = round(
            result["gateway"]["p50_ms"] / result["bus.call"]["p50_ms"], 2
        )
        result["target_p50_ratio_max"] = 2.0
        report["result"] = result
        report["machine"]["load_avg_at_end"] = os.getloadavg()
        await client.close()
        await tool.stop()
        await context.close()
    finally:
        await http.aclose()
        for service in services.values():
            service.stop()
        if args.gateway_db == "postgres":
            await drop_database(args.database_url, db_url)
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument(
        "--gateway-db",
        choices=["postgres", "sqlite"],
        default="postgres",
        help="the gateway's task store (B7 is defined on PostgreSQL)",
    )
    parser.add_argument(
        "--redis-url", default=os.environ.get("SOORMA_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
    )
    parser.add_argument(
        "--database-url",
        default=os.environ.get(
            "SOORMA_TEST_DATABASE_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
        ),
    )
    report = asyncio.run(main(parser.parse_args()))
    out = ROOT / "bench" / "results" / f"gateway-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    print(json.dumps(report["result"], indent=2))
    print(f"written to {out}")
