"""``bus.call`` and the clients name the cause: the platform unreachable, the wrong
service at an address, or no agent consuming the event type (with "did you mean")."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from event_service import create_app as create_event_app
from memory_service import create_app as create_memory_app
from registry_service import create_app as create_registry_app
from soorma import NotFound, PlatformContext, PlatformSettings, ServiceUnavailable
from soorma_common.registry import AgentDefinition
from testsupport.server import closed_port, serve
from testsupport.services import event_settings, memory_settings, registry_settings

pytestmark = pytest.mark.asyncio


async def test_call_with_the_platform_down_names_the_url_at_once_and_sends_nothing() -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    settings = PlatformSettings.from_env({"SOORMA_URL": url})
    async with PlatformContext.from_env(settings=settings) as context:
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(ServiceUnavailable) as caught:
            await context.bus.call("greet.requested", {}, response_event="greet.done", timeout=15)
        assert loop.time() - started < 5
    message = str(caught.value)
    assert f"cannot reach the event service at {url}/events/" in message
    assert "'greet.requested' was not sent" in message
    assert "is an agent handling" not in message


async def test_a_call_nobody_consumes_says_what_the_registry_knows(tmp_path: Path) -> None:
    registry_app = create_registry_app(
        registry_settings(f"sqlite+aiosqlite:///{tmp_path}/r.db", tmp_path)
    )
    async with serve(create_event_app(event_settings())) as events, serve(registry_app) as registry:
        settings = PlatformSettings(event_service_url=events.url, registry_url=registry.url)
        async with PlatformContext.from_env(settings=settings) as context:
            await context.registry.register(
                AgentDefinition(
                    agent_id="hello-1", name="hello-world", events_consumed=["greet.requested"]
                )
            )
            with pytest.raises(TimeoutError) as typo:
                await context.bus.call("greet.requestd", {}, response_event="x.done", timeout=0.5)
            assert "no live agent consumes 'greet.requestd'" in str(typo.value)
            assert "did you mean 'greet.requested'?" in str(typo.value)
            with pytest.raises(TimeoutError) as silent:
                await context.bus.call("greet.requested", {}, response_event="x.done", timeout=0.5)
            assert "hello-world consume 'greet.requested' but none answered" in str(silent.value)


async def test_the_wrong_service_at_an_address_says_so(tmp_path: Path) -> None:
    memory_app = create_memory_app(
        memory_settings(f"sqlite+aiosqlite:///{tmp_path}/m.db", tmp_path)
    )
    async with serve(memory_app) as memory:
        # The event service's variable pointing at the memory service.
        settings = PlatformSettings(event_service_url=memory.url)
        async with PlatformContext.from_env(settings=settings) as context:
            with pytest.raises(NotFound) as caught:
                await context.bus.publish("custom.x", "x.happened", {})
    assert f"{memory.url}/v1/events" in str(caught.value)
    assert "does not serve the service this client needs" in str(caught.value)


async def test_an_agent_registers_the_event_types_its_handlers_take() -> None:
    from soorma import Tool

    tool = Tool(name="hello-world", answer_retention=0)

    @tool.on_invoke("greet.requested")
    async def greet(request, context):
        return {}

    definition, _ = tool.agent_definition()
    assert "greet.requested" in definition.events_consumed
