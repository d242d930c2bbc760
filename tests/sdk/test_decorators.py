"""Decorators validate at decoration time and record handlers on their own agent."""

import pytest

from soorma import Agent, Tool


def test_on_event_returns_the_function_unchanged_and_records_it():
    agent = Agent(name="a")

    async def handler(event, context):
        return None

    assert agent.on_event(topic="business-facts", event_type="order.*")(handler) is handler
    assert [(h.topic, h.event_type, h.func) for h in agent.handlers] == [
        ("business-facts", "order.*", handler)
    ]


def test_handlers_are_per_agent_not_global():
    first, second = Agent(name="first"), Agent(name="second")

    @first.on_event(topic="business-facts", event_type="x")
    async def handler(event, context):
        return None

    assert len(first.handlers) == 1
    assert second.handlers == ()


def test_sync_handler_fails_at_decoration():
    agent = Agent(name="a")
    with pytest.raises(TypeError, match="coroutine function"):

        @agent.on_event(topic="business-facts", event_type="x")
        def handler(event, context):
            return None


def test_handler_with_wrong_arity_fails_at_decoration():
    agent = Agent(name="a")
    with pytest.raises(TypeError, match=r"async def handler\(event, context\)"):

        @agent.on_event(topic="business-facts", event_type="x")
        async def handler(event):
            return None


def test_on_event_requires_a_topic():
    agent = Agent(name="a")
    with pytest.raises(TypeError, match="topic"):
        agent.on_event(event_type="x")  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="not a valid topic"):
        agent.on_event(topic="Not Valid", event_type="x")
    with pytest.raises(ValueError, match="event_type"):
        agent.on_event(topic="business-facts", event_type="")


def test_lifecycle_hooks_must_be_async_without_arguments():
    agent = Agent(name="a")
    with pytest.raises(TypeError, match="no arguments"):

        @agent.on_startup
        async def starting(extra):
            return None

    with pytest.raises(TypeError, match="coroutine"):

        @agent.on_shutdown
        def stopping():
            return None


def test_on_invoke_checks_the_request_context_signature():
    tool = Tool(name="t")
    with pytest.raises(TypeError, match=r"async def handler\(request, context\)"):

        @tool.on_invoke("calc.requested")
        async def calc(request):
            return {}

    @tool.on_invoke("calc.requested")
    async def calc_ok(request, context):
        return {}

    assert [(h.topic, h.event_type) for h in tool.handlers] == [
        ("action-requests", "calc.requested")
    ]


def test_agent_subscribes_once_for_all_handlers():
    agent = Agent(name="a")

    @agent.on_event(topic="business-facts", event_type="order.*")
    async def one(event, context):
        return None

    @agent.on_event(topic="action-requests", event_type="pay.requested")
    async def two(event, context):
        return None

    assert agent.topics == ["action-requests", "business-facts"]
    assert agent.event_type_filters == ["order.*", "pay.requested"]
