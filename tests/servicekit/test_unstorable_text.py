"""NUL in a path, query or body is a 4xx naming where it was, on every service.

PostgreSQL text cannot hold NUL; before the shared guard (``servicekit.textguard``) the
tracker answered ``/v1/tracker/plans/a%00b`` and ``?goal_event=%00`` with a 500 on
PostgreSQL. Each service runs on SQLite and (when configured) PostgreSQL, and keeps
answering afterwards.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from fastapi import Request

from event_service import create_app as create_event_app
from memory_service import create_app as create_memory_app
from registry_service import create_app as create_registry_app
from testsupport.services import (
    db_url,
    event_settings,
    in_process,
    memory_settings,
    registry_settings,
)
from tracker_service import create_app as create_tracker_app
from tracker_service.settings import Settings as TrackerSettings

pytestmark = pytest.mark.asyncio

__all__ = ["db_url"]  # a fixture: pytest finds it by its name in this module

HEADERS = {"X-Tenant-ID": "tenant-a", "X-User-ID": "u"}

# (method, url, JSON body or None, the field the answer must name)
TRACKER = [
    ("GET", "/v1/tracker/plans/a%00b", None, "plan_id"),
    ("GET", "/v1/tracker/plans?goal_event=%00", None, "goal_event"),
    ("GET", "/v1/tracker/plans?status=running&correlation_id=c%00", None, "correlation_id"),
    ("GET", "/v1/tracker/plans/p%00/timeline", None, "plan_id"),
    ("GET", "/v1/tracker/plans/p%00/actions", None, "plan_id"),
]
MEMORY = [
    ("GET", "/v1/memory/plans/p%00", None, "plan_id"),
    ("GET", "/v1/memory/plans?session_id=%00", None, "session_id"),
    ("GET", "/v1/memory/plans?x%00=1", None, "x\\u0000"),
    ("POST", "/v1/memory/sessions", {"session_id": "s", "name": "n\x00"}, "name"),
]
REGISTRY = [
    ("GET", "/v1/agents/a%00", None, "agent_id"),
    ("GET", "/v1/events?topic=%00", None, "topic"),
    ("POST", "/v1/events", {"event_name": "e\x00", "topic": "t"}, "event_name"),
]
EVENTS = [
    ("GET", "/v1/events/dlq?topic=%00", None, "topic"),
]


def tracker_app(db_url: str, tmp_path: Any) -> Any:
    return create_tracker_app(
        TrackerSettings(
            tracker_database_url=db_url,
            data_dir=tmp_path,
            tracker_projector=False,
            tracker_timeouts=False,
        )
    )


async def assert_refused(client: httpx.AsyncClient, cases: list[tuple[str, str, Any, str]]):
    for method, url, body, field in cases:
        kwargs: dict[str, Any] = {"json": body} if body is not None else {}
        r = await client.request(method, url, headers=HEADERS, **kwargs)
        assert 400 <= r.status_code < 500, (url, r.status_code, r.text)
        error = r.json()["error"]
        assert "NUL" in error["message"] and field in f"{error['message']} {error['details']}", (
            url,
            error,
        )


async def test_the_tracker_refuses_nul_and_keeps_answering(db_url: str, tmp_path: Any):
    async with in_process(tracker_app(db_url, tmp_path)) as client:
        await assert_refused(client, TRACKER)
        assert (await client.get("/v1/tracker/plans", headers=HEADERS)).status_code == 200


async def test_the_memory_service_refuses_nul_and_keeps_answering(db_url: str, tmp_path: Any):
    async with in_process(create_memory_app(memory_settings(db_url, tmp_path))) as client:
        await assert_refused(client, MEMORY)
        assert (await client.get("/v1/memory/plans", headers=HEADERS)).status_code == 200


async def test_the_registry_refuses_nul_and_keeps_answering(db_url: str, tmp_path: Any):
    async with in_process(create_registry_app(registry_settings(db_url, tmp_path))) as client:
        await assert_refused(client, REGISTRY)
        assert (await client.get("/v1/agents", headers=HEADERS)).status_code == 200


async def test_the_event_service_refuses_nul_in_query_parameters():
    async with in_process(create_event_app(event_settings())) as client:
        await assert_refused(client, EVENTS)


async def test_text_the_database_refuses_is_a_422_not_a_500(db_url: str, tmp_path: Any):
    """The second wall: a route that forgot to validate still answers 422 on PostgreSQL."""
    app = tracker_app(db_url, tmp_path)

    @app.post("/probe")
    async def probe(request: Request) -> dict[str, str]:
        text = (await request.json())["text"]
        async with request.state.tracker.engine.connect() as conn:
            await conn.execute(sa.text("SELECT CAST(:v AS text)"), {"v": text})
        return {"stored": "yes"}

    async with in_process(app) as client:
        r = await client.post("/probe", json={"text": "a\x00b"}, headers=HEADERS)
        if db_url.startswith("postgresql"):
            assert r.status_code == 422, r.text
            assert "cannot store" in r.json()["error"]["message"]
        else:  # SQLite stores NUL
            assert r.status_code == 200, r.text
        ok = await client.post("/probe", json={"text": "fine"}, headers=HEADERS)
        assert ok.status_code == 200
