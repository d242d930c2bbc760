"""examples/01-hello-world runs as documented: tool and client as real processes."""

from __future__ import annotations

import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from event_service import create_app
from event_service.settings import Settings
from testsupport.server import LiveServer, serve

# The subprocess helper lives with the SDK tests.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sdk"))
from sdk_helpers import Proc, subprocess_env

pytestmark = pytest.mark.asyncio

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "01-hello-world"


@pytest_asyncio.fixture
async def event_service() -> AsyncIterator[LiveServer]:
    async with serve(create_app(Settings(event_backend="memory"))) as server:
        yield server


async def test_client_prints_the_greeting_from_the_tool(event_service: LiveServer):
    env = subprocess_env(SOORMA_EVENT_SERVICE_URL=event_service.url)
    tool = await Proc.start(sys.executable, str(EXAMPLE / "tool.py"), env=env)
    try:
        await tool.wait_for("agent hello-world ready")
        client = await Proc.start(sys.executable, str(EXAMPLE / "client.py"), "Ada", env=env)
        assert await client.wait() == 0, client.output
        assert client.lines == ["Hello, Ada!"]
        # Ctrl-C on the tool is a clean, graceful stop.
        assert await tool.stop(signal.SIGINT) == 0, tool.output
    finally:
        await tool.kill()
    assert "agent hello-world stopped" in tool.output


async def test_client_reports_a_tool_failure(event_service: LiveServer):
    env = subprocess_env(SOORMA_EVENT_SERVICE_URL=event_service.url)
    tool = await Proc.start(sys.executable, str(EXAMPLE / "tool.py"), env=env)
    try:
        await tool.wait_for("agent hello-world ready")
        client = await Proc.start(sys.executable, str(EXAMPLE / "client.py"), "x" * 101, env=env)
        assert await client.wait() == 1
        assert "the tool failed: name is too long" in client.output
    finally:
        await tool.kill()
