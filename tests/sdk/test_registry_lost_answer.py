"""A registry that dies mid-request does not crash an agent (found by bench/chaos.py).

The chaos run SIGKILLs the registry while agents start or heartbeat. The connection is
then open and the request sent, but no answer comes: a lost connection, not a failed
connect. Before the fix the SDK's service client let that ``httpx`` error through, so
``Agent.start()`` failed (registration only catches the SDK's errors) and the heartbeat
task died for good (the agent was purged from the registry after its TTL and a
ChoreographyPlanner no longer offered its events). Now it is ``ServiceUnavailable``:
the agent starts, keeps handling events and keeps trying to register.

The registry here is a real TCP server on loopback that reads each request and closes
the connection without an answer (what a SIGKILLed service does to its open requests).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
import pytest_asyncio
from sdk_helpers import eventually

from soorma import Agent, AgentOptions, PlatformContext, PlatformSettings
from soorma.client import ServiceClient, verified_tls
from soorma_common.errors import ServiceUnavailable
from testsupport.server import LiveServer

pytestmark = pytest.mark.asyncio


class DyingRegistry:
    """Accepts, reads the request head, closes without answering; counts the requests."""

    def __init__(self) -> None:
        self.requests = 0
        self.server: asyncio.Server | None = None
        self.url = ""

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        self.requests += 1
        writer.close()

    async def __aenter__(self) -> DyingRegistry:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()


@pytest_asyncio.fixture
async def dying_registry() -> AsyncIterator[DyingRegistry]:
    async with DyingRegistry() as registry:
        yield registry


async def test_lost_answer_is_service_unavailable(dying_registry: DyingRegistry) -> None:
    async with httpx.AsyncClient(
        verify=verified_tls(),
    ) as http:
        client = ServiceClient(base_url=dying_registry.url, http=http)
        with pytest.raises(ServiceUnavailable, match="did not answer"):
            await client._send("GET", "/v1/agents")
    assert dying_registry.requests == 1  # sent once: a lost answer is not retried


async def test_agent_starts_and_works_while_registry_dies_mid_request(
    event_service: LiveServer, dying_registry: DyingRegistry
) -> None:
    settings = PlatformSettings(
        event_service_url=event_service.url, registry_url=dying_registry.url
    )
    async with PlatformContext.from_env(settings=settings) as context:
        agent = Agent(
            name="lost-answer-agent",
            context=context,
            options=AgentOptions(registry_ttl=1),
        )
        seen: list[str] = []

        @agent.on_event(topic="business-facts", event_type="lost.answer.checked")
        async def handle(event, ctx):
            seen.append(event.id)

        await agent.start()  # raised httpx.RemoteProtocolError before the fix
        try:
            event_id = await context.bus.publish("business-facts", "lost.answer.checked", {})
            await eventually(lambda: event_id in seen)
            # The heartbeat loop (every ttl/3 s) keeps trying instead of dying.
            tried = dying_registry.requests
            await eventually(lambda: dying_registry.requests >= tried + 2)
            assert agent._presence.task is not None and not agent._presence.task.done()
        finally:
            await agent.stop()
