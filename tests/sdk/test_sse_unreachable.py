"""An agent pointed at no event service says so at WARNING, naming the URL; a stream
lost and back logs its return."""

from __future__ import annotations

import asyncio
import logging

import httpx
import pytest
from sdk_helpers import make_context

from event_service import create_app
from event_service.settings import Settings
from soorma._sse import stream_frames
from soorma.client import verified_tls
from testsupport.server import LiveServer, closed_port

pytestmark = pytest.mark.asyncio


async def test_unreachable_stream_warns_with_the_url(caplog: pytest.LogCaptureFixture) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1/events/stream"
    caplog.set_level(logging.WARNING, logger="soorma")
    async with httpx.AsyncClient(
        verify=verified_tls(),
    ) as http:
        frames = stream_frames(http, url, min_backoff=0.01, max_backoff=0.01)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(frames.__anext__(), timeout=0.3)
        await frames.aclose()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings, "no warning logged for an unreachable event service"
    assert url in warnings[0].getMessage()
    assert "SOORMA_URL" in warnings[0].getMessage()


async def test_a_stream_lost_and_back_logs_its_return(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="soorma")
    server = LiveServer(create_app(Settings(event_backend="memory")))
    await server.start()
    try:
        async with make_context(server.url) as context:
            async with context.bus.subscribe(["business-facts"]) as sub:
                await sub.wait_ready(10)
                await server.stop()
                await asyncio.sleep(0.5)  # the stream notices it is gone
                await server.start()  # same port: the platform restarted
                async with asyncio.timeout(15):
                    while sub.connections < 2:  # noqa: ASYNC110 - no event to await
                        await asyncio.sleep(0.05)
    finally:
        await server.stop()
    messages = [r.getMessage() for r in caplog.records]
    assert [m for m in messages if " lost " in m], messages
    back = [m for m in messages if "reconnected after" in m]
    assert len(back) == 1, messages
    assert back[0].startswith(f"SSE stream {server.url}/v1/events/stream")
