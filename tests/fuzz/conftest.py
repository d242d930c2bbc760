"""Fuzz fixtures: each service once per test module and backend, served in a thread.

One server per module keeps hundreds of generated requests cheap; the Postgres and Redis
variants get their own database (a PostgreSQL schema: ``testsupport.postgres``) / key
prefix per module, removed afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fuzz_support import ThreadedServer, serve_in_thread

from testsupport.pgvector import pgvector_database
from testsupport.postgres import create_schema, drop_schema
from testsupport.services import event_settings, memory_settings, registry_settings

RUN = uuid.uuid4().hex[:8]


def _postgres_schema(database_url: str) -> Iterator[str]:
    role, url = asyncio.run(create_schema(database_url))
    try:
        yield url
    finally:
        asyncio.run(drop_schema(database_url, role))


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def sql_url(request: pytest.FixtureRequest, tmp_path_factory: Any) -> Iterator[str]:
    """A fresh database for one test module: SQLite always, PostgreSQL when configured."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('fuzzdb')}/fuzz.db"
        return
    yield from _postgres_schema(request.getfixturevalue("postgres_test_database"))


@pytest.fixture(scope="module")
def memory_server(
    request: pytest.FixtureRequest, sql_url: str, tmp_path_factory: Any
) -> Iterator[ThreadedServer]:
    from memory_service import create_app

    with contextlib.ExitStack() as stack:
        url = sql_url
        if not sql_url.startswith("sqlite"):
            # Long-term memory needs pgvector, which the CI PostgreSQL lacks (its routes
            # would answer 503 there): the PostgreSQL variant runs on the pgvector server.
            url = stack.enter_context(
                pgvector_database(request.getfixturevalue("pgvector_server_url"))
            )
        settings = memory_settings(url, tmp_path_factory.mktemp("mem"))
        server = stack.enter_context(serve_in_thread(create_app(settings)))
        yield server


@pytest.fixture(scope="module")
def registry_server(sql_url: str, tmp_path_factory: Any) -> Iterator[ThreadedServer]:
    from registry_service import create_app

    settings = registry_settings(sql_url, tmp_path_factory.mktemp("reg"))
    with serve_in_thread(create_app(settings)) as server:
        yield server


@pytest.fixture(scope="module", params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def event_backend(request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    """Event-service settings for one module: in-process log, or Redis under a fresh prefix."""
    base: dict[str, Any] = {
        "event_backend": request.param,
        "block_seconds": 0.5,
        "claim_interval_seconds": 0.05,
    }
    if request.param == "memory":
        yield base
        return
    url = request.getfixturevalue("redis_base_url")
    prefix = f"soorma-fuzz-{RUN}-{uuid.uuid4().hex[:8]}"
    yield {**base, "redis_url": url, "redis_prefix": prefix}
    import redis

    client = redis.Redis.from_url(url)
    try:
        keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


@pytest.fixture(scope="module")
def event_server(event_backend: dict[str, Any]) -> Iterator[ThreadedServer]:
    from event_service import create_app

    settings = event_settings(**event_backend)
    with serve_in_thread(create_app(settings)) as server:
        yield server


@pytest.fixture(scope="module")
def tracker_server(tmp_path_factory: Any) -> Iterator[ThreadedServer]:
    from event_service import create_app as create_event_app
    from registry_service import create_app as create_registry_app
    from tracker_service import create_app
    from tracker_service.settings import Settings

    # GET /v1/tracker/agents reads a registry and an event service: it gets real ones.
    tmp = tmp_path_factory.mktemp("tracker-deps")
    registry = registry_settings(f"sqlite+aiosqlite:///{tmp}/registry.db", tmp)
    with (
        serve_in_thread(create_registry_app(registry)) as registry_server,
        serve_in_thread(create_event_app(event_settings())) as events,
    ):
        settings = Settings(registry_url=registry_server.url, event_service_url=events.url)
        with serve_in_thread(create_app(settings)) as server:
            yield server


@pytest.fixture(scope="module")
def gateway_server() -> Iterator[ThreadedServer]:
    from gateway_a2a import create_app
    from gateway_a2a.settings import Settings

    with serve_in_thread(create_app(Settings())) as server:
        yield server
