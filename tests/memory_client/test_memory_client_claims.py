"""MemoryClient's claims on requests: the outcome as a typed record, release as a bool."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_claim_renew_release_and_answered(make_memory) -> None:
    memory = make_memory()
    mine = await memory.claim_request("tool:r1", "me", lease_seconds=30)
    assert mine.status == "granted" and mine.owner == "me" and mine.expires_at is not None
    theirs = await memory.claim_request("tool:r1", "them", lease_seconds=30)
    assert theirs.status == "held" and theirs.owner == "me"
    assert await memory.release_claim("tool:r1", "them") is False
    assert await memory.release_claim("tool:r1", "me") is True
    assert (await memory.claim_request("tool:r1", "them", lease_seconds=30)).status == "granted"
    await memory.record_answer("tool:r1", {"event": {"id": "e1"}})
    done = await memory.claim_request("tool:r1", "me", lease_seconds=30)
    assert done.status == "answered" and done.answer == {"event": {"id": "e1"}}
    assert await memory.release_claim("tool:r1", "them") is False  # the answer ended it


async def test_a_claim_is_the_tenant_own(make_memory) -> None:
    a, b = make_memory("tenant-a"), make_memory("tenant-b")
    await a.claim_request("tool:r1", "a-owner", lease_seconds=30)
    assert (await b.claim_request("tool:r1", "b-owner", lease_seconds=30)).status == "granted"
    assert await b.release_claim("tool:r1", "a-owner") is False
    assert (await a.claim_request("tool:r1", "x", lease_seconds=30)).owner == "a-owner"
