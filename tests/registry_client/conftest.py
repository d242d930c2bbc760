"""Registry-client fixtures: the real registry service (SQLite, and PostgreSQL when
configured) and the event service, both under uvicorn."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio

import event_service
import registry_service
from soorma import PlatformContext, PlatformSettings
from testsupport.server import LiveServer, serve
from testsupport.services import db_url, event_settings, registry_settings

__all__ = ["db_url"]  # the fixture, imported so pytest finds it here


@pytest_asyncio.fixture
async def registry(db_url: str, tmp_path: Any) -> AsyncIterator[LiveServer]:
    settings = registry_settings(db_url, tmp_path)
    async with serve(registry_service.create_app(settings)) as server:
        yield server


@pytest_asyncio.fixture
async def events() -> AsyncIterator[LiveServer]:
    async with serve(event_service.create_app(event_settings())) as server:
        yield server


@pytest_asyncio.fixture
async def context(registry: LiveServer, events: LiveServer) -> AsyncIterator[PlatformContext]:
    settings = PlatformSettings(event_service_url=events.url, registry_url=registry.url)
    async with PlatformContext.from_env(settings=settings) as ctx:
        yield ctx
