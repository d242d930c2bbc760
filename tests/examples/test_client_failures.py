"""An example client's expected failures are one line, never a traceback."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import pytest

from event_service import create_app
from event_service.settings import Settings
from soorma import PlatformContext, PlatformSettings
from testsupport.server import closed_port, serve

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sdk"))
from sdk_helpers import Proc, subprocess_env

pytestmark = pytest.mark.asyncio

CLIENT = Path(__file__).resolve().parents[2] / "examples" / "01-hello-world" / "client.py"


async def test_the_platform_down_is_one_line_naming_the_url() -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    client = await Proc.start(
        sys.executable, str(CLIENT), "Ada", env=subprocess_env(SOORMA_URL=url)
    )
    assert await client.wait(within=60) == 1, client.output
    assert len(client.lines) == 1, client.output
    assert client.lines[0].startswith(f"error: cannot reach the event service at {url}/events/")


async def test_ctrl_c_while_waiting_for_the_answer_is_quiet() -> None:
    async with serve(create_app(Settings(event_backend="memory"))) as events:
        settings = PlatformSettings(event_service_url=events.url)
        async with PlatformContext.from_env(settings=settings) as context:
            async with context.bus.subscribe(["action-requests"]) as requests:
                await requests.wait_ready(10)
                env = subprocess_env(SOORMA_EVENT_SERVICE_URL=events.url)
                client = await Proc.start(sys.executable, str(CLIENT), "Ada", env=env)
                try:
                    # Published: the client now waits for an answer nobody sends.
                    async with asyncio.timeout(60):
                        await anext(aiter(requests))
                    assert await client.stop(signal.SIGINT) == 130, client.output
                finally:
                    await client.kill()
    assert client.lines == ["interrupted"], client.output
