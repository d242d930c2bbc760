"""An agent pointed at no event service says so at WARNING, naming the URL."""

from __future__ import annotations

import asyncio
import logging

import httpx
import pytest

from soorma._sse import stream_frames
from testsupport.server import free_port

pytestmark = pytest.mark.asyncio


async def test_unreachable_stream_warns_with_the_url(caplog: pytest.LogCaptureFixture) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1/events/stream"
    caplog.set_level(logging.WARNING, logger="soorma")
    async with httpx.AsyncClient() as http:
        frames = stream_frames(http, url, min_backoff=0.01, max_backoff=0.01)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(frames.__anext__(), timeout=0.3)
        await frames.aclose()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings, "no warning logged for an unreachable event service"
    assert url in warnings[0].getMessage()
    assert "SOORMA_URL" in warnings[0].getMessage()
