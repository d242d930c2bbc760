"""Client CPU per request of the SDK's HTTP transports, side by side.

Usage: ``.venv/bin/python bench/transport.py [--requests N] [--rounds R]``

A trivial JSON echo app runs under uvicorn in a subprocess (pinned to core 0); this
process (pinned to the last core) sends ``N`` sequential ``AsyncClient.request(json=...)``
calls through one shared ``httpx.AsyncClient`` per transport — the SDK's lean transport,
httpx-aiohttp's ``AiohttpTransport`` and httpx's own — interleaved over ``R`` rounds, and
prints the client's CPU time per request (``time.process_time``) and the wall-clock
p50/p99 of one request. B3 (``bench/plans.py``) shows the same choice on whole plans;
this isolates the client side, which is what the transport changes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import UvicornService, free_port, pct, pin_load_generator

BODY = {"type": "bench.step1.requested", "data": {"n": 1, "text": "x" * 200}}


def echo_app() -> Callable[..., object]:
    """``bench.transport:echo_app``: answers every request with its JSON body."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    async def echo(request: Request) -> JSONResponse:
        return JSONResponse(await request.json())

    async def ready(request: Request) -> Response:
        return Response(b"transport-echo")

    return Starlette(routes=[Route("/echo", echo, methods=["POST"]), Route("/ready", ready)])


def make_transport(kind: str, limits: httpx.Limits) -> httpx.AsyncBaseTransport:
    if kind == "lean":
        from soorma._transport import LeanTransport

        return LeanTransport(limits=limits)
    if kind == "aiohttp":
        from httpx_aiohttp import AiohttpTransport

        return AiohttpTransport(limits=limits)
    return httpx.AsyncHTTPTransport(limits=limits)


async def measure(kind: str, url: str, requests: int) -> dict[str, object]:
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=32)
    async with httpx.AsyncClient(transport=make_transport(kind, limits)) as client:
        for _ in range(50):  # warm-up: connection, imports, caches
            (await client.request("POST", url, json=BODY)).raise_for_status()
        walls: list[float] = []
        cpu0 = time.process_time()
        for _ in range(requests):
            t0 = time.perf_counter()
            response = await client.request("POST", url, json=BODY)
            response.json()
            walls.append(time.perf_counter() - t0)
        cpu = time.process_time() - cpu0
    return {
        "transport": kind,
        "cpu_us_per_request": round(cpu / requests * 1e6, 1),
        "p50_us": round(pct(walls, 50) * 1e6, 1),
        "p99_us": round(pct(walls, 99) * 1e6, 1),
    }


async def run(args: argparse.Namespace, url: str) -> None:
    try:
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    except ImportError:
        pass
    for round_no in range(args.rounds):
        for kind in args.transports:
            result = await measure(kind, url, args.requests)
            result["round"] = round_no + 1
            result["load_average"] = round(os.getloadavg()[0], 2)
            print(json.dumps(result), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--transports",
        type=lambda s: s.split(","),
        default=["lean", "aiohttp", "httpx"],
        help="comma-separated: lean, aiohttp, httpx",
    )
    args = parser.parse_args()
    service = UvicornService(
        name="echo app",
        factory="bench.transport:echo_app",
        port=free_port(),
        env={},
        ready_marker=b"transport-echo",
    )
    service.start()
    pin_load_generator()
    try:
        asyncio.run(run(args, service.url + "/echo"))
    finally:
        service.stop()


if __name__ == "__main__":
    main()
