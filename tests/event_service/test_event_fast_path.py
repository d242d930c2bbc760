"""The publish fast path answers exactly like the FastAPI routes it stands in for.

Every request is sent twice, to an app with the fast path and to one without it (each on
its own log: its own Redis key prefix on Redis); status, body and headers must agree,
errors included. Ids the log assigns (stream ids, generated event ids) are compared by
shape, not value.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import httpx
import pytest
from event_stack import make_settings
from prometheus_client.parser import text_string_to_metric_families
from starlette.types import ASGIApp, Receive, Scope, Send

from event_service import create_app
from event_service.fastpath import PublishFastPath
from event_service.settings import Settings
from soorma_common.jsonvalue import MAX_JSON_DEPTH
from testsupport.services import in_process

pytestmark = pytest.mark.asyncio

PUBLISH = "/v1/events/publish"
BATCH = "/v1/events/publish-batch"
# Headers that differ per request or per server, not per answer.
_VARYING_HEADERS = {"x-request-id", "date", "server"}
_STREAM_ID = re.compile(r"^\d+-\d+$")


class _CountingFastPath(PublishFastPath):
    """The fast path, noting each request it answered."""

    def __init__(self, *, settings: Settings) -> None:
        super().__init__(settings=settings)
        self.answered: list[str] = []

    async def __call__(
        self, scope: Scope, receive: Receive, send: Send, *, fallback: ASGIApp
    ) -> None:
        self.answered.append(scope["path"])
        await super().__call__(scope, receive, send, fallback=fallback)


@asynccontextmanager
async def _fast_and_routed(
    settings: Settings,
) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient, list[str]]]:
    async with AsyncExitStack() as stack:
        clients = []
        spy = _CountingFastPath(settings=settings)
        for side in ("fast", "routed"):
            own = settings.model_copy(update={"redis_prefix": f"{settings.redis_prefix}-{side}"})
            if side == "fast":
                app = create_app(own, fast_path=spy)
            else:  # the switch off: FastAPI's routes
                app = create_app(own.model_copy(update={"publish_fast_path": False}))
                assert app.fast_path is None  # the switch alone turns it off
            clients.append(
                await stack.enter_async_context(in_process(app, base_url="http://events"))
            )
        yield clients[0], clients[1], spy.answered


def _masked(value: Any) -> Any:
    """The answer with log-assigned ids replaced by their shape."""
    if isinstance(value, dict):
        return {
            k: ("<stream-id>" if k == "stream_id" and _STREAM_ID.match(v) else _masked(v))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_masked(v) for v in value]
    return value


def _comparable(response: httpx.Response) -> tuple[int, dict[str, str], Any]:
    headers = {k: v for k, v in response.headers.items() if k not in _VARYING_HEADERS}
    return response.status_code, headers, _masked(response.json())


async def _same(pair: tuple[httpx.AsyncClient, httpx.AsyncClient, list[str]], path: str, **kw: Any):
    answers = [await client.post(path, **kw) for client in pair[:2]]
    assert _comparable(answers[0]) == _comparable(answers[1]), (path, kw)
    assert answers[0].headers["x-request-id"] and answers[1].headers["x-request-id"]
    return answers[0]


def _request_counts(text: str) -> dict[tuple[str, str, str], float]:
    return {
        (s.labels["method"], s.labels["route"], s.labels["status"]): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "soorma_http_request_duration_seconds_count"
    }


def _event(**fields: Any) -> dict[str, Any]:
    return {"topic": "business-facts", "type": "order.placed", "id": "e-1", **fields}


def _nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


async def test_publishes_answer_like_the_routes(settings: Settings) -> None:
    async with _fast_and_routed(settings) as pair:
        r = await _same(pair, PUBLISH, json={"event": _event(data={"n": 2**70, "t": "NaN"})})
        assert r.status_code == 200 and r.json()["event_id"] == "e-1"
        r = await _same(
            pair,
            BATCH,
            json={"events": [_event(id="e-2"), _event(id="e-3", topic="action-results")]},
        )
        assert [x["event_id"] for x in r.json()["results"]] == ["e-2", "e-3"]
        # camelCase in, identity from headers, a content type the route does not look at.
        await _same(
            pair,
            PUBLISH,
            content=b'{"event": {"topic": "business-facts", "type": "x", "id": "e-4",'
            b' "correlationId": "c-1"}}',
            headers={"Content-Type": "text/plain", "X-Tenant-ID": "acme", "X-User-ID": "u1"},
        )
        assert pair[2] == [PUBLISH, BATCH, PUBLISH]
        # Both count the requests under the same route templates and statuses.
        counted = [_request_counts((await c.get("/metrics")).text) for c in pair[:2]]
        assert counted[0] == counted[1]
        assert counted[0][("POST", PUBLISH, "200")] == 2


async def test_errors_come_out_as_the_routes_give_them(settings: Settings) -> None:
    big = settings.max_payload_bytes + 1
    cases: list[tuple[str, dict[str, Any]]] = [
        (PUBLISH, {"content": b"", "headers": {"Content-Type": "application/json"}}),
        (PUBLISH, {"content": b'{"event": ', "headers": {"Content-Type": "application/json"}}),
        (PUBLISH, {"json": [1, 2]}),
        (PUBLISH, {"json": {}}),
        (PUBLISH, {"json": {"event": {"type": "x"}}}),
        (PUBLISH, {"json": {"event": _event(topic="no such topic!")}}),
        (PUBLISH, {"json": {"event": _event(topic="")}}),
        (PUBLISH, {"json": {"event": _event(data=[1])}}),
        (
            PUBLISH,
            {
                "content": b'{"event": {"topic": "business-facts", "type": "x", "data": '
                b'{"x": NaN}}}',
                "headers": {"Content-Type": "application/json"},
            },
        ),
        (PUBLISH, {"json": {"event": _event(data={"deep": _nested(MAX_JSON_DEPTH + 2)})}}),
        (PUBLISH, {"json": {"event": _event(data={"pad": "x" * big})}}),
        (PUBLISH, {"json": {"event": _event()}, "headers": {"X-Tenant-ID": "no spaces"}}),
        (BATCH, {"json": {"events": "nope"}}),
        (BATCH, {"json": {"events": [_event(), {"topic": "business-facts"}]}}),
        (BATCH, {"json": {"events": [_event(), _event(data={"pad": "x" * big})]}}),
        # Over the request-size limit: the body-size middleware answers, for both.
        (BATCH, {"json": {"events": [_event(data={"pad": "x" * big})] * 5}}),
    ]
    async with _fast_and_routed(settings) as pair:
        for path, kw in cases:
            r = await _same(pair, path, **kw)
            assert r.status_code in (401, 413, 422), (path, r.text)
            assert r.json()["error"]["code"]
        assert len(pair[2]) == len(cases)


async def test_jwt_and_an_unreachable_log_answer_alike(request: pytest.FixtureRequest) -> None:
    jwt = make_settings(
        "memory", request, auth_mode="jwt", jwt_secret="event-service-test-secret-0123456789"
    )
    async with _fast_and_routed(jwt) as pair:
        r = await _same(pair, PUBLISH, json={"event": _event()})
        assert r.status_code == 401
        r = await _same(
            pair, PUBLISH, json={"event": _event()}, headers={"Authorization": "Bearer nope"}
        )
        assert r.status_code == 401
    # Nothing listens on port 1: both answer 503 in the common shape.
    down = make_settings(
        "memory", request, event_backend="redis", redis_url="redis://127.0.0.1:1/0"
    )
    async with _fast_and_routed(down) as pair:
        for path, body in ((PUBLISH, {"event": _event()}), (BATCH, {"events": [_event()]})):
            r = await _same(pair, path, json=body)
            assert r.status_code == 503 and r.json()["error"]["code"] == "service_unavailable"
