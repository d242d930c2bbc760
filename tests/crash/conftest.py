"""Crash tests: real event (Redis), memory (PostgreSQL) and registry services under
uvicorn in the test's loop; the agents under test run as their own processes and are
killed with SIGKILL."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio

import memory_service
import registry_service
from event_service import create_app as create_event_app
from soorma import PlatformContext, PlatformSettings
from testsupport.server import serve
from testsupport.services import memory_settings, redis_event_settings, registry_settings

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sdk"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from memory_outage import Memory, outage_stack


@pytest_asyncio.fixture
async def services(
    redis_url: str, redis_prefix: str, postgres_url: str, tmp_path: Any
) -> AsyncIterator[dict[str, str]]:
    """URLs of the three services, as the environment of an agent process."""
    async with (
        serve(create_event_app(redis_event_settings(redis_url, redis_prefix))) as events,
        serve(memory_service.create_app(memory_settings(postgres_url, tmp_path))) as memory,
        serve(
            registry_service.create_app(
                registry_settings(f"sqlite+aiosqlite:///{tmp_path}/registry.db", tmp_path)
            )
        ) as registry,
    ):
        yield {
            "SOORMA_EVENT_SERVICE_URL": events.url,
            "SOORMA_MEMORY_URL": memory.url,
            "SOORMA_REGISTRY_URL": registry.url,
        }


@pytest_asyncio.fixture
async def context(services: dict[str, str]) -> AsyncIterator[PlatformContext]:
    settings = PlatformSettings(
        event_service_url=services["SOORMA_EVENT_SERVICE_URL"],
        memory_url=services["SOORMA_MEMORY_URL"],
        registry_url=services["SOORMA_REGISTRY_URL"],
    )
    async with PlatformContext.from_env(settings=settings) as ctx:
        yield ctx


@pytest_asyncio.fixture
async def stack(
    redis_url: str, redis_prefix: str, postgres_url: str, tmp_path: Any
) -> AsyncIterator[tuple[Memory, PlatformContext]]:
    """The memory-outage platform: the memory service behind a relay that a test
    switches off and on (see memory_outage.py)."""
    async with outage_stack(redis_url, redis_prefix, postgres_url, tmp_path) as stack:
        yield stack
