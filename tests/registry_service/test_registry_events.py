"""Event definitions: registration, filters, schema validation, ownership cleanup."""

from __future__ import annotations

import httpx
import pytest
from registry_payloads import ORDER_SCHEMA, agent, capability, event, order_validator

pytestmark = pytest.mark.asyncio


async def test_registered_events_can_be_read_back_and_filtered(
    client: httpx.AsyncClient,
) -> None:
    r = await client.post(
        "/v1/events",
        json=event("user.signed_up", topic="business-facts", payload_schema=ORDER_SCHEMA),
    )
    assert r.status_code == 201
    assert r.json()["owner_agent_id"] is None
    await client.post("/v1/events", json=event("user.left", topic="business-facts"))
    await client.post("/v1/events", json=event("mail.send", owner_agent_id="mailer"))

    r = await client.get("/v1/events/user.signed_up")
    assert r.status_code == 200
    assert r.json() == {
        "event_name": "user.signed_up",
        "topic": "business-facts",
        "description": "user.signed_up event",
        "payload_schema": ORDER_SCHEMA,
        "response_schema": None,
        "owner_agent_id": None,
    }

    async def names(**params: str) -> list[str]:
        r = await client.get("/v1/events", params=params)
        assert r.status_code == 200
        return [e["event_name"] for e in r.json()]

    assert await names() == ["mail.send", "user.left", "user.signed_up"]
    assert await names(topic="business-facts") == ["user.left", "user.signed_up"]
    assert await names(event_name="user.left") == ["user.left"]
    assert await names(owner="mailer") == ["mail.send"]
    assert await names(topic="action-requests", owner="mailer") == ["mail.send"]
    assert await names(topic="plan-events") == []


async def test_posting_an_event_again_replaces_its_definition(client: httpx.AsyncClient) -> None:
    await client.post("/v1/events", json=event("x.y", description="first"))
    r = await client.post(
        "/v1/events", json=event("x.y", description="second", response_schema={"type": "string"})
    )
    assert r.status_code == 201
    stored = (await client.get("/v1/events/x.y")).json()
    assert stored["description"] == "second"
    assert stored["response_schema"] == {"type": "string"}
    assert len((await client.get("/v1/events")).json()) == 1


async def test_unknown_event_is_404_with_its_own_code(client: httpx.AsyncClient) -> None:
    r = await client.get("/v1/events/nope.never")
    assert r.status_code == 404
    assert r.json()["error"]["code"] == "event_definition_not_found"
    assert "nope.never" in r.json()["error"]["message"]


@pytest.mark.parametrize("field", ["payload_schema", "response_schema"])
async def test_invalid_schemas_are_rejected_naming_event_and_error(
    client: httpx.AsyncClient, field: str
) -> None:
    bad = {"type": "objekt"}
    r = await client.post("/v1/events", json=event("broken.event", **{field: bad}))
    assert r.status_code == 422
    error = r.json()["error"]
    assert error["code"] == "schema_invalid"
    assert "broken.event" in error["message"]
    assert field in error["message"]
    assert "objekt" in error["message"]
    assert error["details"]["event_name"] == "broken.event"
    assert error["details"]["field"] == field
    assert (await client.get("/v1/events/broken.event")).status_code == 404


async def test_invalid_schema_inside_a_capability_rejects_the_whole_registration(
    client: httpx.AsyncClient,
) -> None:
    body = agent(
        "bad-agent",
        capabilities=[
            capability("ok", "fine.event"),
            {
                **capability("broken", "broken.in"),
                "produced_events": [
                    event("broken.out", payload_schema={"properties": {"n": {"minimum": "zero"}}})
                ],
            },
        ],
    )
    r = await client.post("/v1/agents", json=body)
    assert r.status_code == 422
    error = r.json()["error"]
    assert error["code"] == "schema_invalid"
    assert "broken.out" in error["message"]
    assert error["details"]["schema_path"] == "properties/n/minimum"
    assert (await client.get("/v1/agents", params={"include_expired": "true"})).json() == []
    assert (await client.get("/v1/events")).json() == []


