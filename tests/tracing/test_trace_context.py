"""W3C trace context on the envelope, its propagation, LLM spans and the OTEL_* switch."""

from __future__ import annotations

import os
import sys
import textwrap
from typing import Any

import httpx
import pytest
from opentelemetry.trace import SpanKind
from pydantic import ValidationError

from soorma import Tool
from soorma._propagation import handling
from soorma.ai import ChoreographyPlanner
from soorma.bus import BusClient
from soorma.client import verified_tls
from soorma.event import Event
from soorma.testing import PlatformHarness
from soorma_common import tracing as otel
from soorma_common.events import EventEnvelope, check_traceparent, trace_id_of
from soorma_common.registry import AgentCapability, EventDefinition
from testsupport import forkserver

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE}-{PARENT}-01"


def test_an_envelope_without_trace_context_still_reads_and_one_with_it_round_trips():
    legacy = EventEnvelope.model_validate_json(
        '{"id": "e1", "type": "order.placed", "topic": "business-facts", "trace_id": "e0"}'
    )
    assert (legacy.traceparent, legacy.tracestate, legacy.trace_id) == (None, None, "e0")
    # Tracing off, the wire form is what it was: no new keys.
    assert "traceparent" not in legacy.model_dump(mode="json", exclude_none=True)
    traced = EventEnvelope(
        type="order.placed", topic="business-facts", traceparent=TRACEPARENT, tracestate="k=v"
    )
    again = EventEnvelope.model_validate_json(traced.model_dump_json())
    assert (again.traceparent, again.tracestate) == (TRACEPARENT, "k=v")
    assert trace_id_of(again.traceparent) == TRACE


@pytest.mark.parametrize(
    "bad",
    [
        "not-a-traceparent",
        f"00-{TRACE.upper()}-{PARENT}-01",  # uppercase hex
        f"00-{'0' * 32}-{PARENT}-01",  # all-zero trace id
        f"00-{TRACE}-{'0' * 16}-01",  # all-zero parent id
        f"ff-{TRACE}-{PARENT}-01",  # forbidden version
        f"00-{TRACE}-{PARENT}-01-extra",  # version 00 has exactly four fields
    ],
)
def test_an_invalid_traceparent_is_refused_with_what_it_should_look_like(bad):
    with pytest.raises(ValidationError, match="not a W3C trace context"):
        EventEnvelope(type="x", topic="t", traceparent=bad)


def test_a_later_traceparent_version_may_carry_more_fields():
    assert check_traceparent(f"01-{TRACE}-{PARENT}-01-more") == f"01-{TRACE}-{PARENT}-01-more"


def test_tracestate_is_bounded():
    with pytest.raises(ValidationError):
        EventEnvelope(type="x", topic="t", traceparent=TRACEPARENT, tracestate="k=" + "v" * 600)


@pytest.mark.asyncio
async def test_an_untraced_handler_passes_the_trace_context_on_unchanged():
    async with httpx.AsyncClient(
        verify=verified_tls(),
    ) as http:
        bus = BusClient(base_url="http://127.0.0.1:9", http=http)
        handled = Event(
            type="a.requested", topic="action-requests", traceparent=TRACEPARENT, tracestate="k=v"
        )
        with handling(handled):
            child = bus.build_event("business-facts", "b.happened")
        root = bus.build_event("business-facts", "c.happened")
    assert (child.traceparent, child.tracestate) == (TRACEPARENT, "k=v")
    assert root.traceparent is None and root.trace_id == root.id


@pytest.mark.asyncio
async def test_the_event_service_refuses_a_malformed_traceparent_with_a_422():
    async with PlatformHarness() as platform:
        response = await platform.http.post(
            f"{platform.settings.event_service_url}/v1/events/publish",
            json={"event": {"type": "x.y", "topic": "business-facts", "traceparent": "nope"}},
        )
    assert response.status_code == 422
    assert "not a W3C trace context" in response.text


@pytest.mark.asyncio
async def test_a_legacy_event_starts_a_new_trace_in_a_traced_agent(spans):
    tool = Tool(name="echo")

    @tool.on_invoke("echo.requested")
    async def echo(request: Any, context: Any) -> dict[str, Any]:
        return {}

    legacy = {
        "id": "legacy-1",
        "type": "echo.requested",
        "topic": "action-requests",
        "correlation_id": "c-1",
        "response_event": "echo.completed",
        "trace_id": "legacy-1",
    }
    async with PlatformHarness() as platform:
        await platform.start(tool)
        # Sent as an older SDK would: an envelope with no trace context.
        response = await platform.http.post(
            f"{platform.settings.event_service_url}/v1/events/publish", json={"event": legacy}
        )
        assert response.status_code == 200, response.text
        answer = await platform.wait_for_event("echo.completed", correlation_id="c-1")
    (run,) = spans.named("process echo.requested")
    assert run.parent is None  # nothing to continue: a new trace starts here
    assert trace_id_of(answer.traceparent) == f"{run.context.trace_id:032x}"
    # The chain id is still the one the legacy request carried.
    assert answer.trace_id == "legacy-1"


SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def advisor_agents() -> tuple[Tool, ChoreographyPlanner]:
    weather = Tool(
        name="weather",
        capabilities=[
            AgentCapability(
                task_name="forecast",
                description="Tomorrow's weather in a city.",
                consumed_event=EventDefinition(
                    event_name="forecast.requested", payload_schema=SCHEMA
                ),
                produced_events=[EventDefinition(event_name="forecast.completed")],
            )
        ],
    )
    advisor = ChoreographyPlanner(name="advisor", reasoning_model="gpt-4o")

    @weather.on_invoke("forecast.requested")
    async def forecast(request: Any, context: Any) -> dict[str, str]:
        return {"sky": "rain"}

    @advisor.on_goal("advice.requested")
    async def on_goal(goal: Any, context: Any) -> None:
        await advisor.step(await advisor.open_plan(goal, context), context, trigger="new goal")

    @advisor.on_transition()
    async def on_transition(transition: Any, context: Any) -> None:
        await advisor.step(transition.plan, context, trigger=transition.event.type)

    return weather, advisor


SCRIPT = [
    {"action": "publish", "event_type": "forecast.requested", "data": {"city": "Oslo"}},
    {"action": "complete", "result": {"umbrella": True}},
]


@pytest.mark.asyncio
@pytest.mark.parametrize("record_prompts", [False, True])
async def test_llm_calls_are_spans_with_model_and_tokens_and_text_only_when_opted_in(
    spans, record_prompts
):
    otel.enable(spans.provider, record_prompts=record_prompts)
    weather, advisor = advisor_agents()
    async with PlatformHarness() as platform:
        llm = platform.script(advisor, SCRIPT)
        await platform.start(weather, advisor)
        answer = await platform.call(
            "advice.requested", {"city": "Oslo"}, response_event="advice.given"
        )
    assert answer.data["result"] == {"umbrella": True}
    chats = spans.named(f"chat {llm.model}")
    assert len(chats) == 2
    goal = spans.one("publish advice.requested")
    for chat in chats:
        assert chat.kind is SpanKind.CLIENT
        assert chat.context.trace_id == goal.context.trace_id  # inside the plan's trace
        assert chat.attributes["gen_ai.request.model"] == llm.model
        assert chat.attributes["gen_ai.usage.input_tokens"] == 0
        assert chat.attributes["gen_ai.usage.output_tokens"] == 0
        assert chat.attributes["soorma.llm.latency_ms"] >= 0
        assert ("gen_ai.input.messages" in chat.attributes) is record_prompts
        assert ("gen_ai.output.messages" in chat.attributes) is record_prompts
    if record_prompts:
        assert "Oslo" in chats[0].attributes["gen_ai.input.messages"]


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, []),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, ["otlp"]),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, ["otlp"]),
        ({"OTEL_TRACES_EXPORTER": "console,otlp"}, ["console", "otlp"]),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c"}, []),
        ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"}, []),
    ],
)
def test_the_otel_variables_decide_whether_traces_are_exported(env, expected):
    assert otel.exporter_names(env) == expected


def test_without_otel_variables_configure_leaves_tracing_off():
    otel.disable()
    try:
        assert otel.configure("quiet", environ={}) is False
        assert otel.ENABLED is False
    finally:
        otel.disable()


def test_otel_traces_exporter_turns_tracing_on_at_start(tmp_path):
    script = textwrap.dedent(
        """
        from soorma_common import tracing as otel
        from opentelemetry import trace
        assert otel.configure("probe") is True
        otel.tracer().start_span("hello").end()
        trace.get_tracer_provider().force_flush()
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update({"OTEL_TRACES_EXPORTER": "console", "OTEL_SERVICE_NAME": "probe-svc"})
    done = forkserver.run([sys.executable, "-c", script], env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert '"name": "hello"' in done.stdout
    assert '"service.name": "probe-svc"' in done.stdout


def test_an_application_tracer_provider_is_used_without_otel_variables():
    script = textwrap.dedent(
        """
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        from soorma_common import tracing as otel
        from soorma import _tracing
        from soorma.event import Event

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        assert otel.configure("app") is True
        with _tracing.handler_span(Event(type="a.b", topic="business-facts"), "agent"):
            trace.get_tracer("mine").start_span("my work").end()
        mine, run = exporter.get_finished_spans()
        assert (mine.name, run.name) == ("my work", "process a.b")
        assert mine.parent.span_id == run.context.span_id
        print("ok")
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = forkserver.run([sys.executable, "-c", script], env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
