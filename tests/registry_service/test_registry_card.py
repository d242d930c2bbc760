"""The A2A Agent Card the registry builds for each agent."""

from __future__ import annotations

import httpx
import pytest
from registry_payloads import ORDER_SCHEMA, RESULT_SCHEMA, agent, capability, order_validator

from servicekit.auth import issue_token
from soorma_common.a2a import A2AAgentCard

pytestmark = pytest.mark.asyncio


async def test_agent_card_maps_capabilities_to_skills_with_schemas(
    client: httpx.AsyncClient,
) -> None:
    await client.post("/v1/agents", json=order_validator(), headers={"X-Tenant-ID": "acme"})
    r = await client.get("/v1/agents/validator-1/card", headers={"X-Tenant-ID": "acme"})
    assert r.status_code == 200
    card = r.json()
    A2AAgentCard.model_validate(card)  # the legacy gateway shape
    assert card["name"] == "order-validator"
    assert card["description"] == "validator-1 agent"
    assert card["version"] == "2.1.0"
    assert card["url"] == "http://localhost:8085/agents/validator-1"
    assert card["provider"] == {"organization": "acme"}
    assert card["authentication"] == {"schemes": ["none"]}
    assert card["skills"] == [
        {
            "id": "validate_order",
            "name": "validate_order",
            "description": "Checks an order",
            "tags": ["order.validate", "action-requests"],
            "inputSchema": ORDER_SCHEMA,
            "outputSchema": RESULT_SCHEMA,
        }
    ]


async def test_agent_card_without_capabilities_has_no_skills(client: httpx.AsyncClient) -> None:
    await client.post("/v1/agents", json=agent("plain", events_consumed=["a.b"]))
    card = (await client.get("/v1/agents/plain/card")).json()
    assert card["skills"] == []


async def test_agent_card_falls_back_to_the_response_schema_for_output(
    client: httpx.AsyncClient,
) -> None:
    await client.post(
        "/v1/agents",
        json=agent(
            "tool", capabilities=[capability("sum", "calc.sum", response_schema={"type": "number"})]
        ),
    )
    skill = (await client.get("/v1/agents/tool/card")).json()["skills"][0]
    assert "inputSchema" not in skill  # no payload schema declared
    assert skill["outputSchema"] == {"type": "number"}


async def test_agent_card_points_at_the_configured_gateway_and_bearer_auth(
    make_client, db_url: str
) -> None:
    secret = "registry-test-secret-0123456789abcdef"
    async with make_client(
        auth_mode="jwt", jwt_secret=secret, a2a_gateway_url="https://a2a.example.com/"
    ) as client:
        from registry_service import Settings

        token = issue_token(Settings(jwt_secret=secret), tenant_id="acme", user_id="u")
        auth = {"Authorization": f"Bearer {token}"}
        assert (await client.post("/v1/agents", json=order_validator())).status_code == 401
        assert (
            await client.post("/v1/agents", json=order_validator(), headers=auth)
        ).status_code == 201
        card = (await client.get("/v1/agents/validator-1/card", headers=auth)).json()
        assert card["url"] == "https://a2a.example.com/agents/validator-1"
        assert card["authentication"] == {"schemes": ["oauth2"]}
        assert card["provider"] == {"organization": "acme"}
