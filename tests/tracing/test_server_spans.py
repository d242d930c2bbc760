"""servicekit's TracingMiddleware: a SERVER span per request, parented by the traceparent."""

from __future__ import annotations

import httpx
import pytest
from fastapi import APIRouter
from opentelemetry.trace import SpanKind, StatusCode

from servicekit import ServiceSettings, create_service_app
from servicekit.tracing import TracingMiddleware
from soorma_common import tracing as otel

pytestmark = pytest.mark.asyncio

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"


def probe_app():
    router = APIRouter()

    @router.get("/v1/things/{thing_id}")
    async def thing(thing_id: str) -> dict[str, str]:
        return {"id": thing_id}

    @router.get("/v1/broken")
    async def broken() -> dict[str, str]:
        raise RuntimeError("boom")

    return create_service_app(name="probe-service", settings=ServiceSettings(), routers=[router])


def client(app) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    return httpx.AsyncClient(transport=transport, base_url="http://probe")


async def test_a_request_with_a_traceparent_is_served_inside_the_callers_trace(spans):
    app = probe_app()
    # Outermost: the span covers the whole stack, request ids and fast paths included.
    assert app.middleware_order[0].cls is TracingMiddleware
    async with client(app) as http:
        response = await http.get(
            "/v1/things/42",
            headers={"traceparent": f"00-{TRACE}-{PARENT}-01", "tracestate": "k=v"},
        )
    assert response.status_code == 200
    (span,) = spans.all()
    assert span.kind is SpanKind.SERVER
    assert span.name == "GET /v1/things/{thing_id}"
    assert f"{span.context.trace_id:032x}" == TRACE
    assert span.parent is not None and f"{span.parent.span_id:016x}" == PARENT
    assert span.context.trace_state.get("k") == "v"
    assert span.attributes["http.route"] == "/v1/things/{thing_id}"
    assert span.attributes["url.path"] == "/v1/things/42"
    assert span.attributes["http.response.status_code"] == 200
    assert span.attributes["soorma.service"] == "probe-service"


async def test_without_a_traceparent_a_request_starts_its_own_trace(spans):
    app = probe_app()
    with otel.tracer().start_as_current_span("caller, not propagated"):
        async with client(app) as http:
            await http.get("/v1/things/1")
    (server,) = [s for s in spans.all() if s.kind is SpanKind.SERVER]
    # Only the header counts, never whatever span happens to be current in process.
    assert server.parent is None


async def test_a_server_error_marks_the_span_failed(spans):
    async with client(probe_app()) as http:
        response = await http.get("/v1/broken")
    assert response.status_code == 500
    (span,) = spans.all()
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["http.response.status_code"] == 500


async def test_with_tracing_off_the_middleware_is_not_in_the_stack(provider):
    app = probe_app()
    assert TracingMiddleware not in [m.cls for m in app.middleware_order]
    async with client(app) as http:
        assert (await http.get("/v1/things/1")).status_code == 200
    assert provider[1].get_finished_spans() == ()
