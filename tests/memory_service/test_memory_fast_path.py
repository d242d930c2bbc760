"""The plan-context fast path answers exactly like the FastAPI routes it stands in for.

Every request is sent twice, to an app with the fast path and to one without it, on the
same database as two tenants (so each has its own copy of the records); status, ETag and
body must agree (timestamps aside).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import httpx
import pytest
from memory_bodies import plan_body
from prometheus_client.parser import text_string_to_metric_families
from starlette.types import ASGIApp, Receive, Scope, Send

from memory_service import create_app
from memory_service.fastpath import PlanContextFastPath
from memory_service.settings import Settings
from testsupport.services import in_process

pytestmark = pytest.mark.asyncio

# (client of the fast-path app, client of the routed app, requests the fast path handed over)
Clients = tuple[httpx.AsyncClient, httpx.AsyncClient, list[str]]


class _CountingFastPath(PlanContextFastPath):
    """The fast path, noting each request it hands to FastAPI."""

    def __init__(self, *, settings: Settings) -> None:
        super().__init__(settings=settings)
        self.handed_over: list[str] = []

    async def __call__(
        self, scope: Scope, receive: Receive, send: Send, *, fallback: ASGIApp
    ) -> None:
        async def counted(scope: Scope, receive: Receive, send: Send) -> None:
            self.handed_over.append(f"{scope['method']} {scope['path']}")
            await fallback(scope, receive, send)

        await super().__call__(scope, receive, send, fallback=counted)


@asynccontextmanager
async def _fast_and_routed(make_settings: Callable[..., Settings]) -> AsyncIterator[Clients]:
    async with AsyncExitStack() as stack:
        clients = []
        for fast_path, tenant in ((True, "fast"), (False, "routed")):
            settings = make_settings(max_payload_bytes=4096)
            if fast_path:
                spy = _CountingFastPath(settings=settings)
                app = create_app(settings, fast_path=spy)
            else:  # the switch off: FastAPI's routes
                app = create_app(
                    settings.model_copy(
                        update={"plan_context_fast_path": False, "semantic_search_fast_path": False}
                    )
                )
                assert app.fast_path is None  # the switches alone turn them off
            clients.append(
                await stack.enter_async_context(
                    in_process(app, base_url="http://memory", headers={"X-Tenant-ID": tenant})
                )
            )
        yield clients[0], clients[1], spy.handed_over


def _request_counts(text: str) -> dict[tuple[str, str, str], float]:
    return {
        (s.labels["method"], s.labels["route"], s.labels["status"]): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "soorma_http_request_duration_seconds_count"
    }


def _comparable(response: httpx.Response) -> tuple[int, str | None, Any]:
    body = response.json() if response.content else None
    if isinstance(body, dict):
        body = {k: v for k, v in body.items() if k not in ("created_at", "updated_at")}
    return response.status_code, response.headers.get("etag"), body


async def _same(pair: Clients, method: str, path: str, **kwargs: Any) -> httpx.Response:
    answers = [await client.request(method, path, **kwargs) for client in pair[:2]]
    assert _comparable(answers[0]) == _comparable(answers[1]), (method, path, kwargs)
    return answers[0]


async def test_hot_routes_answer_like_the_routes(make_settings: Callable[..., Settings]) -> None:
    async with _fast_and_routed(make_settings) as pair:
        for client in pair[:2]:
            r = await client.post(
                "/v1/memory/plan-context", json=plan_body("p1", correlation_ids=["c1", "c2", "c1"])
            )
            assert r.status_code == 200
        got = await _same(pair, "GET", "/v1/memory/plan-context/p1")
        assert got.json()["correlation_ids"] == ["c1", "c2"]
        assert got.headers["etag"] == '"1"' and got.headers["x-request-id"]
        assert (await _same(pair, "GET", "/v1/memory/plan-context/by-correlation/c2")).json()[
            "plan_id"
        ] == "p1"
        await _same(pair, "GET", "/v1/memory/plan-context/by-correlation/p1")
        put = await _same(
            pair,
            "PUT",
            "/v1/memory/plan-context/p1",
            headers={"If-Match": '"1"'},
            json=plan_body("p1", status="paused", correlation_ids=["c3", "c2"]),
        )
        assert (put.json()["version"], put.json()["correlation_ids"]) == (2, ["c3", "c2"])
        # The side table follows the write: dropped ids stop matching, new ones match.
        await _same(pair, "GET", "/v1/memory/plan-context/by-correlation/c1")
        assert (await _same(pair, "GET", "/v1/memory/plan-context/by-correlation/c3")).json()[
            "version"
        ] == 2
        # camelCase input, no plan_id in the body, version in the body.
        await _same(
            pair,
            "PUT",
            "/v1/memory/plan-context/p1",
            json={"goalEvent": "g", "expectedVersion": 2, "correlationIds": []},
        )
        assert (
            await _same(pair, "GET", "/v1/memory/plan-context/by-correlation/c2")
        ).status_code == 404
        assert pair[2] == []  # every one of these was answered by the fast path
        # Both count them under the same route templates and statuses.
        counted = [_request_counts((await c.get("/metrics")).text) for c in pair[:2]]
        assert counted[0] == counted[1]
        assert counted[0][("GET", "/v1/memory/plan-context/{plan_id}", "200")] == 1


async def test_errors_come_out_as_the_routes_give_them(
    make_settings: Callable[..., Settings],
) -> None:
    async with _fast_and_routed(make_settings) as pair:
        for client in pair[:2]:
            await client.post("/v1/memory/plan-context", json=plan_body("p1"))
        put = "/v1/memory/plan-context/p1"
        cases: list[tuple[str, str, dict[str, Any]]] = [
            ("GET", "/v1/memory/plan-context/missing", {}),
            ("GET", "/v1/memory/plan-context/by-correlation/missing", {}),
            ("GET", "/v1/memory/plan-context/" + "x" * 257, {}),
            ("GET", "/v1/memory/plan-context/bad%00id", {}),
            ("GET", put, {"headers": {"X-Tenant-ID": "no spaces"}}),
            ("PUT", put, {"headers": {"If-Match": '"7"'}, "json": plan_body("p1")}),
            ("PUT", "/v1/memory/plan-context/missing", {"json": plan_body("missing")}),
            ("PUT", put, {"headers": {"If-Match": "soon"}, "json": plan_body("p1")}),
            (
                "PUT",
                put,
                {"headers": {"If-Match": "1"}, "json": plan_body("p1", expected_version=2)},
            ),
            ("PUT", put, {"json": plan_body("other")}),
            ("PUT", put, {"json": plan_body("p1", status="sleeping")}),
            ("PUT", put, {"json": plan_body("p1", correlation_ids=["x" * 257])}),
            ("PUT", put, {"json": plan_body("p1", state={"n": 2**70})}),
            ("PUT", put, {"json": plan_body("p1", session_id="a\x00b")}),
            (
                "PUT",
                put,
                {
                    "content": b'{"plan_id": "p1", "state": {"x": NaN}}',
                    "headers": {"Content-Type": "application/json"},
                },
            ),
            (
                "PUT",
                put,
                {"content": b'{"plan_id": ', "headers": {"Content-Type": "application/json"}},
            ),
            ("PUT", put, {"content": b"plan_id=p1", "headers": {"Content-Type": "text/plain"}}),
            ("PUT", put, {"json": plan_body("p1", state={"big": "x" * 5000})}),
            ("PUT", put, {"json": [1, 2]}),
        ]
        for method, path, kwargs in cases:
            r = await _same(pair, method, path, **kwargs)
            assert r.status_code in (404, 409, 413, 422), (path, kwargs, r.text)
            assert r.json()["error"]["code"]
        # Malformed requests went to the routes; store errors (404/409) did not need to.
        assert "GET /v1/memory/plan-context/missing" not in pair[2]
        assert len(pair[2]) == 9  # bad ids, tenant, If-Match; unparsable or invalid bodies
        # None of the rejected writes changed the plan.
        assert (await pair[0].get(put)).json()["version"] == 1
