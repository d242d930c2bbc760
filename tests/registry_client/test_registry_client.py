"""RegistryClient, EventToolkit and validation on publish, against the real registry."""

from __future__ import annotations

import asyncio

import pytest

from soorma import Agent, AgentOptions, PlatformContext
from soorma.ai import EventToolkit
from soorma_common.errors import (
    AgentNotFound,
    EventDefinitionNotFound,
    PayloadInvalid,
    SchemaInvalid,
)
from soorma_common.registry import AgentCapability, AgentDefinition, EventDefinition

pytestmark = pytest.mark.asyncio

SEARCH_SCHEMA = {
    "type": "object",
    "properties": {"query": {"type": "string"}, "limit": {"type": "integer", "minimum": 1}},
    "required": ["query"],
}

SEARCH = EventDefinition(
    event_name="web.search.requested",
    description="Search the web",
    payload_schema=SEARCH_SCHEMA,
)
SEARCH_DONE = EventDefinition(event_name="web.search.completed", topic="action-results")


def searcher(agent_id: str = "searcher-1", ttl: int = 90) -> AgentDefinition:
    return AgentDefinition(
        agent_id=agent_id,
        name="searcher",
        ttl_seconds=ttl,
        capabilities=[
            AgentCapability(
                task_name="web_search",
                description="finds pages",
                consumed_event=SEARCH,
                produced_events=[SEARCH_DONE],
            )
        ],
    )


async def test_register_then_discover_returns_capabilities_with_schemas(context):
    stored = await context.registry.register(searcher())
    assert stored.last_heartbeat is not None

    found = await context.registry.discover(["web_search"])
    assert [a.agent_id for a in found] == ["searcher-1"]
    assert found[0].get_consumed_event_schema("web_search").payload_schema == SEARCH_SCHEMA
    assert found[0].get_produced_event_schema("web_search").event_name == "web.search.completed"

    bare = await context.registry.discover("web_search", include_events=False)
    assert bare[0].get_consumed_event_schema("web_search").payload_schema is None

    assert (await context.registry.find("web.search.requested")).agent_id == "searcher-1"
    assert await context.registry.find("nobody.does.this") is None


async def test_heartbeat_deregister_and_events_of_the_agent(context):
    registry = context.registry
    await registry.register(searcher())
    assert (await registry.heartbeat("searcher-1")).agent_id == "searcher-1"
    event = await registry.get_event("web.search.requested")
    assert event.owner_agent_id == "searcher-1"
    assert [e.event_name for e in await registry.list_events(owner="searcher-1")] == [
        "web.search.completed",
        "web.search.requested",
    ]

    await registry.deregister("searcher-1")
    with pytest.raises(AgentNotFound):
        await registry.heartbeat("searcher-1")
    with pytest.raises(EventDefinitionNotFound):
        await registry.get_event("web.search.requested")


async def test_register_event_rejects_an_invalid_schema_with_a_domain_error(context):
    bad = EventDefinition(event_name="bad.event", payload_schema={"type": "no-such-type"})
    with pytest.raises(SchemaInvalid):
        await context.registry.register_event(bad)
    ok = await context.registry.register_event(
        EventDefinition(event_name="order.placed", topic="business-facts")
    )
    assert ok.topic == "business-facts"
    assert [e.event_name for e in await context.registry.list_events(topic="business-facts")] == [
        "order.placed"
    ]


async def test_agent_registers_all_three_event_levels_and_deregisters_on_stop(context):
    agent = Agent(
        name="mixed",
        context=context,
        capabilities=[AgentCapability(task_name="web_search", consumed_event=SEARCH)],
        events_consumed=[
            "order.placed",
            EventDefinition(
                event_name="invoice.created",
                topic="business-facts",
                payload_schema={"type": "object"},
            ),
        ],
        events_produced=["order.seen"],
    )

    @agent.on_event(topic="business-facts", event_type="order.placed")
    async def on_order(event, ctx):
        return None

    await agent.start()
    try:
        stored = await context.registry.get_agent("mixed")
        assert stored.agent_type == "agent"
        assert set(stored.events_consumed) == {
            "web.search.requested",
            "order.placed",
            "invoice.created",
        }
        assert stored.events_produced == ["order.seen"]
        assert (await context.registry.get_event("invoice.created")).payload_schema == {
            "type": "object"
        }
        assert (await context.registry.find("order.placed")).agent_id == "mixed"
    finally:
        await agent.stop()
    with pytest.raises(AgentNotFound):
        await context.registry.get_agent("mixed")


