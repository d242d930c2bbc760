"""The harness's in-process transport streams responses and runs lifespans like a server."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from soorma import PlatformContext, PlatformSettings
from soorma.testing._asgi import Lifespan, StreamingASGITransport
from soorma_common.errors import ServiceUnavailable

pytestmark = pytest.mark.asyncio


class Ticker:
    """An endless streaming app: a chunk per tick until the client disconnects."""

    def __init__(self) -> None:
        self.disconnected = asyncio.Event()
        self.state_seen: dict[str, Any] = {}
        self.started = False
        self.stopped = False

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    self.started = True
                    scope["state"]["greeting"] = "hello from the lifespan"
                    await send({"type": "lifespan.startup.complete"})
                else:
                    self.stopped = True
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        self.state_seen = dict(scope.get("state", {}))
        if scope["path"] == "/fail":
            raise RuntimeError("the app broke")
        await receive()  # the request body
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/plain")],
            }
        )
        watcher = asyncio.ensure_future(receive())
        tick = 0
        while not watcher.done():
            await send(
                {"type": "http.response.body", "body": f"tick {tick}\n".encode(), "more_body": True}
            )
            tick += 1
            await asyncio.wait({watcher}, timeout=0.01)
        if watcher.result()["type"] == "http.disconnect":
            self.disconnected.set()


async def test_an_endless_response_streams_chunk_by_chunk_and_sees_the_disconnect():
    app = Ticker()
    lifespan = Lifespan(app, name="ticker")
    state = await lifespan.start()
    transport = StreamingASGITransport({"ticker.test": app}, states={"ticker.test": state})
    async with httpx.AsyncClient(transport=transport) as client:
        async with asyncio.timeout(5), client.stream("GET", "http://ticker.test/") as response:
            assert response.status_code == 200
            lines = []
            async for line in response.aiter_lines():
                lines.append(line)
                if len(lines) == 3:
                    break
        assert lines == ["tick 0", "tick 1", "tick 2"]
        # Closing the response is the client going away: the app is told so.
        await asyncio.wait_for(app.disconnected.wait(), 2)
    assert app.state_seen == {"greeting": "hello from the lifespan"}
    await lifespan.stop()
    assert app.started and app.stopped


async def test_an_app_error_before_the_response_reaches_the_caller():
    app = Ticker()
    async with httpx.AsyncClient(transport=StreamingASGITransport({"ticker.test": app})) as client:
        with pytest.raises(RuntimeError, match="the app broke"):
            await client.get("http://ticker.test/fail")


async def test_a_host_without_a_service_is_unreachable_for_the_sdk():
    transport = StreamingASGITransport({})
    async with httpx.AsyncClient(transport=transport) as client:
        settings = PlatformSettings(memory_url="http://nowhere.soorma.test")
        context = PlatformContext.from_env(http=client, settings=settings)
        assert context.memory is not None
        context.memory.retry_backoff = 0.001
        with pytest.raises(ServiceUnavailable, match=r"nowhere\.soorma\.test"):
            await context.memory.get_plan_context("p-1")


async def test_a_failing_lifespan_start_raises_its_error():
    async def broken(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        await send({"type": "lifespan.startup.failed", "message": "no database"})

    with pytest.raises(RuntimeError, match="broken failed to start: no database"):
        await Lifespan(broken, name="broken").start()


async def test_the_read_timeout_bounds_a_silent_app_as_it_would_a_socket():
    async def silent(scope: Any, receive: Any, send: Any) -> None:
        await asyncio.Event().wait()

    transport = StreamingASGITransport({"silent.test": silent})
    async with httpx.AsyncClient(transport=transport, timeout=0.05) as client:
        with pytest.raises(httpx.ReadTimeout, match=r"no response within 0\.05 s"):
            await client.get("http://silent.test/")
    app = Ticker()
    async with httpx.AsyncClient(
        transport=StreamingASGITransport({"ticker.test": app}), timeout=0.5
    ) as client:
        # The timeout bounds each wait for data, not the whole stream: 60 ticks at 10 ms
        # outlast it.
        async with client.stream("GET", "http://ticker.test/") as response:
            count = 0
            async for _ in response.aiter_lines():
                count += 1
                if count == 60:
                    break
    assert count == 60
