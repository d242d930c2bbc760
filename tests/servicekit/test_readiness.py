"""Ready means ready: /health and /ready answer 200 only while the backends answer, and a
backend lost is logged once, and its return once."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from asgi_lifespan import LifespanManager
from fastapi import FastAPI

from servicekit import ServiceSettings, create_service_app

pytestmark = pytest.mark.asyncio


class Backend:
    def __init__(self) -> None:
        self.up = True

    async def ping(self) -> None:
        if not self.up:
            raise ConnectionError("connection refused")


def _app(backend: Backend, interval: float) -> Any:
    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[dict[str, Any]]:
        yield {"ready_checks": {"database": backend.ping}}

    settings = ServiceSettings(backend_check_seconds=interval)
    return create_service_app(name="test-svc", settings=settings, lifespan=lifespan)


@pytest.mark.parametrize("path", ["/health", "/ready"])
async def test_health_and_ready_fail_naming_the_backend_while_it_does_not_answer(
    path: str,
) -> None:
    backend = Backend()
    app = _app(backend, 0)
    async with LifespanManager(app) as manager:
        transport = httpx.ASGITransport(manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            assert (await client.get(path)).status_code == 200
            backend.up = False
            down = await client.get(path)
            assert down.status_code == 503
            assert down.json()["checks"] == {"database": "error: connection refused"}
            backend.up = True
            assert (await client.get(path)).status_code == 200


async def test_a_lost_backend_is_logged_once_and_its_return_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    backend = Backend()
    caplog.set_level(logging.INFO, logger="servicekit.readiness")

    def said(text: str) -> list[str]:
        return [r.getMessage() for r in caplog.records if text in r.getMessage()]

    async def several_rounds() -> None:
        await asyncio.sleep(0.2)  # ten rounds of the watch

    async with LifespanManager(_app(backend, 0.02)):
        await several_rounds()
        backend.up = False
        await several_rounds()
        backend.up = True
        await several_rounds()
    assert said("does not answer") == [
        "test-svc: backend database does not answer: connection refused"
    ]
    assert said("answers again") == ["test-svc: backend database answers again"]
