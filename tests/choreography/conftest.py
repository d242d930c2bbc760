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
from event_service.settings import Settings as EventSettings
from memory_service import create_app as create_memory_app
from memory_service.settings import Settings as MemorySettings
from registry_service import create_app as create_registry_app
from registry_service.settings import Settings as RegistrySettings
from soorma import PlatformContext
from testsupport.server import serve


@pytest.fixture(
    params=["embedded", pytest.param("redis+postgres", marks=[pytest.mark.redis,
                                                               pytest.mark.postgres])]
)
def backends(request: pytest.FixtureRequest, tmp_path: Any) -> dict[str, Any]:
    """Settings for the three services: embedded backends, or Redis + PostgreSQL."""
    fast = {"claim_interval_seconds": 0.05, "block_seconds": 0.5}
    if request.param == "embedded":
        return {
            "event": EventSettings(event_backend="memory", **fast),
            "memory": MemorySettings(
                memory_database_url=request.getfixturevalue("sqlite_url"), data_dir=tmp_path,
            ),
            "registry": RegistrySettings(
                registry_database_url=f"sqlite+aiosqlite:///{tmp_path}/registry.db",
                data_dir=tmp_path,
            ),
        }
    pg = request.getfixturevalue("postgres_url")
    return {
        "event": EventSettings(
            event_backend="redis", redis_url=request.getfixturevalue("redis_url"),
            redis_prefix=request.getfixturevalue("redis_prefix"), **fast,
        ),
        # Memory and registry share one fresh database (their tables do not overlap).
        "memory": MemorySettings(memory_database_url=pg, data_dir=tmp_path),
        "registry": RegistrySettings(registry_database_url=pg, data_dir=tmp_path),
    }


@pytest_asyncio.fixture
async def stack(backends: dict[str, Any]) -> AsyncIterator[Stack]:
    async with serve(create_event_app(backends["event"])) as events, \
            serve(create_memory_app(backends["memory"])) as memory, \
            serve(create_registry_app(backends["registry"])) as registry:
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
