"""The registry client's schema cache: per tenant, expires, dropped on (re-)registration."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from soorma.client import Identity, verified_tls
from soorma.registry import RegistryClient
from soorma_common.registry import EventDefinition
from testsupport.server import LiveServer

pytestmark = pytest.mark.asyncio


async def test_cached_definition_expires_and_absence_is_cached_too(registry: LiveServer) -> None:
    async with httpx.AsyncClient(
        verify=verified_tls(),
    ) as http:
        writer = RegistryClient(base_url=registry.url, http=http, identity=Identity("t1"))
        reader = RegistryClient(
            base_url=registry.url, http=http, identity=Identity("t1"), schema_cache_seconds=0.3
        )
        other_tenant = RegistryClient(
            base_url=registry.url, http=http, identity=Identity("t2"), schema_cache_seconds=0.3
        )
        assert reader.schema_cache_seconds == 0.3
        assert await reader.get_event_cached("cache.probe") is None  # absence is cached
        await writer.register_event(
            EventDefinition(event_name="cache.probe", payload_schema={"type": "object"})
        )
        assert await reader.get_event_cached("cache.probe") is None  # still the cached miss
        assert await other_tenant.get_event_cached("cache.probe") is None  # not its tenant's
        await asyncio.sleep(0.35)
        found = await reader.get_event_cached("cache.probe")
        assert found is not None and found.payload_schema == {"type": "object"}
        # Registering through the same client drops its cached entry at once.
        await reader.register_event(
            EventDefinition(event_name="cache.probe", payload_schema={"type": "string"})
        )
        found = await reader.get_event_cached("cache.probe")
        assert found is not None and found.payload_schema == {"type": "string"}
