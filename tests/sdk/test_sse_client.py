"""The SDK's SSE client against a scripted stream server (real uvicorn, real sockets).

The scripted server misbehaves on purpose (goes silent, refuses), which the real event
service does not do on demand.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from soorma import BusClient
from soorma.client import verified_tls
from soorma_common.errors import Unauthenticated
from testsupport.server import serve

pytestmark = pytest.mark.asyncio


def envelope(n: int) -> str:
    return json.dumps({"type": "tick", "topic": "business-facts", "data": {"n": n}})


def silent_after_one_event_app(seen_last_ids: list[str | None]) -> Starlette:
    async def stream(request: Request) -> Response:
        seen_last_ids.append(request.headers.get("last-event-id"))
        n = len(seen_last_ids)

        async def body() -> AsyncIterator[str]:
            yield "event: ready\ndata: {}\n\n"
            yield f"event: message\nid: business-facts=0-{n}\ndata: {envelope(n)}\n\n"
            await asyncio.Event().wait()  # then silence: no heartbeat, no close

        return StreamingResponse(body(), media_type="text/event-stream")

    return Starlette(routes=[Route("/v1/events/stream", stream)])


async def test_silent_stream_is_dropped_and_resumed_with_last_event_id():
    seen: list[str | None] = []
    async with (
        serve(silent_after_one_event_app(seen)) as server,
        httpx.AsyncClient(
            verify=verified_tls(),
        ) as http,
    ):
        bus = BusClient(base_url=server.url, http=http, heartbeat_timeout=0.3, max_backoff=0.1)
        async with bus.subscribe("business-facts") as sub:
            first = await anext(sub)
            second = await anext(sub)
            assert sub.connections == 2
    assert (first.data, second.data) == ({"n": 1}, {"n": 2})
    assert seen == [None, "business-facts=0-1"]
    assert second.delivery_id == "business-facts=0-2"


async def test_refused_stream_raises_the_domain_error_instead_of_retrying():
    attempts: list[int] = []

    async def stream(request: Request) -> Response:
        attempts.append(1)
        body = {"error": {"code": "unauthenticated", "message": "token expired", "details": None}}
        return JSONResponse(body, status_code=401)

    app = Starlette(routes=[Route("/v1/events/stream", stream)])
    async with (
        serve(app) as server,
        httpx.AsyncClient(
            verify=verified_tls(),
        ) as http,
    ):
        bus = BusClient(base_url=server.url, http=http)
        async with bus.subscribe("business-facts") as sub:
            with pytest.raises(Unauthenticated, match="token expired"):
                await sub.wait_ready(10)
    assert attempts == [1]
