"""Agent cards: live skills from the registry, caching headers, legacy and per-agent cards."""

from __future__ import annotations

import httpx
import pytest
from a2a.types.a2a_pb2 import GetExtendedAgentCardRequest
from conftest import HEADERS_A, HEADERS_B, Platform
from gateway_helpers import a2a_client, capability, collect, final_task, send_request, user_message
from google.protobuf.json_format import MessageToDict

from soorma import Tool

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_card_lists_live_skills_with_interfaces_and_security(platform: Platform):
    async with httpx.AsyncClient(base_url=platform.url) as http:
        response = await http.get("/.well-known/agent-card.json")
        assert response.status_code == 200
        card = response.json()
        etag = response.headers["etag"]
        assert response.headers["cache-control"].startswith("public, max-age=")
        again = await http.get("/.well-known/agent-card.json", headers={"If-None-Match": etag})
        assert again.status_code == 304
    interfaces = {
        (i["protocolBinding"], i["protocolVersion"]): i["url"] for i in card["supportedInterfaces"]
    }
    assert interfaces[("JSONRPC", "1.0")] == f"{platform.url}/"
    assert interfaces[("HTTP+JSON", "1.0")] == platform.url
    assert ("JSONRPC", "0.3") in interfaces
    assert card["capabilities"]["streaming"] and card["capabilities"]["pushNotifications"]
    assert set(card["securitySchemes"]) == {"apiKey", "bearer"}
    assert card["securitySchemes"]["apiKey"]["apiKeySecurityScheme"]["name"] == "X-API-Key"
    assert {"apiKey": {}} in [r["schemes"] for r in card["securityRequirements"]]
    assert sorted(s["id"] for s in card["skills"]) == ["echo", "review"]
    schemas = card["capabilities"]["extensions"][0]["params"]
    assert schemas["echo"]["inputSchema"]["required"] == ["text"]
    assert schemas["review"]["event"] == "doc.review"


async def test_card_follows_agents_registering_and_leaving(platform: Platform):
    late = Tool(
        name="late-tool",
        context=await platform.context(),
        capabilities=[capability("shout", "shout.requested", {"type": "object"})],
    )

    @late.on_invoke("shout.requested")
    async def shout(request, ctx):
        return "HEY"

    async with httpx.AsyncClient(base_url=platform.url) as http:
        before = (await http.get("/.well-known/agent-card.json")).headers["etag"]
        await late.start()
        try:
            card = (await http.get("/.well-known/agent-card.json")).json()
            assert "shout" in [s["id"] for s in card["skills"]]
            changed = await http.get(
                "/.well-known/agent-card.json", headers={"If-None-Match": before}
            )
            assert changed.status_code == 200
        finally:
            await late.stop()
        card = (await http.get("/.well-known/agent-card.json")).json()
    assert "shout" not in [s["id"] for s in card["skills"]]


async def test_legacy_card_has_the_seed_shape(platform: Platform):
    async with httpx.AsyncClient(base_url=platform.url) as http:
        response = await http.get("/.well-known/agent.json")
    card = response.json()
    assert response.headers["etag"]
    assert card["url"] == platform.url
    assert set(card["authentication"]["schemes"]) == {"apiKey", "oauth2"}
    echo = next(s for s in card["skills"] if s["id"] == "echo")
    assert echo["inputSchema"]["required"] == ["text"]


async def test_per_agent_card_and_endpoint(platform: Platform):
    agent_url = f"{platform.url}/agents/echo-tool"
    async with httpx.AsyncClient() as http:
        card = (await http.get(f"{agent_url}/.well-known/agent-card.json")).json()
        missing = await http.get(f"{platform.url}/agents/nobody/.well-known/agent-card.json")
    assert missing.status_code == 404
    assert [s["id"] for s in card["skills"]] == ["echo"]
    assert {i["url"] for i in card["supportedInterfaces"]} == {agent_url, f"{agent_url}/"}
    for binding in ("JSONRPC", "HTTP+JSON"):
        async with a2a_client(agent_url, binding, streaming=False, headers=HEADERS_A) as c:
            # No skill named: the agent's only skill.
            task = final_task(await collect(c, send_request(user_message(data={"text": "a"}))))
        assert MessageToDict(task.artifacts[0].parts[0].data)["echo"] == "a"


async def test_extended_card_shows_the_callers_tenant(platform: Platform):
    async with a2a_client(platform.url, headers=HEADERS_A) as client:
        mine = await client.get_extended_agent_card(GetExtendedAgentCardRequest())
    async with a2a_client(platform.url, headers=HEADERS_B) as client:
        theirs = await client.get_extended_agent_card(GetExtendedAgentCardRequest())
    assert sorted(s.id for s in mine.skills) == ["echo", "review"]
    assert list(theirs.skills) == []
