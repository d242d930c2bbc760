"""Liveness: agents expire after ttl_seconds without a heartbeat; the purge sweeps them."""

from __future__ import annotations

import httpx
import pytest
from registry_payloads import agent, capability, order_validator
from registry_support import FakeClock, wait_until

from registry_service import SqlRegistryStore
from soorma_common.errors import AgentNotFound
from soorma_common.registry import AgentDefinition

pytestmark = pytest.mark.asyncio


async def test_an_agent_vanishes_after_its_ttl_and_must_re_register(
    client: httpx.AsyncClient,
) -> None:
    assert (await client.post("/v1/agents", json=order_validator("steady"))).status_code == 201
    r = await client.post("/v1/agents", json=order_validator("short-lived", ttl_seconds=1))
    assert r.json()["ttl_seconds"] == 1

    async def gone() -> bool:
        r = await client.get("/v1/agents/short-lived")
        return r.status_code == 404

    await wait_until(gone, "the ttl=1 agent expires")
    assert [a["agent_id"] for a in (await client.get("/v1/agents")).json()] == ["steady"]
    found = await client.get("/v1/agents/discover", params={"requirements": "validate_order"})
    assert [a["agent_id"] for a in found.json()] == ["steady"]
    assert (await client.get("/v1/agents/short-lived/card")).status_code == 404

    # A heartbeat cannot bring it back: 404 tells the SDK to register again.
    r = await client.put("/v1/agents/short-lived/heartbeat")
    assert r.status_code == 404
    assert r.json()["error"]["code"] == "agent_not_found"
    assert "register" in r.json()["error"]["message"]

    # Until the purge runs, the expired agent is still visible on request.
    r = await client.get("/v1/agents/short-lived", params={"include_expired": "true"})
    assert r.status_code == 200
    listed = await client.get("/v1/agents", params={"include_expired": "true"})
    assert [a["agent_id"] for a in listed.json()] == ["short-lived", "steady"]

    r = await client.post("/v1/agents", json=order_validator("short-lived"))
    assert r.status_code == 200
    assert (await client.get("/v1/agents/short-lived")).status_code == 200


async def test_the_purge_task_deletes_expired_agents_and_their_events(make_client) -> None:
    async with make_client(registry_purge_interval_seconds=0.1) as client:
        await client.post(
            "/v1/agents",
            json=agent(
                "ephemeral",
                ttl_seconds=1,
                capabilities=[capability("t", "ephemeral.in", ["ephemeral.out"])],
            ),
        )

        async def swept() -> bool:
            events = (await client.get("/v1/events")).json()
            agents = (await client.get("/v1/agents", params={"include_expired": "true"})).json()
            return events == [] and agents == []

        await wait_until(swept, "the purge removes the expired agent and its events")


def _agent(agent_id: str, ttl: int, events: list[str] | None = None) -> AgentDefinition:
    body = agent(
        agent_id,
        ttl_seconds=ttl,
        capabilities=[capability("t", e) for e in (events or [])][:1],
        events_consumed=(events or [])[1:],
    )
    return AgentDefinition.model_validate(body)


async def test_heartbeat_extends_the_lease_by_ttl(
    store: SqlRegistryStore, clock: FakeClock
) -> None:
    registered, created = await store.upsert_agent("t1", _agent("a", ttl=10))
    assert created
    clock.advance(8)
    beat = await store.heartbeat("t1", "a")
    assert beat.last_heartbeat is not None and registered.last_heartbeat is not None
    assert (beat.last_heartbeat - registered.last_heartbeat).total_seconds() == pytest.approx(8)

    clock.advance(7)  # 15 s after registration: alive only thanks to the heartbeat
    assert (await store.get_agent("t1", "a")).agent_id == "a"
    assert [x.agent_id for x in await store.list_agents("t1")] == ["a"]

    clock.advance(3.5)  # 10.5 s after the heartbeat
    with pytest.raises(AgentNotFound):
        await store.get_agent("t1", "a")
    assert await store.list_agents("t1") == []
    assert await store.discover("t1", []) == []
    with pytest.raises(AgentNotFound):
        await store.heartbeat("t1", "a")


async def test_purge_sweeps_only_expired_agents_of_every_tenant(
    store: SqlRegistryStore, clock: FakeClock
) -> None:
    await store.upsert_agent("t1", _agent("old", ttl=5))
    await store.upsert_agent("t2", _agent("old", ttl=5))
    await store.upsert_agent("t1", _agent("young", ttl=50))
    clock.advance(6)
    assert await store.purge_expired() == 2
    assert await store.purge_expired() == 0
    remaining = await store.list_agents("t1", include_expired=True)
    assert [a.agent_id for a in remaining] == ["young"]
    assert await store.list_agents("t2", include_expired=True) == []


async def test_purge_hands_events_to_a_live_declarer_or_deletes_them(
    store: SqlRegistryStore, clock: FakeClock
) -> None:
    await store.upsert_agent("t1", _agent("owner", ttl=5, events=["shared.in", "solo.in"]))
    await store.upsert_agent("t1", _agent("peer", ttl=100, events=["shared.in"]))
    owners = {e.event_name: e.owner_agent_id for e in await store.list_events("t1")}
    assert owners == {"shared.in": "owner"}  # plain names (solo.in) create no definitions

    clock.advance(6)
    assert await store.purge_expired() == 1
    owners = {e.event_name: e.owner_agent_id for e in await store.list_events("t1")}
    assert owners == {"shared.in": "peer"}


async def test_an_expired_owner_loses_its_event_to_the_next_registrant(
    store: SqlRegistryStore, clock: FakeClock
) -> None:
    await store.upsert_agent("t1", _agent("first", ttl=5, events=["x.in"]))
    clock.advance(6)  # expired, not yet purged
    await store.upsert_agent("t1", _agent("second", ttl=5, events=["x.in"]))
    assert (await store.get_event("t1", "x.in")).owner_agent_id == "second"
