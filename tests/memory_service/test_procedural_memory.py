"""Procedural memory: what applies here, from the agent's and user's own and tenant-wide."""

from __future__ import annotations

import httpx
import pytest

pytestmark = pytest.mark.asyncio

A = {"X-Tenant-ID": "tenant-a", "X-User-ID": "alice"}
A2 = {"X-Tenant-ID": "tenant-a", "X-User-ID": "bob"}
B = {"X-Tenant-ID": "tenant-b", "X-User-ID": "alice"}


async def _add(client: httpx.AsyncClient, headers: dict[str, str], **body: object) -> dict:
    r = await client.post("/v1/memory/procedures", json=body, headers=headers)
    assert r.status_code == 201, r.text
    return r.json()


async def _relevant(
    client: httpx.AsyncClient, headers: dict[str, str], **body: object
) -> list[str]:
    r = await client.post("/v1/memory/procedures/relevant", json=body, headers=headers)
    assert r.status_code == 200, r.text
    scores = [h["score"] for h in r.json()["hits"]]
    assert scores == sorted(scores, reverse=True)
    return [h["record"]["content"] for h in r.json()["hits"]]


async def _seed(client: httpx.AsyncClient) -> None:
    await _add(
        client,
        A,
        agent_id="support",
        kind="rule",
        content="Refunds over 100 EUR need a manager",
        situation="customer asks for a refund",
    )
    await _add(
        client,
        A,
        agent_id="support",
        kind="example",
        content="Q: where is my parcel? A: tracking link",
        situation="customer asks where the parcel is",
    )
    await _add(
        client,
        A,
        agent_id=None,
        kind="prompt",
        content="Answer in the customer's language",
        situation="any customer conversation refund",
    )
    await _add(
        client,
        A,
        agent_id="billing",
        kind="rule",
        content="Invoices are monthly",
        situation="customer asks for a refund of an invoice",
    )
    await _add(
        client,
        A2,
        agent_id="support",
        kind="rule",
        public=True,
        content="Be polite",
        situation="customer asks for a refund angrily",
    )


async def test_most_relevant_first_for_the_agent(lt_client: httpx.AsyncClient) -> None:
    await _seed(lt_client)
    found = await _relevant(lt_client, A, query="customer wants a refund", agent_id="support")
    assert found[0] == "Refunds over 100 EUR need a manager"
    # Own for this agent, own for any agent, and tenant-wide; not another agent's.
    assert set(found) == {
        "Refunds over 100 EUR need a manager",
        "Q: where is my parcel? A: tracking link",
        "Answer in the customer's language",
        "Be polite",
    }
    limited = await _relevant(lt_client, A, query="refund", agent_id="support", limit=2)
    assert len(limited) == 2


async def test_kinds_filter(lt_client: httpx.AsyncClient) -> None:
    await _seed(lt_client)
    found = await _relevant(lt_client, A, query="refund", agent_id="support", kinds=["example"])
    assert found == ["Q: where is my parcel? A: tracking link"]


async def test_other_users_see_only_tenant_wide_and_other_tenants_nothing(
    lt_client: httpx.AsyncClient,
) -> None:
    await _seed(lt_client)
    assert await _relevant(lt_client, A2, query="refund", agent_id="support") == ["Be polite"]
    assert await _relevant(lt_client, B, query="refund", agent_id="support") == []
    listed = (await lt_client.get("/v1/memory/procedures?agent_id=support", headers=A2)).json()
    assert [p["content"] for p in listed] == ["Be polite"]
    assert (await lt_client.get("/v1/memory/procedures", headers=B)).json() == []
    mine = (await lt_client.get("/v1/memory/procedures?kind=rule", headers=A)).json()
    assert {p["content"] for p in mine} == {
        "Refunds over 100 EUR need a manager",
        "Invoices are monthly",
        "Be polite",
    }


async def test_get_and_delete(lt_client: httpx.AsyncClient) -> None:
    rec = await _add(lt_client, A, kind="rule", content="x", situation="y")
    assert rec["agent_id"] is None and rec["embedding_model"] == "deterministic/256"
    assert (
        await lt_client.get(f"/v1/memory/procedures/{rec['id']}", headers=A2)
    ).status_code == 404
    assert (await lt_client.get(f"/v1/memory/procedures/{rec['id']}", headers=A)).status_code == 200
    assert (
        await lt_client.delete(f"/v1/memory/procedures/{rec['id']}", headers=B)
    ).status_code == 404
    assert (
        await lt_client.delete(f"/v1/memory/procedures/{rec['id']}", headers=A)
    ).status_code == 204
    assert (await lt_client.get(f"/v1/memory/procedures/{rec['id']}", headers=A)).status_code == 404
