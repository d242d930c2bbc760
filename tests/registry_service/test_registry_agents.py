"""Agent registration, lookup, filters and deregistration (run on SQLite and PostgreSQL)."""

from __future__ import annotations

import httpx
import pytest
from registry_payloads import agent, capability, order_validator

pytestmark = pytest.mark.asyncio


async def test_registering_a_new_agent_returns_201_with_the_stored_definition(
    client: httpx.AsyncClient,
) -> None:
    r = await client.post("/v1/agents", json=order_validator())
    assert r.status_code == 201
    body = r.json()
    assert body["agent_id"] == "validator-1"
    assert body["version"] == "2.1.0"
    assert body["tenant_id"] == "default"
    assert body["ttl_seconds"] == 90
    assert body["last_heartbeat"]
    cap = body["capabilities"][0]
    assert cap["consumed_event"]["owner_agent_id"] == "validator-1"
    assert cap["produced_events"][0]["owner_agent_id"] == "validator-1"
    # Capability events show up in the flat name lists as well.
    assert body["events_consumed"] == ["order.validate"]
    assert body["events_produced"] == ["order.validated"]

    r = await client.get("/v1/agents/validator-1")
    assert r.status_code == 200
    assert r.json() == body


async def test_re_registering_an_agent_replaces_it_and_returns_200(
    client: httpx.AsyncClient,
) -> None:
    await client.post("/v1/agents", json=order_validator())
    changed = agent(
        "validator-1",
        "order-validator-v3",
        capabilities=[capability("check_stock", "stock.check")],
    )
    r = await client.post("/v1/agents", json=changed)
    assert r.status_code == 200
    assert r.json()["name"] == "order-validator-v3"

    agents = (await client.get("/v1/agents")).json()
    assert [a["name"] for a in agents] == ["order-validator-v3"]
    # The old capability no longer matches; the new one does.
    assert (await client.get("/v1/agents", params={"capability": "validate_order"})).json() == []
    found = (await client.get("/v1/agents", params={"capability": "check_stock"})).json()
    assert [a["agent_id"] for a in found] == ["validator-1"]


async def test_registration_accepts_camel_case_and_tenant_in_body_is_ignored(
    client: httpx.AsyncClient,
) -> None:
    r = await client.post(
        "/v1/agents",
        json={
            "agentId": "camel",
            "name": "camel",
            "ttlSeconds": 30,
            "tenantId": "someone-else",
            "eventsConsumed": ["a.b"],
        },
    )
    assert r.status_code == 201
    body = r.json()
    assert body["agent_id"] == "camel"
    assert body["ttl_seconds"] == 30
    assert body["tenant_id"] == "default"  # from the caller's identity, never the body


async def test_simple_level_agents_register_plain_event_names_without_definitions(
    client: httpx.AsyncClient,
) -> None:
    r = await client.post(
        "/v1/agents",
        json=agent("simple", events_consumed=["order.placed"], events_produced=["order.ack"]),
    )
    assert r.status_code == 201
    assert r.json()["capabilities"] == []
    by_consumed = await client.get("/v1/agents", params={"consumed_event": "order.placed"})
    assert [a["agent_id"] for a in by_consumed.json()] == ["simple"]
    by_produced = await client.get("/v1/agents", params={"produced_event": "order.ack"})
    assert [a["agent_id"] for a in by_produced.json()] == ["simple"]
    # Plain names carry no topic or schema, so they do not become event definitions.
    assert (await client.get("/v1/events")).json() == []


async def test_list_filters_each_narrow_the_result_and_combine(
    client: httpx.AsyncClient,
) -> None:
    await client.post(
        "/v1/agents",
        json=agent(
            "a1", "billing", capabilities=[capability("charge", "card.charge", ["card.charged"])]
        ),
    )
    await client.post(
        "/v1/agents",
        json=agent(
            "a2", "billing", capabilities=[capability("refund", "card.refund", ["card.refunded"])]
        ),
    )
    await client.post(
        "/v1/agents",
        json=agent(
            "a3", "shipping", capabilities=[capability("ship", "parcel.ship", ["card.charged"])]
        ),
    )

    async def ids(**params: str) -> list[str]:
        r = await client.get("/v1/agents", params=params)
        assert r.status_code == 200
        return [a["agent_id"] for a in r.json()]

    assert await ids() == ["a1", "a2", "a3"]
    assert await ids(name="billing") == ["a1", "a2"]
    assert await ids(name="nobody") == []
    assert await ids(consumed_event="card.refund") == ["a2"]
    assert await ids(produced_event="card.charged") == ["a1", "a3"]
    assert await ids(capability="ship") == ["a3"]
    assert await ids(name="billing", produced_event="card.charged") == ["a1"]
    assert await ids(name="shipping", capability="charge") == []
    # A consumed name is not a produced one.
    assert await ids(produced_event="card.refund") == []


