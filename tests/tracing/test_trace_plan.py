"""One goal's plan is one trace: planner, tool, memory and event service, parent by parent."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode, format_trace_id

from soorma import Agent, AgentOptions, Tool
from soorma.agents.planner import Planner
from soorma.testing import PlatformHarness
from soorma_common.events import trace_id_of
from soorma_common.state import (
    PlanDefinition,
    StateAction,
    StateConfig,
    StateTransition,
)

pytestmark = pytest.mark.asyncio

STEPS = ("step1", "step2", "step3")


def three_step_plan() -> PlanDefinition:
    states: dict[str, StateConfig] = {
        "start": StateConfig(state_name="start", default_next=STEPS[0])
    }
    for i, step in enumerate(STEPS):
        states[step] = StateConfig(
            state_name=step,
            action=StateAction(
                event_type=f"{step}.requested",
                response_event=f"{step}.completed",
                data={"n": "{goal_data.n}"},
            ),
            transitions=[
                StateTransition(
                    on_event=f"{step}.completed",
                    to_state=STEPS[i + 1] if i + 1 < len(STEPS) else "done",
                )
            ],
        )
    states["done"] = StateConfig(state_name="done", is_terminal=True)
    return PlanDefinition(plan_type="triple.goal", states=states)


def agents() -> tuple[Tool, Planner]:
    stepper = Tool(name="stepper")

    for step in STEPS:

        @stepper.on_invoke(f"{step}.requested")
        async def run(request: Any, context: Any) -> dict[str, int]:
            return {"n": int(request.data["n"]) + 1}

    return stepper, Planner(name="tripler", plan_definition=three_step_plan())


def by_id(spans: list[ReadableSpan]) -> dict[int, ReadableSpan]:
    return {s.context.span_id: s for s in spans}


def parent(span: ReadableSpan, index: dict[int, ReadableSpan]) -> ReadableSpan:
    assert span.parent is not None, f"{span.name} has no parent"
    assert span.parent.span_id in index, f"{span.name}'s parent is not in the trace"
    return index[span.parent.span_id]


async def test_a_three_step_plan_is_one_connected_trace(spans):
    stepper, planner = agents()
    async with PlatformHarness() as platform:
        await platform.start(stepper, planner)
        answer = await platform.call("triple.goal", {"n": 1}, response_event="triple.answered")
        assert answer.data["status"] == "completed"
    # After the harness closed: every handler, client and server span has ended.
    goal = spans.one("publish triple.goal")
    assert goal.kind is SpanKind.PRODUCER and goal.parent is None
    trace_id = goal.context.trace_id
    trace = spans.in_trace(trace_id)
    index = by_id(trace)

    # One tree: a single root (the goal's publish), every other span under a span of it.
    roots = [s for s in trace if s.parent is None]
    assert roots == [goal]
    for span in trace:
        if span is not goal:
            parent(span, index)

    # The envelope carries the trace: W3C context, and trace_id = the W3C trace id.
    assert trace_id_of(answer.traceparent) == format_trace_id(trace_id)
    assert answer.trace_id == format_trace_id(trace_id)

    names = [s.name for s in trace]
    for step in STEPS:
        request = [s for s in trace if s.name == f"publish {step}.requested"]
        assert len(request) == 1, names
        # The tool's handler run continues the request's span...
        (run,) = [s for s in trace if s.name == f"process {step}.requested"]
        assert run.kind is SpanKind.CONSUMER
        assert parent(run, index) is request[0]
        assert run.attributes["messaging.consumer.group.name"] == "stepper"
        # The delivery itself is marked by a receive span beside the run.
        (received,) = [s for s in trace if s.name == f"receive {step}.requested"]
        assert parent(received, index) is request[0]
        assert received.attributes["soorma.delivery_id"]
        # ...its answer is published from inside that run...
        (done,) = [s for s in trace if s.name == f"publish {step}.completed"]
        assert parent(done, index) is run
        # ...and the planner's handling of the answer hangs under that publish.
        (handled,) = [s for s in trace if s.name == f"process {step}.completed"]
        assert parent(handled, index) is done
        assert handled.attributes["messaging.consumer.group.name"] == "tripler"
    # The planner's steps chain: step N+1 is requested while handling step N's answer.
    first = next(s for s in trace if s.name == "publish step1.requested")
    assert parent(parent(first, index), index) is goal
    for earlier, later in itertools.pairwise(STEPS):
        (request,) = [s for s in trace if s.name == f"publish {later}.requested"]
        assert parent(request, index).name == f"process {earlier}.completed"
    (final,) = [s for s in trace if s.name == "publish triple.answered"]
    assert parent(final, index).name == "process step3.completed"

    # Memory calls of the planner are client spans under its handler runs, and the
    # memory service's server span for each joins through the traceparent header.
    memory_calls = [s for s in trace if s.attributes.get("soorma.component") == "memory"]
    assert memory_calls, names
    for call in memory_calls:
        assert call.kind is SpanKind.CLIENT
        assert parent(call, index).name.startswith("process ")
        assert call.name.startswith("memory.") and call.name != "memory.GET"
    servers = [s for s in trace if s.kind is SpanKind.SERVER]
    memory_servers = [s for s in servers if s.attributes["soorma.service"] == "memory-service"]
    # One server span per call, fast paths (plan-context) included.
    assert sorted(parent(s, index).context.span_id for s in memory_servers) == sorted(
        c.context.span_id for c in memory_calls
    )
    # Publishes reach the event service inside their producer span (the publish fast path
    # is inside the middleware stack too); events published together (one publish-batch)
    # share one request, under the first of them.
    event_servers = [s for s in servers if s.attributes["soorma.service"] == "event-service"]
    assert all(parent(s, index).kind is SpanKind.PRODUCER for s in event_servers)
    sent = {parent(s, index).context.span_id for s in event_servers}
    assert goal.context.span_id in sent
    for span in trace:
        published = [c for c in trace if c.parent and c.parent.span_id == span.context.span_id]
        published = [c for c in published if c.kind is SpanKind.PRODUCER]
        if published:
            assert {c.context.span_id for c in published} & sent, span.name
    assert {s.attributes["url.path"] for s in event_servers} == {
        "/v1/events/publish",
        "/v1/events/publish-batch",
    }
    registry_servers = [s for s in servers if s.attributes["soorma.service"] == "registry-service"]
    assert registry_servers
    for server in registry_servers:
        assert parent(server, index).attributes["soorma.component"] == "registry"
    # Look-ups the SDK expects to miss (no recorded answer yet, no registered schema)
    # are noted on their client spans (status code, error type), not marked failed.
    assert all(s.status.status_code is not StatusCode.ERROR for s in trace)
    misses = [s for s in trace if s.attributes.get("http.response.status_code") == 404]
    assert {s.attributes["error.type"] for s in misses if s.kind is SpanKind.CLIENT} >= {
        "EventDefinitionNotFound"
    }
    # The registry's schema check before a publish happens inside that publish's span.
    checks = [s for s in trace if s.name == "registry.get_event_cached"]
    assert checks and all(parent(c, index).kind is SpanKind.PRODUCER for c in checks)

    # Nothing of the plan leaked into another trace.
    elsewhere = [
        s
        for s in spans.all()
        if s.context.trace_id != trace_id and s.name.startswith(("publish", "process"))
    ]
    assert elsewhere == []


async def test_tracing_off_emits_no_spans_and_leaves_envelopes_as_before(provider):
    _, exporter = provider  # a provider exists, but the SDK was never told to use it
    stepper, planner = agents()
    async with PlatformHarness() as platform:
        await platform.start(stepper, planner)
        answer = await platform.call("triple.goal", {"n": 1}, response_event="triple.answered")
        events = platform.events()
    assert exporter.get_finished_spans() == ()
    assert answer.data["status"] == "completed"
    assert all(e.traceparent is None and e.tracestate is None for e in events)
    goal = next(e for e in events if e.type == "triple.goal")
    assert goal.trace_id == goal.id  # a root event names the chain, as before
    assert {e.trace_id for e in events} == {goal.id}


async def test_a_failing_handler_marks_its_process_span_failed(spans):
    agent = Agent(
        name="breaker",
        options=AgentOptions(max_deliveries=1),
    )

    @agent.on_event("order.placed", topic="business-facts")
    async def breaks(event: Any, context: Any) -> None:
        raise RuntimeError("no way")

    async with PlatformHarness() as platform:
        await platform.start(agent)
        await platform.publish("business-facts", "order.placed", {})
        for _ in range(200):
            if spans.named("process order.placed"):
                break
            await asyncio.sleep(0.01)
    (run,) = spans.named("process order.placed")
    assert run.status.status_code is StatusCode.ERROR
    assert run.attributes["error.type"] == "RuntimeError"
    assert [e.name for e in run.events] == ["exception"]
