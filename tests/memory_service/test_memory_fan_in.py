"""Fan-in under real concurrency: 100 sub-task results for one parallel group."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from memory_bodies import sub_task, task_body

from soorma.client import verified_tls
from testsupport.server import serve

pytestmark = pytest.mark.asyncio

BASE = "/v1/memory/task-context"
N = 100


async def _fan_in(client: httpx.AsyncClient) -> None:
    subs = {f"s{i}": sub_task(f"s{i}", group="g1") for i in range(N)}
    created = await client.post(BASE, json=task_body("t1", sub_tasks=subs))
    assert created.status_code == 200, created.text

    async def report(i: int) -> httpx.Response:
        return await client.post(f"{BASE}/t1/sub-tasks/s{i}/result", json={"result": {"index": i}})

    responses = await asyncio.gather(*(report(i) for i in range(N)))
    assert [r.status_code for r in responses] == [200] * N, responses[0].text

    # Results were serialized: every response carries its own version, and the last
    # one to commit saw all N results.
    versions = sorted(r.json()["version"] for r in responses)
    assert versions == list(range(2, N + 2))
    last = max(responses, key=lambda r: r.json()["version"]).json()
    assert all(s["status"] == "completed" for s in last["sub_tasks"].values())

    final = (await client.get(f"{BASE}/t1")).json()
    assert final["version"] == N + 1
    assert len(final["sub_tasks"]) == N
    assert {k: s["result"] for k, s in final["sub_tasks"].items()} == {
        f"s{i}": {"index": i} for i in range(N)
    }
    assert all(s["parallel_group_id"] == "g1" for s in final["sub_tasks"].values())


async def test_fan_in_keeps_all_results_under_concurrency(client: httpx.AsyncClient) -> None:
    await _fan_in(client)


async def test_fan_in_keeps_all_results_through_a_real_server(
    make_settings: object,
) -> None:
    """Same race through uvicorn and real sockets (many pooled DB connections)."""
    from memory_service import create_app

    app = create_app(make_settings())  # type: ignore[operator]
    async with serve(app) as srv:
        limits = httpx.Limits(max_connections=N, max_keepalive_connections=N)
        async with httpx.AsyncClient(
            verify=verified_tls(), base_url=srv.url, limits=limits, timeout=60
        ) as client:
            await _fan_in(client)


async def test_results_survive_concurrent_whole_record_saves(client: httpx.AsyncClient) -> None:
    """Workers re-saving their stale (all-pending) copy while results land lose none."""
    n = 20
    stale = task_body("t1", sub_tasks={f"s{i}": sub_task(f"s{i}", group="g") for i in range(n)})
    await client.post(BASE, json=stale)
    results = [
        client.post(f"{BASE}/t1/sub-tasks/s{i}/result", json={"result": {"i": i}}) for i in range(n)
    ]
    saves = [client.post(BASE, json={**stale, "state": {"save": k}}) for k in range(10)]
    responses = await asyncio.gather(*results, *saves)
    assert all(r.status_code == 200 for r in responses)
    final = (await client.get(f"{BASE}/t1")).json()
    assert final["version"] == 1 + n + 10
    assert {k: s["result"] for k, s in final["sub_tasks"].items()} == {
        f"s{i}": {"i": i} for i in range(n)
    }