async def test_invalid_topic_is_rejected(client: httpx.AsyncClient) -> None:
    r = await client.post("/v1/events", json=event("e.f", topic="UPPER case"))
    assert r.status_code == 422
    assert r.json()["error"]["code"] == "invalid_topic"


async def test_agent_registration_registers_its_events_owned_by_it(
    client: httpx.AsyncClient,
) -> None:
    await client.post("/v1/agents", json=order_validator())
    owned = (await client.get("/v1/events", params={"owner": "validator-1"})).json()
    assert [(e["event_name"], e["topic"]) for e in owned] == [
        ("order.validate", "action-requests"),
        ("order.validated", "action-results"),
    ]
    assert owned[0]["payload_schema"] == ORDER_SCHEMA


async def test_deregistering_the_owner_removes_events_no_one_else_declares(
    client: httpx.AsyncClient,
) -> None:
    await client.post("/v1/agents", json=order_validator())
    await client.post("/v1/events", json=event("platform.event"))  # unowned: stays
    assert (await client.delete("/v1/agents/validator-1")).status_code == 204
    names = [e["event_name"] for e in (await client.get("/v1/events")).json()]
    assert names == ["platform.event"]


async def test_events_pass_to_another_live_declarer_when_the_owner_leaves(
    client: httpx.AsyncClient,
) -> None:
    await client.post("/v1/agents", json=order_validator("validator-1"))
    await client.post("/v1/agents", json=order_validator("validator-2"))
    # A simple-level agent declaring the produced event by name also keeps it alive.
    await client.post("/v1/agents", json=agent("auditor", events_consumed=["order.validated"]))

    # The first registrant stays owner while it is live.
    events = {e["event_name"]: e for e in (await client.get("/v1/events")).json()}
    assert events["order.validate"]["owner_agent_id"] == "validator-1"

    await client.delete("/v1/agents/validator-1")
    events = {e["event_name"]: e for e in (await client.get("/v1/events")).json()}
    assert events["order.validate"]["owner_agent_id"] == "validator-2"
    assert events["order.validate"]["payload_schema"] == ORDER_SCHEMA

    await client.delete("/v1/agents/validator-2")
    events = {e["event_name"]: e for e in (await client.get("/v1/events")).json()}
    assert list(events) == ["order.validated"]
    assert events["order.validated"]["owner_agent_id"] == "auditor"

    await client.delete("/v1/agents/auditor")
    assert (await client.get("/v1/events")).json() == []


async def test_a_live_owner_keeps_its_definition_against_other_declarers(
    client: httpx.AsyncClient,
) -> None:
    await client.post(
        "/v1/agents",
        json=agent("first", capabilities=[capability("t", "shared.event", description="mine")]),
    )
    theirs = capability("t", "shared.event", payload_schema={"type": "object"})
    await client.post("/v1/agents", json=agent("second", capabilities=[theirs]))
    stored = (await client.get("/v1/events/shared.event")).json()
    assert stored["owner_agent_id"] == "first"
    assert stored["payload_schema"] is None


async def test_re_registering_without_an_event_releases_it(client: httpx.AsyncClient) -> None:
    await client.post(
        "/v1/agents", json=agent("a", capabilities=[capability("t", "keep.me", ["drop.me"])])
    )
    await client.post("/v1/agents", json=agent("a", capabilities=[capability("t", "keep.me")]))
    names = [e["event_name"] for e in (await client.get("/v1/events")).json()]
    assert names == ["keep.me"]


async def test_an_agent_takes_over_an_unowned_event_it_declares(
    client: httpx.AsyncClient,
) -> None:
    await client.post("/v1/events", json=event("calc.add", description="old"))
    await client.post(
        "/v1/agents",
        json=agent(
            "calc", capabilities=[capability("add", "calc.add", payload_schema={"type": "object"})]
        ),
    )
    stored = (await client.get("/v1/events/calc.add")).json()
    assert stored["owner_agent_id"] == "calc"
    assert stored["payload_schema"] == {"type": "object"}
