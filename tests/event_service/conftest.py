"""Fixtures: the event service on each backend, served by real uvicorn."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import pytest_asyncio

from event_service import create_app
from event_service.settings import Settings
from testsupport.server import LiveServer, serve


def make_settings(backend: str, request: pytest.FixtureRequest, **overrides: Any) -> Settings:
    base: dict[str, Any] = {
        "event_backend": backend,
        "auth_mode": "dev",
        "block_seconds": 0.5,
        "claim_interval_seconds": 0.05,
        "max_payload_bytes": 256 * 1024,
    }
    if backend == "redis":
        base["redis_url"] = request.getfixturevalue("redis_url")
        base["redis_prefix"] = request.getfixturevalue("redis_prefix")
    return Settings(**{**base, **overrides})


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def settings(request: pytest.FixtureRequest) -> Settings:
    return make_settings(request.param, request)


@dataclass
class Service:
    server: LiveServer
    client: httpx.AsyncClient
    settings: Settings

    async def publish(
        self, topic: str, type_: str, data: dict[str, Any] | None = None, *,
        tenant: str | None = None, **fields: Any,
    ) -> dict[str, Any]:
        event = {"topic": topic, "type": type_, "data": data or {}, **fields}
        r = await self.client.post(
            "/v1/events/publish", json={"event": event}, headers=_tenant(tenant)
        )
        assert r.status_code == 200, r.text
        return r.json()

    async def publish_batch(
        self, events: list[dict[str, Any]], *, tenant: str | None = None
    ) -> list[dict[str, Any]]:
        r = await self.client.post(
            "/v1/events/publish-batch", json={"events": events}, headers=_tenant(tenant)
        )
        assert r.status_code == 200, r.text
        return r.json()["results"]

    async def ack(self, group: str, ids: list[str], *, tenant: str | None = None) -> int:
        r = await self.client.post(
            "/v1/events/ack", json={"group": group, "ids": ids}, headers=_tenant(tenant)
        )
        assert r.status_code == 200, r.text
        return int(r.json()["count"])

    async def nack(
        self, group: str, ids: list[str], reason: str, *, tenant: str | None = None
    ) -> int:
        r = await self.client.post(
            "/v1/events/nack", json={"group": group, "ids": ids, "reason": reason},
            headers=_tenant(tenant),
        )
        assert r.status_code == 200, r.text
        return int(r.json()["count"])


def _tenant(tenant: str | None) -> dict[str, str]:
    return {"X-Tenant-ID": tenant} if tenant else {}


@pytest_asyncio.fixture
async def service(settings: Settings) -> AsyncIterator[Service]:
    async with serve(create_app(settings)) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=15) as client:
            yield Service(server, client, settings)
