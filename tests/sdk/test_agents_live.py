"""Agent and Tool against the real event service (memory and Redis backends)."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest
from sdk_helpers import eventually, make_context

from event_service import create_app
from event_service.settings import Settings
from soorma import Agent, AgentOptions, Event, PlatformContext, Tool
from testsupport.server import LiveServer, free_port, serve

pytestmark = pytest.mark.asyncio


def greeter(context: PlatformContext) -> Tool:
    # No memory service here: the tool says so (no recorded answers, no claims).
    tool = Tool(name="greeter", context=context, answer_retention=0)

    @tool.on_invoke("greet.requested")
    async def greet(request, ctx):
        if request.data.get("name") == "":
            raise ValueError("name must not be empty")
        return {"greeting": f"Hello, {request.data['name']}!"}

    return tool


async def test_tool_round_trip_answers_the_callers_response_event(context: PlatformContext):
    tool = greeter(context)
    await tool.start()
    try:
        answer = await context.bus.call(
            "greet.requested", {"name": "Ada"}, response_event="greet.done", timeout=10
        )
    finally:
        await tool.stop()
    assert answer.type == "greet.done"
    assert answer.topic == "action-results"
    assert answer.data["success"] is True
    assert answer.data["result"] == {"greeting": "Hello, Ada!"}
    # The answer is a child of the request: same trace, parent = request id.
    assert answer.parent_event_id == answer.data["request_id"]
    assert answer.trace_id == answer.data["request_id"]


async def test_tool_failure_is_answered_with_success_false_and_not_retried(
    context: PlatformContext,
):
    tool = greeter(context)
    await tool.start()
    try:
        answer = await context.bus.call(
            "greet.requested", {"name": ""}, response_event="greet.done", timeout=10
        )
        # The failed request was acked: the next request is served, nothing redelivered.
        ok = await context.bus.call(
            "greet.requested", {"name": "Bo"}, response_event="greet.done", timeout=10
        )
    finally:
        await tool.stop()
    assert answer.data["success"] is False
    assert answer.data["error"] == "name must not be empty"
    assert ok.data["result"] == {"greeting": "Hello, Bo!"}


async def test_tool_acks_a_request_without_response_event_and_does_not_call_the_handler(
    context: PlatformContext,
):
    tool = Tool(name="strict", context=context, answer_retention=0)
    calls: list[str] = []

    @tool.on_invoke("work.requested")
    async def work(request, ctx):
        calls.append(request.data["n"])
        return {}

    await tool.start()
    try:
        await context.bus.publish("action-requests", "work.requested", {"n": "no-reply"})
        answer = await context.bus.call(
            "work.requested", {"n": "reply"}, response_event="work.done", timeout=10
        )
    finally:
        await tool.stop()
    assert answer.data["success"] is True
    assert calls == ["reply"]


async def test_handler_exception_is_nacked_redelivered_and_then_succeeds(
    context: PlatformContext,
):
    agent = Agent(name="flaky", context=context)
    attempts: list[str] = []
    done = asyncio.Event()

    @agent.on_event(topic="business-facts", event_type="order.placed")
    async def handle(event, ctx):
        attempts.append(event.id)
        if len(attempts) == 1:
            raise RuntimeError("database briefly unavailable")
        done.set()

    await agent.start()
    try:
        event_id = await context.bus.announce("order.placed", {"order": 1})
        async with asyncio.timeout(15):
            await done.wait()
    finally:
        await agent.stop()
    assert attempts == [event_id, event_id]


async def test_redelivered_completed_event_is_acked_and_skipped(context: PlatformContext):
    agent = Agent(name="once", context=context)
    seen: Counter[str] = Counter()
    handled = {"first": asyncio.Event(), "sentinel": asyncio.Event()}

    @agent.on_event(topic="business-facts", event_type="*")
    async def handle(event, ctx):
        seen[event.id] += 1
        handled[event.data["name"]].set()

    await agent.start()
    try:
        # The same event id published twice: the second is a redelivery to the SDK.
        await context.bus.announce("x.happened", {"name": "first"}, event_id="dup-1")
        async with asyncio.timeout(10):
            await handled["first"].wait()
        await context.bus.announce("x.happened", {"name": "first"}, event_id="dup-1")
        await context.bus.announce("x.happened", {"name": "sentinel"})
        async with asyncio.timeout(10):
            await handled["sentinel"].wait()
    finally:
        await agent.stop()
    assert seen["dup-1"] == 1


async def test_trace_and_parent_chain_propagate_across_two_hops(context: PlatformContext):
    a = Agent(name="hop-a", context=context)
    b = Agent(name="hop-b", context=context)

    @a.on_event(topic="business-facts", event_type="e1")
    async def on_e1(event, ctx):
        await ctx.bus.announce("e2", {"from": "a"})

    @b.on_event(topic="business-facts", event_type="e2")
    async def on_e2(event, ctx):
        await ctx.bus.publish("notification-events", "e3", {"from": "b"})

    await a.start()
    await b.start()
    try:
        async with context.bus.subscribe(
            ["business-facts", "notification-events"], event_types=["e2", "e3"]
        ) as observer:
            await observer.wait_ready(10)
            e1_id = await context.bus.announce("e1", {}, session_id="session-7", plan_id="p-9")
            async with asyncio.timeout(10):
                e2: Event = await anext(observer)
                e3: Event = await anext(observer)
    finally:
        await a.stop()
        await b.stop()
    assert (e2.type, e3.type) == ("e2", "e3")
    assert e2.trace_id == e3.trace_id == e1_id  # e1 started the trace
    assert e2.parent_event_id == e1_id
    assert e3.parent_event_id == e2.id
    assert e3.session_id == "session-7" and e3.plan_id == "p-9"


async def test_two_replicas_of_one_agent_split_the_work(
    event_service: LiveServer, event_settings: Settings
):
    handled_by: dict[int, str] = {}
    contexts = [make_context(event_service.url) for _ in range(2)]
    replicas = [
        Agent(
            name="splitter",
            context=ctx,
            options=AgentOptions(max_concurrency=1),
        )
        for ctx in contexts
    ]
    for replica in replicas:

        @replica.on_event(topic="business-facts", event_type="job.created")
        async def handle(event, ctx, replica=replica):
            n = event.data["n"]
            assert n not in handled_by, f"job {n} handled twice"
            handled_by[n] = replica.consumer_id

    for replica in replicas:
        await replica.start()
    try:
        # One at a time, so each job goes to whichever replica is waiting for work.
        for n in range(12):
            await contexts[0].bus.announce("job.created", {"n": n})
            await eventually(lambda n=n: n in handled_by)
    finally:
        for replica in replicas:
            await replica.stop()
        for ctx in contexts:
            await ctx.close()
    assert sorted(handled_by) == list(range(12))
    assert set(handled_by.values()) == {r.consumer_id for r in replicas}


async def test_agent_reconnects_after_an_event_service_restart(event_settings: Settings):
    port = free_port()
    handled: list[int] = []
    got = asyncio.Event()
    async with make_context(f"http://127.0.0.1:{port}") as context:
        agent = Agent(name="survivor", context=context)

        @agent.on_event(topic="business-facts", event_type="tick")
        async def handle(event, ctx):
            handled.append(event.data["n"])
            got.set()

        async with serve(create_app(event_settings), port=port):
            await agent.start()
            await context.bus.announce("tick", {"n": 1})
            async with asyncio.timeout(10):
                await got.wait()
        got.clear()
        try:
            async with serve(create_app(event_settings), port=port):
                await eventually(lambda: agent.stream_connections >= 2)
                await context.bus.announce("tick", {"n": 2})
                async with asyncio.timeout(10):
                    await got.wait()
                await agent.stop()
        finally:
            await agent.stop()
    assert handled == [1, 2]


async def test_graceful_stop_waits_for_in_flight_handlers(context: PlatformContext):
    agent = Agent(name="patient", context=context)
    started, release = asyncio.Event(), asyncio.Event()
    finished: list[str] = []

    @agent.on_event(topic="business-facts", event_type="slow.job")
    async def handle(event, ctx):
        started.set()
        await release.wait()
        finished.append(event.id)

    await agent.start()
    event_id = await context.bus.announce("slow.job", {})
    async with asyncio.timeout(10):
        await started.wait()
    stopping = asyncio.create_task(agent.stop())
    await eventually(lambda: agent.stopping)
    await eventually(lambda: agent._subscription is None or agent._subscription._closed)
    assert not stopping.done() and finished == []
    release.set()
    async with asyncio.timeout(10):
        await stopping
    assert finished == [event_id]
    assert not agent.running


async def test_a_handler_registered_under_overlapping_patterns_runs_once_per_event(
    context: PlatformContext,
):
    agent = Agent(name="overlap", context=context)
    calls: list[str] = []
    sentinel = asyncio.Event()

    async def handle(event, ctx):
        calls.append(event.type)
        if event.type == "order.shipped":
            sentinel.set()

    agent.on_event(topic="business-facts", event_type="order.*")(handle)
    agent.on_event(topic="business-facts", event_type="order.placed")(handle)
    await agent.start()
    try:
        await context.bus.announce("order.placed", {})
        await context.bus.announce("order.shipped", {})
        async with asyncio.timeout(10):
            await sentinel.wait()
    finally:
        await agent.stop()
    assert calls == ["order.placed", "order.shipped"]
