"""The event service under test: settings per backend and a small HTTP client for it.

Imported by conftest.py and by the test modules (a uniquely named module: importing
``conftest`` by name picks whichever test folder's conftest was imported first).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from event_service.settings import Settings
from testsupport.server import LiveServer


def make_settings(backend: str, request: pytest.FixtureRequest, **overrides: Any) -> Settings:
    """Fast test settings for ``backend`` ("memory" or "redis": a fresh key prefix)."""
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


@dataclass
class Service:
    """A running event service and an HTTP client for it; helpers assert success.

    ``server`` is ``None`` for a service run in process (no port)."""

    server: LiveServer | None
    client: httpx.AsyncClient
    settings: Settings

    async def publish(
        self,
        topic: str,
        type_: str,
        data: dict[str, Any] | None = None,
        *,
        tenant: str | None = None,
        **fields: Any,
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
            "/v1/events/nack",
            json={"group": group, "ids": ids, "reason": reason},
            headers=_tenant(tenant),
        )
        assert r.status_code == 200, r.text
        return int(r.json()["count"])


def _tenant(tenant: str | None) -> dict[str, str]:
    return {"X-Tenant-ID": tenant} if tenant else {}
