"""A handler that fails because a platform service is down is run again, not nacked.

Found by bench/chaos.py: a memory service SIGKILLed and restarting (tens of seconds on a
loaded machine) made every planner step fail; each failure was nacked, redelivered at
once and failed again, so in-flight goals and answers reached ``max_deliveries`` within
seconds and were dead-lettered - plans stuck for good. Now the agent waits the outage
out (backoff, lease held) for up to ``UNAVAILABLE_RETRY_SECONDS`` before it nacks.

Real event service (both backends); the unavailable service is a real loopback port
with nothing listening, reached through the SDK's own service client.
"""

from __future__ import annotations

import socket

import httpx
import pytest
from sdk_helpers import eventually

from soorma import Agent, AgentOptions, PlatformContext
from soorma.client import ServiceClient, verified_tls
from testsupport.server import LiveServer

pytestmark = pytest.mark.asyncio


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # released: nothing listens there any more


async def test_handler_runs_again_after_outage_without_dead_letter(
    event_service: LiveServer, context: PlatformContext
) -> None:
    attempts: list[int] = []
    done: list[str] = []
    async with httpx.AsyncClient(
        verify=verified_tls(),
    ) as http:
        down = ServiceClient(
            base_url=f"http://127.0.0.1:{closed_port()}", http=http, connect_retries=0
        )
        # max_deliveries=1: a single nack would dead-letter the event.
        agent = Agent(
            name="outage-agent",
            context=context,
            options=AgentOptions(max_deliveries=1),
        )

        @agent.on_event(topic="business-facts", event_type="outage.checked")
        async def handle(event, ctx):
            attempts.append(1)
            if len(attempts) < 3:
                await down._send("GET", "/ready")  # the "memory service" is still down
            done.append(event.id)

        await agent.start()
        try:
            event_id = await context.bus.publish("business-facts", "outage.checked", {})
            await eventually(lambda: event_id in done, within=30)
        finally:
            await agent.stop()
    assert len(attempts) == 3
    dead = (await http_dlq(event_service.url))["events"]
    assert dead == []


async def http_dlq(url: str) -> dict:
    async with httpx.AsyncClient(verify=verified_tls(), base_url=url) as client:
        response = await client.get("/v1/events/dlq", params={"topic": "business-facts"})
        response.raise_for_status()
        return response.json()
