"""Concurrent registrations: no errors, no half-written agents, one consistent owner."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from registry_payloads import agent, capability

pytestmark = pytest.mark.asyncio


async def test_concurrent_re_registrations_of_one_agent_leave_one_consistent_definition(
    client: httpx.AsyncClient,
) -> None:
    versions = [
        agent("racer", capabilities=[capability(f"task_{i}", f"race.in.{i}")]) for i in range(8)
    ]
    responses = await asyncio.gather(*(client.post("/v1/agents", json=v) for v in versions))
    assert sorted(r.status_code for r in responses) == [200] * 7 + [201]

    final = (await client.get("/v1/agents/racer")).json()
    (task,) = [c["task_name"] for c in final["capabilities"]]
    # The capability index agrees with the stored definition: only the winner's task matches.
    for i in range(8):
        found = (await client.get("/v1/agents", params={"capability": f"task_{i}"})).json()
        assert [a["agent_id"] for a in found] == (["racer"] if task == f"task_{i}" else [])


async def test_concurrent_agents_declaring_the_same_events_agree_on_one_owner(
    client: httpx.AsyncClient,
) -> None:
    def declarer(i: int) -> dict[str, object]:
        names = ["shared.a", "shared.b"] if i % 2 else ["shared.b", "shared.a"]
        return agent(
            f"peer-{i}",
            capabilities=[capability("first", names[0]), capability("second", names[1])],
        )

    responses = await asyncio.gather(
        *(client.post("/v1/agents", json=declarer(i)) for i in range(8))
    )
    assert [r.status_code for r in responses] == [201] * 8
    events = (await client.get("/v1/events")).json()
    assert [e["event_name"] for e in events] == ["shared.a", "shared.b"]
    assert all(e["owner_agent_id"].startswith("peer-") for e in events)

    # Remove every agent concurrently: the events go with the last of them.
    deleted = await asyncio.gather(*(client.delete(f"/v1/agents/peer-{i}") for i in range(8)))
    assert [r.status_code for r in deleted] == [204] * 8
    assert (await client.get("/v1/events")).json() == []
