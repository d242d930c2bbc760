"""Fixtures for ChoreographyPlanner tests: real event, memory and registry services.

All three run under uvicorn; the LLM is the only thing not real: a litellm custom
provider (``scripted/...`` models) answers from a queue, through litellm's normal
completion path.
"""

from __future__ import annotations

import contextlib
import dataclasses
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio
from choreo_helpers import ScriptedLLM, Stack

from event_service import create_app as create_event_app
from memory_service import create_app as create_memory_app
from registry_service import create_app as create_registry_app
from soorma import PlatformContext
from testsupport.databases import fresh_postgres, redis_key_space
from testsupport.server import serve
from testsupport.services import (
    event_settings,
    memory_settings,
    redis_event_settings,
    registry_settings,
)


@pytest.fixture(
    params=[
        "embedded",
        pytest.param("redis+postgres", marks=[pytest.mark.redis, pytest.mark.postgres]),
    ]
)
def backends(request: pytest.FixtureRequest, tmp_path: Any) -> dict[str, Any]:
    """Settings for the three services: embedded backends, or Redis + PostgreSQL."""
    if request.param == "embedded":
        return {
            "event": event_settings(block_seconds=0.5),
            "memory": memory_settings(request.getfixturevalue("sqlite_url"), tmp_path),
            "registry": registry_settings(f"sqlite+aiosqlite:///{tmp_path}/registry.db", tmp_path),
        }
    pg = request.getfixturevalue("postgres_url")
    return {
        "event": redis_event_settings(
            request.getfixturevalue("redis_url"), request.getfixturevalue("redis_prefix")
        ),
        # Memory and registry share one fresh database (their tables do not overlap).
        "memory": memory_settings(pg, tmp_path),
        "registry": registry_settings(pg, tmp_path),
    }


@contextlib.asynccontextmanager
async def _serve_stack(backends: dict[str, Any]) -> AsyncIterator[Stack]:
    async with (
        serve(create_event_app(backends["event"])) as events,
        serve(create_memory_app(backends["memory"])) as memory,
        serve(create_registry_app(backends["registry"])) as registry,
    ):
        yield Stack(event_url=events.url, memory_url=memory.url, registry_url=registry.url)


@pytest_asyncio.fixture
async def stack(backends: dict[str, Any]) -> AsyncIterator[Stack]:
    async with _serve_stack(backends) as served:
        yield served


@pytest_asyncio.fixture(
    scope="module",
    loop_scope="module",
    params=[
        "embedded",
        pytest.param("redis+postgres", marks=[pytest.mark.redis, pytest.mark.postgres]),
    ],
)
async def shared_stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Stack]:
    """The three services started once for the module, on either backend (see
    ``tenant_stack``)."""
    data_dir = tmp_path_factory.mktemp("choreo")
    if request.param == "embedded":
        backends = {
            "event": event_settings(block_seconds=0.5),
            "memory": memory_settings(f"sqlite+aiosqlite:///{data_dir}/test.db", data_dir),
            "registry": registry_settings(f"sqlite+aiosqlite:///{data_dir}/registry.db", data_dir),
        }
        async with _serve_stack(backends) as served:
            yield served
        return
    redis_url = request.getfixturevalue("redis_base_url")
    async with (
        redis_key_space(redis_url) as prefix,
        fresh_postgres(request.getfixturevalue("postgres_server_url")) as pg,
    ):
        backends = {
            "event": redis_event_settings(redis_url, prefix),
            "memory": memory_settings(pg, data_dir),
            "registry": registry_settings(pg, data_dir),
        }
        async with _serve_stack(backends) as served:
            yield served


@pytest_asyncio.fixture(loop_scope="module")
async def tenant_stack(shared_stack: Stack) -> Stack:
    """The module's services, for this test as a tenant of its own: the registry, plans,
    streams and consumer groups it sees are its own. A module using it overrides
    ``stack`` and ``context`` with it and runs its tests in the module's event loop."""
    return dataclasses.replace(shared_stack, tenant=f"choreo-{uuid.uuid4().hex[:12]}")


@pytest_asyncio.fixture
async def context(stack: Stack) -> AsyncIterator[PlatformContext]:
    async with PlatformContext.from_env(settings=stack.settings()) as ctx:
        yield ctx


@pytest.fixture
def llm() -> Iterator[ScriptedLLM]:
    """The scripted model: ``llm.answers.append(json)``; model id ``scripted/planner``."""
    scripted = ScriptedLLM()
    with scripted.installed():
        yield scripted
