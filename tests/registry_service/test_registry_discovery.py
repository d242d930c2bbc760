"""Discovery by capability or consumed event, with and without schemas."""

from __future__ import annotations

import httpx
import pytest
from registry_payloads import ORDER_SCHEMA, RESULT_SCHEMA, agent, capability, order_validator

pytestmark = pytest.mark.asyncio


@pytest.fixture
def _agents() -> list[dict[str, object]]:
    return [
        order_validator("validator-1"),
        agent(
            "stock",
            "stock-keeper",
            capabilities=[
                capability("check_stock", "stock.check", ["stock.checked"]),
                capability("reserve", "stock.reserve"),
            ],
        ),
        agent("listener", events_consumed=["order.validate"]),
    ]


async def _register(client: httpx.AsyncClient, agents: list[dict[str, object]]) -> None:
    for body in agents:
        assert (await client.post("/v1/agents", json=body)).status_code == 201


async def test_discovery_returns_agents_with_their_event_schemas(
    client: httpx.AsyncClient, _agents: list[dict[str, object]]
) -> None:
    await _register(client, _agents)
    r = await client.get("/v1/agents/discover", params={"requirements": "validate_order"})
    assert r.status_code == 200
    found = r.json()
    assert [a["agent_id"] for a in found] == ["validator-1"]
    only = found[0]
    assert set(only) == {"agent_id", "name", "description", "version", "capabilities"}
    assert only["version"] == "2.1.0"
    cap = only["capabilities"][0]
    assert cap["task_name"] == "validate_order"
    assert cap["consumed_event"]["payload_schema"] == ORDER_SCHEMA
    assert cap["produced_events"][0]["payload_schema"] == RESULT_SCHEMA


async def test_discovery_without_events_strips_schemas_but_keeps_names(
    client: httpx.AsyncClient, _agents: list[dict[str, object]]
) -> None:
    await _register(client, _agents)
    r = await client.get(
        "/v1/agents/discover",
        params={"requirements": "validate_order", "include_events": "false"},
    )
    cap = r.json()[0]["capabilities"][0]
    assert cap["consumed_event"]["event_name"] == "order.validate"
    assert cap["consumed_event"]["payload_schema"] is None
    assert cap["produced_events"][0]["event_name"] == "order.validated"
    assert cap["produced_events"][0]["payload_schema"] is None
    # Stripping is a view: the stored definition keeps its schema.
    stored = (await client.get("/v1/agents/validator-1")).json()
    assert stored["capabilities"][0]["consumed_event"]["payload_schema"] == ORDER_SCHEMA


async def test_a_consumed_event_name_is_a_requirement_too(
    client: httpx.AsyncClient, _agents: list[dict[str, object]]
) -> None:
    await _register(client, _agents)
    r = await client.get("/v1/agents/discover", params={"requirements": "order.validate"})
    # The capability's consumed event and a plain consumed name both match.
    assert [a["agent_id"] for a in r.json()] == ["listener", "validator-1"]
    r = await client.get("/v1/agents/discover", params={"requirements": "order.validated"})
    assert r.json() == []  # a produced event is not something the agent can be asked to do


async def test_several_requirements_match_any_by_default_or_all_on_request(
    client: httpx.AsyncClient, _agents: list[dict[str, object]]
) -> None:
    await _register(client, _agents)

    async def ids(**params: str) -> list[str]:
        r = await client.get("/v1/agents/discover", params=params)
        assert r.status_code == 200
        return [a["agent_id"] for a in r.json()]

    assert await ids(requirements="validate_order, check_stock") == ["validator-1", "stock"]
    assert await ids(requirements="check_stock,reserve", match="all") == ["stock"]
    assert await ids(requirements="check_stock,validate_order", match="all") == []
    assert await ids(requirements="unknown_skill") == []
    # No requirements: every live agent.
    assert sorted(await ids()) == ["listener", "stock", "validator-1"]


async def test_discovery_rejects_an_unknown_match_mode(client: httpx.AsyncClient) -> None:
    r = await client.get("/v1/agents/discover", params={"requirements": "x", "match": "most"})
    assert r.status_code == 422
    assert r.json()["error"]["details"][0]["field"] == "match"


async def test_discovered_agent_helpers_find_the_schemas(
    client: httpx.AsyncClient, _agents: list[dict[str, object]]
) -> None:
    from soorma_common.registry import DiscoveredAgent

    await _register(client, _agents)
    r = await client.get("/v1/agents/discover", params={"requirements": "validate_order"})
    found = DiscoveredAgent.model_validate(r.json()[0])
    consumed = found.get_consumed_event_schema("validate_order")
    produced = found.get_produced_event_schema("validate_order")
    assert consumed is not None and consumed.payload_schema == ORDER_SCHEMA
    assert produced is not None and produced.event_name == "order.validated"
