"""Fixtures for SDK tests: the real event service under uvicorn, on both backends."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from sdk_helpers import make_context

from event_service import create_app
from event_service.settings import Settings
from soorma import PlatformContext
from testsupport.server import LiveServer, serve


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def event_settings(request: pytest.FixtureRequest) -> Settings:
    """Event-service settings for the memory backend, and for Redis when configured."""
    common = {"claim_interval_seconds": 0.05, "block_seconds": 0.5, "max_payload_bytes": 4096}
    if request.param == "memory":
        return Settings(event_backend="memory", **common)
    return Settings(
        event_backend="redis",
        redis_url=request.getfixturevalue("redis_url"),
        redis_prefix=request.getfixturevalue("redis_prefix"),
        **common,
    )


@pytest_asyncio.fixture
async def event_service(event_settings: Settings) -> AsyncIterator[LiveServer]:
    async with serve(create_app(event_settings)) as server:
        yield server


@pytest_asyncio.fixture
async def context(event_service: LiveServer) -> AsyncIterator[PlatformContext]:
    async with make_context(event_service.url) as ctx:
        yield ctx
