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
from memory_service import create_app as create_memory_app
from testsupport.server import serve
from testsupport.services import memory_settings

# The subprocess helper lives with the SDK tests.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sdk"))
from sdk_helpers import Proc, subprocess_env

pytestmark = pytest.mark.asyncio

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "01-hello-world"


@pytest_asyncio.fixture
async def services(tmp_path: Path) -> AsyncIterator[dict[str, str]]:
    """The event and memory services (``soorma dev --only events,memory``), as the
    environment of the example's processes: the tool keeps its answers."""
    memory_app = create_memory_app(
        memory_settings(f"sqlite+aiosqlite:///{tmp_path}/memory.db", tmp_path)
    )
    async with (
        serve(create_app(Settings(event_backend="memory"))) as events,
        serve(memory_app) as memory,
    ):
        yield {"SOORMA_EVENT_SERVICE_URL": events.url, "SOORMA_MEMORY_URL": memory.url}


async def test_client_prints_the_greeting_from_the_tool(services: dict[str, str]):
    env = subprocess_env(**services)
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


async def test_client_reports_a_tool_failure(services: dict[str, str]):
    env = subprocess_env(**services)
    tool = await Proc.start(sys.executable, str(EXAMPLE / "tool.py"), env=env)
    try:
        await tool.wait_for("agent hello-world ready")
        client = await Proc.start(sys.executable, str(EXAMPLE / "client.py"), "x" * 101, env=env)
        assert await client.wait() == 1
        assert "the tool failed: name is too long" in client.output
    finally:
        await tool.kill()
