"""Fixtures for ChoreographyPlanner tests: real event, memory and registry services.

All three run under uvicorn; the LLM is the only thing not real: a litellm custom
provider (``scripted/...`` models) answers from a queue, through litellm's normal
completion path.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio
from choreo_helpers import ScriptedLLM, Stack

from event_service import create_app as create_event_app
from memory_service import create_app as create_memory_app
from registry_service import create_app as create_registry_app
from soorma import PlatformContext
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


@pytest_asyncio.fixture
async def stack(backends: dict[str, Any]) -> AsyncIterator[Stack]:
    async with (
        serve(create_event_app(backends["event"])) as events,
        serve(create_memory_app(backends["memory"])) as memory,
        serve(create_registry_app(backends["registry"])) as registry,
    ):
        yield Stack(event_url=events.url, memory_url=memory.url, registry_url=registry.url)


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
