"""Claims on requests (issue 9): the delivery that runs a request holds a lease on it.

A second delivery in flight at the same time is told who holds it and until when, or
that the request is answered (with the answer); the holder renews; recording the answer
or giving the claim back ends it; an expired claim may be taken by anyone. Runs on
SQLite and, when configured, PostgreSQL; leases run on the app's clock (a manual one
where a lease must run out).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime, timedelta

import httpx
import pytest

from memory_service import create_app
from memory_service.settings import Settings
from soorma_common.clock import ManualClock
from testsupport.services import in_process

pytestmark = pytest.mark.asyncio

A = {"X-Tenant-ID": "tenant-a"}
B = {"X-Tenant-ID": "tenant-b"}
CLAIM = "/v1/memory/answers/pricer:req-1/claim"
ANSWER = "/v1/memory/answers/pricer:req-1"


async def claim(
    client: httpx.AsyncClient, owner: str, lease: float = 30.0, headers: dict = A
) -> dict:
    r = await client.put(CLAIM, json={"owner": owner, "lease_seconds": lease}, headers=headers)
    assert r.status_code == 200, r.text
    return r.json()


async def test_first_claim_is_granted_and_a_second_owner_is_told_it_is_held(
    client: httpx.AsyncClient,
) -> None:
    first = await claim(client, "replica-1")
    assert first["status"] == "granted" and first["owner"] == "replica-1"
    second = await claim(client, "replica-2")
    assert second["status"] == "held"
    assert second["owner"] == "replica-1" and second["expires_at"] == first["expires_at"]
    assert second["answer"] is None


async def test_the_holder_renews_its_own_claim(client: httpx.AsyncClient) -> None:
    first = await claim(client, "replica-1", lease=5)
    renewed = await claim(client, "replica-1", lease=60)
    assert renewed["status"] == "granted" and renewed["expires_at"] > first["expires_at"]


async def test_recording_the_answer_ends_the_claim_and_later_claims_get_the_answer(
    client: httpx.AsyncClient,
) -> None:
    await claim(client, "replica-1")
    r = await client.put(ANSWER, json={"answer": {"event": {"id": "a1"}}}, headers=A)
    assert r.status_code == 200, r.text
    for owner in ("replica-2", "replica-1"):
        got = await claim(client, owner)
        assert got["status"] == "answered" and got["answer"] == {"event": {"id": "a1"}}
        assert got["owner"] is None and got["expires_at"] is None


async def test_an_expired_claim_is_taken_by_another_owner(
    make_settings: Callable[..., Settings],
) -> None:
    clock = ManualClock()
    app = create_app(make_settings(), clock=clock)
    async with in_process(app, base_url="http://memory") as client:
        first = await claim(client, "replica-1", lease=1)
        assert datetime.fromisoformat(first["expires_at"]) == clock.now() + timedelta(seconds=1)
        await clock.advance(0.999)
        assert (await claim(client, "replica-2"))["status"] == "held"
        await clock.advance(0.001)  # the lease has run out
        taken = await claim(client, "replica-2")
        assert taken["status"] == "granted" and taken["owner"] == "replica-2"
        assert (await claim(client, "replica-1"))["status"] == "held"


async def test_an_answer_past_its_retention_on_the_clock_no_longer_ends_claims(
    make_settings: Callable[..., Settings],
) -> None:
    # Claims read the recorded answer: both keep time on the one clock of the app.
    clock = ManualClock()
    app = create_app(make_settings(), clock=clock)
    async with in_process(app, base_url="http://memory") as client:
        await claim(client, "replica-1")
        body = {"answer": {"x": 1}, "retention_seconds": 60}
        assert (await client.put(ANSWER, json=body, headers=A)).status_code == 200
        await clock.advance(59.9)
        assert (await claim(client, "replica-2"))["status"] == "answered"
        await clock.advance(0.1)
        assert (await client.get(ANSWER, headers=A)).status_code == 404
        assert (await claim(client, "replica-2"))["status"] == "granted"


async def test_a_released_claim_is_free_at_once_and_only_its_owner_releases_it(
    client: httpx.AsyncClient,
) -> None:
    await claim(client, "replica-1")
    wrong = await client.delete(CLAIM, params={"owner": "replica-2"}, headers=A)
    assert wrong.status_code == 404 and "replica-2" in wrong.json()["error"]["message"]
    assert (await client.delete(CLAIM, params={"owner": "replica-1"}, headers=A)).status_code == 204
    assert (await claim(client, "replica-2"))["status"] == "granted"


async def test_concurrent_claims_grant_exactly_one(client: httpx.AsyncClient) -> None:
    outcomes = await asyncio.gather(*(claim(client, f"replica-{i}") for i in range(8)))
    granted = [o["owner"] for o in outcomes if o["status"] == "granted"]
    assert len(granted) == 1
    held = [o for o in outcomes if o["status"] != "granted"]
    assert len(held) == 7 and all(o["status"] == "held" for o in held)
    assert {o["owner"] for o in held} == set(granted)


async def test_tenant_b_can_neither_see_nor_steal_tenant_a_claim(
    client: httpx.AsyncClient,
) -> None:
    await claim(client, "replica-a")
    # Tenant B's key is its own: granted to B, and A's claim is untouched.
    other = await claim(client, "replica-b", headers=B)
    assert other["status"] == "granted" and other["owner"] == "replica-b"
    denied = await client.delete(CLAIM, params={"owner": "replica-a"}, headers=B)
    assert denied.status_code == 404
    assert (await claim(client, "intruder"))["owner"] == "replica-a"
    # A's answer ends A's claim only.
    await client.put(ANSWER, json={"answer": {"x": 1}}, headers=A)
    assert (await claim(client, "replica-b", headers=B))["status"] == "granted"
    assert (await claim(client, "intruder", headers=B))["status"] == "held"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"owner": "", "lease_seconds": 5}, "owner"),
        ({"owner": "x" * 129, "lease_seconds": 5}, "owner"),
        ({"owner": "o", "lease_seconds": 0.5}, "lease_seconds"),
        ({"owner": "o", "lease_seconds": 601}, "lease_seconds"),
        ({"owner": "o"}, "lease_seconds"),
        ({"lease_seconds": 5}, "owner"),
    ],
)
async def test_bad_claims_are_rejected_with_the_field_named(
    client: httpx.AsyncClient, body: dict, field: str
) -> None:
    r = await client.put(CLAIM, json=body, headers=A)
    assert r.status_code == 422, r.text
    assert field in r.text


async def test_openapi_describes_the_claim(client: httpx.AsyncClient) -> None:
    spec = (await client.get("/openapi.json")).json()
    path = spec["paths"]["/v1/memory/answers/{request_id}/claim"]
    assert set(path) == {"put", "delete"}
    outcome = spec["components"]["schemas"]["AnswerClaim"]
    assert outcome["properties"]["status"]["enum"] == ["granted", "answered", "held"]
    claim_write = spec["components"]["schemas"]["ClaimWrite"]
    # Input schemas name fields by their camelCase alias (snake_case is accepted too).
    assert claim_write["properties"]["leaseSeconds"]["maximum"] == 600
    assert set(claim_write["required"]) == {"owner", "leaseSeconds"}