async def test_agent_re_registers_when_its_heartbeat_finds_it_gone(context):
    agent = Agent(
        name="comeback",
        context=context,
        options=AgentOptions(registry_ttl=1),
    )

    @agent.on_event(topic="business-facts", event_type="x.y")
    async def handler(event, ctx):
        return None

    await agent.start()
    try:
        # Someone (an operator, a purge) removes the agent behind its back.
        await context.registry.deregister("comeback")
        async with asyncio.timeout(10):
            while True:
                try:
                    await context.registry.get_agent("comeback")
                    break
                except AgentNotFound:
                    await asyncio.sleep(0.05)
    finally:
        await agent.stop()


async def test_agent_starts_without_a_reachable_registry(events):
    from soorma import PlatformSettings
    from testsupport.server import closed_port

    settings = PlatformSettings(
        event_service_url=events.url, registry_url=f"http://127.0.0.1:{closed_port()}"
    )
    async with PlatformContext.from_env(settings=settings) as ctx:
        agent = Agent(name="lonely", context=ctx)

        @agent.on_event(topic="business-facts", event_type="x.y")
        async def handler(event, c):
            return None

        await agent.start()
        # Publishing action requests still works: validation is skipped, not fatal.
        await ctx.bus.request("a.b", {"q": 1}, response_event="a.b.done")
        await agent.stop()


async def test_action_request_with_invalid_payload_is_refused_naming_the_field(context):
    await context.registry.register(searcher())
    with pytest.raises(PayloadInvalid) as info:
        await context.bus.request(
            "web.search.requested", {"query": "x", "limit": 0}, response_event="done"
        )
    assert info.value.details["field"] == "limit"
    with pytest.raises(PayloadInvalid) as info:
        await context.bus.request("web.search.requested", {"limit": 3}, response_event="done")
    assert info.value.details["field"] == "query"
    assert "query" in info.value.message

    # Valid payloads pass; unregistered events are not checked.
    await context.bus.request("web.search.requested", {"query": "x"}, response_event="done")
    await context.bus.request("unregistered.requested", {"any": 1}, response_event="done")


async def test_business_facts_are_not_validated(context):
    await context.registry.register_event(
        EventDefinition(
            event_name="order.placed",
            topic="business-facts",
            payload_schema={"type": "object", "required": ["order_id"]},
        )
    )
    await context.bus.announce("order.placed", {"no_order_id": True})
    # The same event type on action-requests is validated.
    with pytest.raises(PayloadInvalid):
        await context.bus.publish("action-requests", "order.placed", {"x": 1})


async def test_toolkit_lists_actionable_events_and_formats_them_for_a_prompt(context):
    toolkit: EventToolkit = context.toolkit
    await context.registry.register(searcher())
    await context.registry.register_event(
        EventDefinition(event_name="order.placed", topic="business-facts")
    )

    actionable = await toolkit.discover_actionable_events()
    assert [e.event_name for e in actionable] == ["web.search.requested"]
    assert {e.event_name for e in await toolkit.discover_events()} == {
        "web.search.requested",
        "web.search.completed",
        "order.placed",
    }
    assert [e.event_name for e in await toolkit.discover_events(topic="business-facts")] == [
        "order.placed"
    ]

    text = toolkit.format_for_llm(actionable)
    assert "web.search.requested (topic: action-requests)" in text
    assert "Search the web" in text
    assert '"required":["query"]' in text
    assert (await toolkit.get_event_info("web.search.requested")).event_name == (
        "web.search.requested"
    )
    assert await toolkit.get_event_info("nope") is None


async def test_toolkit_validate_payload_lists_errors_or_raises(context):
    toolkit = context.toolkit
    await context.registry.register(searcher())
    assert await toolkit.validate_payload("web.search.requested", {"query": "q"}) == []
    errors = await toolkit.validate_payload("web.search.requested", {"limit": "ten"})
    assert {e["field"] for e in errors} == {"query", "limit"}
    with pytest.raises(PayloadInvalid) as info:
        await toolkit.validate_payload("web.search.requested", {"query": 3}, raise_on_error=True)
    assert info.value.details["field"] == "query"
    assert (await toolkit.validate_payload("unknown.event", {}))[0]["field"] == "event_name"
    with pytest.raises(EventDefinitionNotFound):
        await toolkit.validate_payload("unknown.event", {}, raise_on_error=True)
