"""One consumer id, one stream, across event-service processes sharing one Redis.

A restarted agent reconnects with its stable consumer id to another event-service
process behind the load balancer while its old stream still looks alive on the first
(half-open TCP after the agent was SIGKILLed). The old stream must end, stop taking
deliveries, and hand what it took to the new stream, well inside the visibility
timeout (60 s here: every wait below is far shorter, so only the takeover explains a
delivery). Once on one Redis, once on a Redis Cluster (the session record shares the
tenant's hash tag, so the handover script and the record live on the tenant's shard).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from event_sse_client import SSEStream

from testsupport import forkserver
from testsupport.server import free_port

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scaleout"))
from redis_cluster import redis_cluster

from soorma.client import verified_tls

pytestmark = pytest.mark.asyncio

TOPIC = "action-requests"


@contextlib.asynccontextmanager
async def event_service_process(
    redis_url: str, redis_prefix: str, **settings: Any
) -> AsyncIterator[httpx.AsyncClient]:
    """An event service in its own process (uvicorn), and a client for it."""
    port = free_port()
    env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "SOORMA_EVENT_BACKEND": "redis",
        "SOORMA_REDIS_URL": redis_url,
        "SOORMA_REDIS_PREFIX": redis_prefix,
        "SOORMA_AUTH_MODE": "dev",
        "SOORMA_BLOCK_SECONDS": "0.5",
        **{f"SOORMA_{k.upper()}": str(v) for k, v in settings.items()},
    }
    proc = await forkserver.ForkedProcess.start(
        sys.executable,
        "-m",
        "uvicorn",
        "--factory",
        "event_service:create_app",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warning",
        env=env,
    )
    proc.keep_output()
    url = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(verify=verified_tls(), base_url=url, timeout=15) as client:
            async with asyncio.timeout(60):
                while True:
                    with contextlib.suppress(httpx.HTTPError):
                        if (await client.get("/health")).status_code == 200:
                            break
                    if proc.returncode is not None:
                        await proc.wait()
                        raise RuntimeError(f"event service exited:\n{proc.output}")
                    await asyncio.sleep(0.1)
            yield client
    finally:
        if proc.returncode is None:
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), 10)
            except TimeoutError:
                proc.kill()
                await proc.wait()


async def _publish(client: httpx.AsyncClient, tenant: str, n: int) -> None:
    event = {"topic": TOPIC, "type": "job", "data": {"n": n}}
    r = await client.post(
        "/v1/events/publish", json={"event": event}, headers={"X-Tenant-ID": tenant}
    )
    assert r.status_code == 200, r.text


@pytest.fixture(scope="module")
def cluster_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with redis_cluster(Path(tmp_path_factory.mktemp("redis-cluster"))) as url:
        yield url


@pytest.mark.redis
async def test_a_stream_reopened_on_another_process_takes_over_at_once(
    redis_url: str, redis_prefix: str
) -> None:
    await _takeover(redis_url, redis_prefix)


async def test_the_takeover_works_on_a_redis_cluster(cluster_url: str) -> None:
    await _takeover(cluster_url, f"super-{uuid.uuid4().hex[:8]}", redis_cluster="true")


async def _takeover(redis_url: str, redis_prefix: str, **settings: Any) -> None:
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    headers = {"X-Tenant-ID": tenant}
    group: dict[str, Any] = {
        "topics": TOPIC,
        "group": "workers",
        "consumer": "agent-x",
        "visibility_timeout": 60,
    }
    # Process A looks for a newer stream once a second (the default): events published
    # meanwhile are still taken by its old stream and must be handed over, not lost.
    fast = {"claim_interval_seconds": 0.05, "supersede_check_seconds": 1.0, **settings}
    async with (
        event_service_process(redis_url, redis_prefix, **fast) as a,
        event_service_process(redis_url, redis_prefix, **fast) as b,
        SSEStream(a, headers=headers, **group) as old,
    ):
        for n in range(2):
            await _publish(a, tenant, n)
        held = {f.json()["data"]["n"] for f in await old.messages(2)}
        assert held == {0, 1}
        # The agent is gone without a FIN (the old stream stays open on A, unacked);
        # it restarts and reconnects through the load balancer to process B.
        async with SSEStream(b, headers=headers, **group) as new:
            for n in range(2, 8):
                await _publish(b, tenant, n)
            # The old stream ends: it stops taking deliveries for agent-x. What it took
            # before ending is in its frames (to a client that is not reading).
            with pytest.raises(AssertionError, match="stream ended"):
                while True:
                    await old.next(within=10)
            # The new stream gets everything: what the old one held before it
            # reconnected, and what the old one took since, without waiting out the
            # visibility timeout.
            got: set[int] = set()
            while got != set(range(8)):
                frame = await new.next(within=10)
                got.add(frame.json()["data"]["n"])
            # Later events flow to the new stream only.
            await _publish(a, tenant, 8)
            assert (await new.next(within=10)).json()["data"] == {"n": 8}
