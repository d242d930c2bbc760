"""Agent cards: live skills from the registry, caching headers, legacy and per-agent cards."""

from __future__ import annotations

from datetime import timedelta
from email.utils import format_datetime, parsedate_to_datetime
from typing import Any

import httpx
import pytest
from a2a.client.card_resolver import parse_agent_card
from a2a.compat.v0_3.types import AgentCard as V03AgentCard
from a2a.types.a2a_pb2 import AgentCard, GetExtendedAgentCardRequest, TaskState
from google.protobuf.json_format import MessageToDict
from jsonschema import Draft202012Validator
from proto_schema import strict_schema

from soorma import Tool
from soorma.client import verified_tls
from testsupport.a2a import a2a_client, capability, collect, final_task, send_request, user_message
from testsupport.gateway_platform import HEADERS_A, HEADERS_B, Platform

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_card_lists_live_skills_with_interfaces_and_security(platform: Platform):
    async with httpx.AsyncClient(verify=verified_tls(), base_url=platform.url) as http:
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

    async with httpx.AsyncClient(verify=verified_tls(), base_url=platform.url) as http:
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
    async with httpx.AsyncClient(verify=verified_tls(), base_url=platform.url) as http:
        response = await http.get("/.well-known/agent.json")
    card = response.json()
    assert response.headers["etag"]
    assert card["url"] == platform.url
    assert set(card["authentication"]["schemes"]) == {"apiKey", "oauth2"}
    echo = next(s for s in card["skills"] if s["id"] == "echo")
    assert echo["inputSchema"]["required"] == ["text"]


async def test_per_agent_card_and_endpoint(platform: Platform):
    agent_url = f"{platform.url}/agents/echo-tool"
    async with httpx.AsyncClient(
        verify=verified_tls(),
    ) as http:
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


CARD_SCHEMA = strict_schema(AgentCard.DESCRIPTOR)
V03_ONLY_KEYS = {
    "url",
    "preferredTransport",
    "protocolVersion",
    "security",
    "supportsAuthenticatedExtendedCard",
    "additionalInterfaces",
}


def assert_valid_1_0_card(card: dict[str, Any]) -> None:
    errors = [e.message for e in Draft202012Validator(CARD_SCHEMA).iter_errors(card)]
    assert not errors, errors
    assert not V03_ONLY_KEYS & set(card)


async def test_cards_validate_against_the_1_0_card_schema(platform: Platform):
    async with httpx.AsyncClient(
        verify=verified_tls(), base_url=platform.url, headers=HEADERS_A
    ) as http:
        public = (await http.get("/.well-known/agent-card.json")).json()
        per_agent = (await http.get("/agents/echo-tool/.well-known/agent-card.json")).json()
        extended = (await http.get("/extendedAgentCard", headers={"A2A-Version": "1.0"})).json()
        rpc = await http.post(
            "/",
            json={"jsonrpc": "2.0", "id": 1, "method": "GetExtendedAgentCard", "params": {}},
            headers={"A2A-Version": "1.0"},
        )
    for card in (public, per_agent, extended, rpc.json()["result"]):
        assert_valid_1_0_card(card)
    # The 0.3 JSON-RPC interface is still declared, as a 1.0 interface entry.
    assert {"JSONRPC", "0.3"} <= {
        v
        for i in public["supportedInterfaces"]
        for v in (i["protocolBinding"], i["protocolVersion"])
    }
    # The official client reads it.
    async with a2a_client(platform.url, "HTTP+JSON", streaming=False, headers=HEADERS_A) as c:
        task = final_task(
            await collect(c, send_request(user_message(data={"text": "v"}, skill="echo")))
        )
    assert task.status.state == TaskState.TASK_STATE_COMPLETED


async def test_legacy_path_serves_the_0_3_card(platform: Platform):
    async with httpx.AsyncClient(verify=verified_tls(), base_url=platform.url) as http:
        card = (await http.get("/.well-known/agent.json")).json()
    v03 = V03AgentCard.model_validate(card)
    assert v03.protocol_version == "0.3.0" or v03.protocol_version.startswith("0.3")
    assert v03.preferred_transport == "JSONRPC"
    assert {s.id for s in v03.skills} == {"echo", "review"}
    parsed = parse_agent_card(dict(card))
    assert ("JSONRPC", platform.url) in {
        (i.protocol_binding, i.url.rstrip("/")) for i in parsed.supported_interfaces
    }


async def test_card_has_last_modified_and_answers_if_modified_since(platform: Platform):
    async with httpx.AsyncClient(verify=verified_tls(), base_url=platform.url) as http:
        for path in ("/.well-known/agent-card.json", "/.well-known/agent.json"):
            first = await http.get(path)
            modified = first.headers["last-modified"]
            assert parsedate_to_datetime(modified).tzinfo is not None
            same = await http.get(path, headers={"If-Modified-Since": modified})
            assert same.status_code == 304 and same.headers["last-modified"] == modified
            earlier = format_datetime(
                parsedate_to_datetime(modified) - timedelta(seconds=10), usegmt=True
            )
            older = await http.get(path, headers={"If-Modified-Since": earlier})
            assert older.status_code == 200
            # If-None-Match wins over If-Modified-Since.
            stale_tag = await http.get(
                path, headers={"If-None-Match": 'W/"other"', "If-Modified-Since": modified}
            )
            assert stale_tag.status_code == 200


async def test_security_declares_what_is_enforced(platform: Platform):
    async with httpx.AsyncClient(verify=verified_tls(), base_url=platform.url) as http:
        keyed = (await http.get("/.well-known/agent-card.json")).json()
    assert [r["schemes"] for r in keyed["securityRequirements"]] == [{"apiKey": {}}, {"bearer": {}}]
    open_gateway = await platform.start_gateway(
        gateway_replica_id="replica-open", gateway_api_keys={}, jwt_secret=None
    )
    try:
        async with httpx.AsyncClient(verify=verified_tls(), base_url=open_gateway.url) as http:
            card = (await http.get("/.well-known/agent-card.json")).json()
            extended = await http.get("/extendedAgentCard", headers={"A2A-Version": "1.0"})
        assert "securityRequirements" not in card and "securitySchemes" not in card
        assert extended.status_code == 200
        assert_valid_1_0_card(card)
        # What the card says holds: a call without credentials is served.
        for binding in ("JSONRPC", "HTTP+JSON"):
            async with a2a_client(open_gateway.url, binding, streaming=False) as client:
                request = send_request(user_message(data={"text": "anon"}, skill="echo"))
                task = final_task(await collect(client, request))
            assert task.status.state == TaskState.TASK_STATE_COMPLETED
    finally:
        await open_gateway.stop()
