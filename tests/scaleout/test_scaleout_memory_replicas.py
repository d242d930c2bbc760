"""The memory service's 100-concurrent fan-in with results spread over two replicas.

Two memory-service apps, each under its own uvicorn with its own connection pool, on
one PostgreSQL database; a round-robin balancer sends every other result to the other
replica. The scenario is tests/memory_service's, reused: all 100 results kept, versions
1..N+1 handed out exactly once across both replicas, the last writer sees all results.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from balancer import balanced_client

from memory_service import create_app
from testsupport.server import serve
from testsupport.services import memory_settings

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "memory_service"))

from test_memory_fan_in import N, _fan_in

pytestmark = [pytest.mark.asyncio, pytest.mark.postgres]


async def test_fan_in_over_two_replicas_on_one_postgres_keeps_every_result(
    postgres_url: str, tmp_path: Any
) -> None:
    settings = memory_settings(postgres_url, tmp_path)
    async with serve(create_app(settings)) as one, serve(create_app(settings)) as two:
        limits = httpx.Limits(max_connections=N, max_keepalive_connections=N)
        client, balancer = balanced_client([one.url, two.url], limits=limits, timeout=60)
        async with client:
            await _fan_in(client)
        # Both replicas took a real share of the racing writes.
        assert balancer.sent[0] >= N // 2 and balancer.sent[1] >= N // 2, balancer.sent