async def test_deregistering_removes_the_agent(client: httpx.AsyncClient) -> None:
    await client.post("/v1/agents", json=order_validator())
    r = await client.delete("/v1/agents/validator-1")
    assert r.status_code == 204
    r = await client.get("/v1/agents/validator-1", params={"include_expired": "true"})
    assert r.status_code == 404
    assert (await client.get("/v1/agents", params={"include_expired": "true"})).json() == []
    r = await client.delete("/v1/agents/validator-1")
    assert r.status_code == 404


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/agents/ghost"),
        ("PUT", "/v1/agents/ghost/heartbeat"),
        ("DELETE", "/v1/agents/ghost"),
        ("GET", "/v1/agents/ghost/card"),
    ],
)
async def test_unknown_agents_are_404_in_the_common_error_shape(
    client: httpx.AsyncClient, method: str, path: str
) -> None:
    r = await client.request(method, path)
    assert r.status_code == 404
    error = r.json()["error"]
    assert error["code"] == "agent_not_found"
    assert "ghost" in error["message"]
    assert error["details"] == {"agent_id": "ghost"}


async def test_malformed_registration_is_422_naming_the_field(
    client: httpx.AsyncClient,
) -> None:
    r = await client.post("/v1/agents", json={"agent_id": "x"})
    assert r.status_code == 422
    error = r.json()["error"]
    assert error["code"] == "validation_error"
    assert "name" in error["message"]

    r = await client.post("/v1/agents", json=agent("x", ttl_seconds=0))
    assert r.status_code == 422
    assert "ttl_seconds" in r.json()["error"]["message"]

    r = await client.post(
        "/v1/agents",
        json=agent("x", capabilities=[capability("same", "e.one"), capability("same", "e.two")]),
    )
    assert r.status_code == 422
    assert "'same'" in r.json()["error"]["message"]

    r = await client.post(
        "/v1/agents",
        json=agent("x", capabilities=[capability("bad", "e.one", topic="Not A Topic")]),
    )
    assert r.status_code == 422
    assert r.json()["error"]["code"] == "invalid_topic"
    assert "e.one" in r.json()["error"]["message"]

    # Nothing half-registered remains after a rejected registration.
    assert (await client.get("/v1/agents")).json() == []


async def test_one_event_declared_twice_with_different_definitions_is_rejected(
    client: httpx.AsyncClient,
) -> None:
    body = agent(
        "x",
        capabilities=[
            capability("one", "e.in", ["e.out"]),
            {
                **capability("two", "e.in2"),
                "produced_events": [{"event_name": "e.out", "topic": "business-facts"}],
            },
        ],
    )
    r = await client.post("/v1/agents", json=body)
    assert r.status_code == 422
    assert "e.out" in r.json()["error"]["message"]


async def test_tenants_never_see_or_change_each_others_agents(
    client: httpx.AsyncClient,
) -> None:
    a = {"X-Tenant-ID": "tenant-a"}
    b = {"X-Tenant-ID": "tenant-b"}
    assert (await client.post("/v1/agents", json=order_validator(), headers=a)).status_code == 201

    assert (await client.get("/v1/agents", headers=b)).json() == []
    assert (await client.get("/v1/agents/validator-1", headers=b)).status_code == 404
    assert (await client.get("/v1/agents/validator-1/card", headers=b)).status_code == 404
    assert (await client.put("/v1/agents/validator-1/heartbeat", headers=b)).status_code == 404
    assert (await client.delete("/v1/agents/validator-1", headers=b)).status_code == 404
    discovered = await client.get(
        "/v1/agents/discover", params={"requirements": "validate_order"}, headers=b
    )
    assert discovered.json() == []
    assert (await client.get("/v1/events", headers=b)).json() == []
    assert (await client.get("/v1/events/order.validate", headers=b)).status_code == 404

    # The same agent id in tenant B is a separate agent; A's is untouched.
    other = agent("validator-1", "b-agent")
    assert (await client.post("/v1/agents", json=other, headers=b)).status_code == 201
    assert (await client.get("/v1/agents/validator-1", headers=a)).json()["name"] == (
        "order-validator"
    )
    assert (await client.delete("/v1/agents/validator-1", headers=b)).status_code == 204
    assert (await client.get("/v1/agents/validator-1", headers=a)).status_code == 200
    assert (await client.get("/v1/events/order.validate", headers=a)).status_code == 200
