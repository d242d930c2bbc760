"""B3: plans/s and goal->answer latency of a 3-step state-machine plan (ARCHITECTURE §7).

Usage: .venv/bin/python bench/plans.py [--redis-url URL] [--database-url URL]
                                        [--seconds 10] [--streams 1,4,8,16]
                                        [--transport lean|httpx|aiohttp] [--layout one|split]

Starts the event service (Redis Streams), the memory service (PostgreSQL, a fresh
database) and the registry (SQLite) as uvicorn subprocesses, then runs in this process a
Planner with a 3-step machine (step1 -> step2 -> step3 -> done) and one echo agent per
step. ``--layout split`` runs the echo agent in a second process of its own (as a deployed
worker would run), so this process holds only the planner and the goal senders. Goals
are sent by 1, 4, 8 and 16 concurrent streams (each sends its next goal when the previous
one is answered). Reported: plans/s, p50/p99 goal->final-answer latency, and the
share of the SDK's HTTP time spent waiting on the event service vs the memory service
(timed per request in an httpx transport), plus CPU seconds per process.
Results are also written to bench/results/plans-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx
from harness import create_database, drop_database, free_port

ROOT = Path(__file__).resolve().parents[1]
STEPS = ("step1", "step2", "step3")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))] if ordered else float("nan")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class TimingTransport(httpx.AsyncBaseTransport):
    """Adds up wall time of every non-streaming request, per service port."""

    def __init__(self, kind: str = "lean") -> None:
        from soorma._transport import LeanTransport

        limits = httpx.Limits(max_connections=64, max_keepalive_connections=32)
        self.inner: httpx.AsyncBaseTransport
        if kind == "lean":
            self.inner = LeanTransport(limits=limits)
        elif kind == "aiohttp":
            from httpx_aiohttp import AiohttpTransport

            self.inner = AiohttpTransport(limits=limits)
        else:
            self.inner = httpx.AsyncHTTPTransport(limits=limits)
        self.seconds: dict[int, float] = defaultdict(float)
        self.calls: dict[int, int] = defaultdict(int)
        self.by_path: dict[str, list[float]] = defaultdict(list)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        start = time.perf_counter()
        response = await self.inner.handle_async_request(request)
        if "/stream" not in request.url.path:
            port = request.url.port or 80
            elapsed = time.perf_counter() - start
            self.seconds[port] += elapsed
            self.calls[port] += 1
            # Ids in paths would make every call its own row: keep the route's shape.
            parts = request.url.path.strip("/").split("/")[:4]
            key = f"{request.method} /{'/'.join(p if len(p) < 24 else '{id}' for p in parts)}"
            self.by_path[key].append(elapsed)
        return response

    def reset(self) -> None:
        self.seconds.clear()
        self.calls.clear()
        self.by_path.clear()

    async def aclose(self) -> None:
        await self.inner.aclose()


class Service:
    def __init__(self, factory: str, env: dict[str, str]) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cmd = [
            sys.executable,
            "-m",
            "uvicorn",
            "--factory",
            factory,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--log-level",
            "warning",
            "--no-access-log",
        ]
        self.proc = subprocess.Popen(cmd, env={**os.environ, **env}, cwd=ROOT)

    async def ready(self) -> None:
        async with httpx.AsyncClient() as client:
            for _ in range(300):
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get(f"{self.url}/ready")).status_code == 200:
                        return
                await asyncio.sleep(0.1)
        raise RuntimeError(f"{self.url} did not become ready")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def machine() -> dict[str, Any]:
    from soorma_common.state import StateAction, StateConfig, StateTransition

    states: dict[str, Any] = {"start": StateConfig(state_name="start", default_next=STEPS[0])}
    for i, step in enumerate(STEPS):
        nxt = STEPS[i + 1] if i + 1 < len(STEPS) else "done"
        states[step] = StateConfig(
            state_name=step,
            action=StateAction(
                event_type=f"bench.{step}.requested",
                response_event=f"bench.{step}.done",
                data={"n": "{goal_data.n}"},
            ),
            transitions=[StateTransition(on_event=f"bench.{step}.done", to_state=nxt)],
        )
    states["done"] = StateConfig(state_name="done", is_terminal=True)
    return states


def echo_agent(context: Any, options: Any) -> Any:
    """The agent answering every step request with its own data."""
    from soorma import Agent

    echo = Agent(name="bench-echo", context=context, options=options)

    @echo.on_event(topic="action-requests", event_type="bench.step*.requested")
    async def answer(event, ctx):
        await ctx.bus.respond(
            event.response_event,
            {"echo": event.data},
            correlation_id=event.correlation_id,
            topic=event.response_topic,
        )

    return echo


def agent_options(args: argparse.Namespace) -> Any:
    """The planner's and the echo agent's options: 64 at once, ``--ack-window`` if given."""
    from soorma import AgentOptions

    if args.ack_window is None:
        return AgentOptions(max_concurrency=64)
    return AgentOptions(max_concurrency=64, ack_window=args.ack_window)


async def echo_worker(args: argparse.Namespace) -> None:
    """``--echo-worker``: run only the echo agent until stdin closes (split layout)."""
    from soorma import PlatformContext, PlatformSettings

    transport = TimingTransport(args.transport)
    http = httpx.AsyncClient(transport=transport)
    settings = PlatformSettings(
        event_service_url=args.event_url, memory_url=args.memory_url, registry_url=args.registry_url
    )
    context = PlatformContext.from_env(settings=settings, http=http)
    context.bus.coalesce = not args.no_coalesce
    echo = echo_agent(context, agent_options(args))
    await echo.start()
    print("ready", flush=True)
    # The parent closes our stdin to stop us: no signal handling needed.
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await echo.stop()
    await http.aclose()


class EchoProcess:
    """The echo agent in a child process (``--layout split``)."""

    def __init__(self, args: argparse.Namespace, services: dict[str, Service]) -> None:
        cmd = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--echo-worker",
            "--event-url",
            services["event"].url,
            "--memory-url",
            services["memory"].url,
            "--registry-url",
            services["registry"].url,
            "--transport",
            args.transport,
        ]
        if args.no_coalesce:
            cmd.append("--no-coalesce")
        if args.ack_window is not None:
            cmd += ["--ack-window", str(args.ack_window)]
        self.proc = subprocess.Popen(
            cmd, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )

    async def ready(self) -> None:
        assert self.proc.stdout is not None
        line = await asyncio.get_running_loop().run_in_executor(None, self.proc.stdout.readline)
        if line.strip() != "ready":
            raise RuntimeError("the echo worker did not start")

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


async def run_streams(context: Any, streams: int, seconds: float) -> list[float]:
    """Send goals from ``streams`` loops for ``seconds``; return answer latencies."""
    waiting: dict[str, asyncio.Future[None]] = {}
    latencies: list[float] = []
    async with context.bus.subscribe(["action-results"], event_types=["bench.goal.done"]) as sub:
        await sub.wait_ready()

        async def pump() -> None:
            async for event in sub:
                fut = waiting.pop(event.correlation_id or "", None)
                if fut is not None and not fut.done():
                    fut.set_result(None)

        pump_task = asyncio.create_task(pump())
        deadline = time.perf_counter() + seconds

        async def stream(idx: int) -> None:
            n = 0
            while time.perf_counter() < deadline:
                corr = uuid.uuid4().hex
                fut = asyncio.get_running_loop().create_future()
                waiting[corr] = fut
                start = time.perf_counter()
                await context.bus.request(
                    "bench.goal", {"n": n, "stream": idx}, "bench.goal.done", correlation_id=corr
                )
                await asyncio.wait_for(fut, 30)
                latencies.append(time.perf_counter() - start)
                n += 1

        await asyncio.gather(*(stream(i) for i in range(streams)))
        pump_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await pump_task
    return latencies


async def main(args: argparse.Namespace) -> dict[str, Any]:
    from soorma import PlatformContext, PlatformSettings
    from soorma.agents.planner import Planner
    from soorma_common.state import PlanDefinition

    tmp = ROOT / ".soorma" / f"bench-{uuid.uuid4().hex[:6]}"
    tmp.mkdir(parents=True, exist_ok=True)
    db_url = await create_database(args.database_url)
    prefix = f"bench-{uuid.uuid4().hex[:8]}"
    events = Service(
        "event_service.app:create_app",
        {
            "SOORMA_EVENT_BACKEND": "redis",
            "SOORMA_REDIS_URL": args.redis_url,
            "SOORMA_REDIS_PREFIX": prefix,
        },
    )
    memory = Service(
        "memory_service.app:create_app",
        {
            "SOORMA_MEMORY_DATABASE_URL": db_url,
            "SOORMA_DATA_DIR": str(tmp),
        },
    )
    registry = Service("registry_service.app:create_app", {"SOORMA_DATA_DIR": str(tmp)})
    services = {"event": events, "memory": memory, "registry": registry}
    report: dict[str, Any] = {
        "bench": "B3",
        "transport": args.transport,
        "layout": args.layout,
        "runs": [],
    }
    worker: EchoProcess | None = None
    transport = TimingTransport(args.transport)
    http = httpx.AsyncClient(transport=transport)
    try:
        await asyncio.gather(*(s.ready() for s in services.values()))
        settings = PlatformSettings(
            event_service_url=events.url, memory_url=memory.url, registry_url=registry.url
        )
        context = PlatformContext.from_env(settings=settings, http=http)
        context.bus.coalesce = not args.no_coalesce
        options = agent_options(args)
        planner = Planner(
            name="bench-planner",
            context=context,
            options=options,
            plan_definition=PlanDefinition(plan_type="bench.goal", states=machine()),
        )
        echo = echo_agent(context, options) if args.layout == "one" else None
        await planner.start()
        if echo is not None:
            await echo.start()
        else:
            worker = EchoProcess(args, services)
            await worker.ready()
        await run_streams(context, 1, 1.0)  # warm-up: connections, caches, JIT-free paths
        for streams in args.streams:
            transport.reset()
            cpu_before = {k: cpu_seconds(s.proc.pid) for k, s in services.items()}
            self_before = time.process_time()
            worker_before = cpu_seconds(worker.proc.pid) if worker is not None else 0.0
            start = time.perf_counter()
            latencies = await run_streams(context, streams, args.seconds)
            wall = time.perf_counter() - start
            http_ms = {
                name: transport.seconds.get(svc.port, 0.0) * 1000 / max(len(latencies), 1)
                for name, svc in services.items()
            }
            total = sum(http_ms.values()) or 1.0
            run = {
                "transport": args.transport,
                "layout": args.layout,
                "streams": streams,
                "plans": len(latencies),
                "plans_per_s": round(len(latencies) / wall, 1),
                "p50_ms": round(pct(latencies, 50) * 1000, 1),
                "p99_ms": round(pct(latencies, 99) * 1000, 1),
                "mean_ms": round(statistics.fmean(latencies) * 1000, 1) if latencies else None,
                "http_ms_per_plan": {k: round(v, 2) for k, v in http_ms.items()},
                "http_share": {k: round(v / total, 3) for k, v in http_ms.items()},
                "http_calls_per_plan": {
                    name: round(transport.calls.get(svc.port, 0) / max(len(latencies), 1), 1)
                    for name, svc in services.items()
                },
                "cpu_s": {
                    **{
                        k: round(cpu_seconds(s.proc.pid) - cpu_before[k], 2)
                        for k, s in services.items()
                    },
                    "sdk_process": round(time.process_time() - self_before, 2),
                    **(
                        {"echo_process": round(cpu_seconds(worker.proc.pid) - worker_before, 2)}
                        if worker is not None
                        else {}
                    ),
                },
                "wall_s": round(wall, 2),
                "routes_ms": {
                    key: {
                        "calls_per_plan": round(len(v) / max(len(latencies), 1), 1),
                        "p50": round(pct(v, 50) * 1000, 2),
                        "p99": round(pct(v, 99) * 1000, 2),
                    }
                    for key, v in sorted(transport.by_path.items())
                },
            }
            run["cpu_ms_per_plan"] = {
                k: round(v * 1000 / max(len(latencies), 1), 1) for k, v in run["cpu_s"].items()
            }
            run["load_average"] = os.getloadavg()[0]
            report["runs"].append(run)
            print(json.dumps(run), flush=True)
        if echo is not None:
            await echo.stop()
        await planner.stop()
    finally:
        if worker is not None:
            worker.stop()
        await http.aclose()
        for svc in services.values():
            svc.stop()
        await drop_database(args.database_url, db_url)
    report["target"] = ">= 100 plans/s"
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"plans-{time.strftime('%Y%m%d-%H%M%S')}.json").write_text(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--redis-url", default=os.environ.get("SOORMA_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
    )
    parser.add_argument(
        "--database-url",
        default=os.environ.get(
            "SOORMA_TEST_DATABASE_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
        ),
    )
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument(
        "--streams", type=lambda s: [int(x) for x in s.split(",")], default=[1, 4, 8, 16]
    )
    parser.add_argument(
        "--no-coalesce",
        action="store_true",
        help="send every publish on its own (BusClient.coalesce=False)",
    )
    parser.add_argument(
        "--transport",
        choices=("lean", "httpx", "aiohttp"),
        default="lean",
        help="the SDK's lean keep-alive transport (default), httpx's own, or httpx-aiohttp's",
    )
    parser.add_argument(
        "--ack-window",
        type=float,
        default=None,
        help="agents' ack_window in seconds (default: the SDK's)",
    )
    parser.add_argument(
        "--layout",
        choices=("one", "split"),
        default="one",
        help="echo agent in this process (one) or in a process of its own",
    )
    parser.add_argument("--echo-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--event-url", help=argparse.SUPPRESS)
    parser.add_argument("--memory-url", help=argparse.SUPPRESS)
    parser.add_argument("--registry-url", help=argparse.SUPPRESS)
    parsed = parser.parse_args()
    asyncio.run(echo_worker(parsed) if parsed.echo_worker else main(parsed))
