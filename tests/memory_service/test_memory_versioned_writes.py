"""Plan and task contexts are one kind of record, a versioned one: the same writes give the
same answers for both (one store helper, ``memory_service.sql.base.versioned_write``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
from memory_bodies import plan_body, task_body

pytestmark = pytest.mark.asyncio

KINDS = {
    "plan": ("/v1/memory/plan-context", plan_body),
    "task": ("/v1/memory/task-context", task_body),
}


@pytest.fixture(params=sorted(KINDS))
def kind(request: pytest.FixtureRequest) -> tuple[str, Callable[..., dict[str, Any]]]:
    return KINDS[request.param]


async def test_the_four_writes_answer_alike(
    client: httpx.AsyncClient, kind: tuple[str, Callable[..., dict[str, Any]]]
) -> None:
    base, body = kind

    # A PUT never creates (404), with or without a version.
    assert (await client.put(f"{base}/r1", json=body("r1"))).status_code == 404
    missing = await client.put(f"{base}/r1", json=body("r1"), headers={"If-Match": "3"})
    assert missing.status_code == 404

    # Version 0: only if absent; a second create names the stored version.
    created = await client.post(base, json=body("r1", expected_version=0))
    assert created.status_code in (200, 201) and created.json()["version"] == 1
    again = await client.post(base, json=body("r1", expected_version=0))
    assert again.status_code == 409
    assert again.json()["error"]["details"] == {"expected_version": 0, "current_version": 1}

    # No version: an upsert (last writer wins, the version moves on).
    upserted = await client.post(base, json=body("r1", state={"by": "upsert"}))
    assert upserted.json()["version"] == 2

    # A version: only that one; a stale one is a conflict naming both.
    stale = await client.put(f"{base}/r1", json=body("r1"), headers={"If-Match": "1"})
    assert stale.status_code == 409
    assert stale.json()["error"]["details"] == {"expected_version": 1, "current_version": 2}
    fresh = await client.put(
        f"{base}/r1", json=body("r1", state={"by": "put"}), headers={"If-Match": "2"}
    )
    assert fresh.status_code == 200 and fresh.json()["version"] == 3

    # PUT without a version replaces whatever is stored.
    anyway = await client.put(f"{base}/r1", json=body("r1", state={"by": "any"}))
    assert anyway.status_code == 200
    assert anyway.json()["version"] == 4 and anyway.json()["state"] == {"by": "any"}
