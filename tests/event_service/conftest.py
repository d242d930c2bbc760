"""Fixtures: the event service on each backend, served by real uvicorn."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
import pytest_asyncio
from event_stack import Service, make_settings

from event_service import create_app
from event_service.settings import Settings
from soorma.client import verified_tls
from testsupport.server import serve


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def settings(request: pytest.FixtureRequest) -> Settings:
    return make_settings(request.param, request)


@pytest_asyncio.fixture
async def service(settings: Settings) -> AsyncIterator[Service]:
    async with serve(create_app(settings)) as server:
        async with httpx.AsyncClient(
            verify=verified_tls(), base_url=server.url, timeout=15
        ) as client:
            yield Service(server, client, settings)
