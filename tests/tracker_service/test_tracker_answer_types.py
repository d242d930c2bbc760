"""An answer of another type than the request's ``response_event`` pairs with it."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from tracker_stack import Stack

pytestmark = pytest.mark.asyncio


def request(plan_id: str, cid: str) -> dict[str, Any]:
    return {
        "topic": "action-requests",
        "type": "web.search.requested",
        "correlation_id": cid,
        "response_event": "web.search.completed",
        "plan_id": plan_id,
        "source": "planner-a",
        "data": {"q": "x"},
    }


def answer(plan_id: str, cid: str, type_: str, **data: Any) -> dict[str, Any]:
    return {
        "topic": "action-results",
        "type": type_,
        "correlation_id": cid,
        "plan_id": plan_id,
        "source": "searcher",
        "data": data,
    }


async def test_answer_of_another_type_pairs_in_and_out_of_order(stack: Stack) -> None:
    plan_id = str(uuid.uuid4())
    ok, failed, early, other = (f"{n}-{uuid.uuid4()}" for n in ("ok", "failed", "early", "other"))
    # In order: a no-results answer (success) and a .failed answer.
    await stack.publish(request(plan_id, ok))
    await stack.publish(answer(plan_id, ok, "web.search.no_results", hits=0))
    await stack.publish(request(plan_id, failed))
    await stack.publish(answer(plan_id, failed, "web.search.failed", reason="quota"))
    # Out of order: the answer is stored before its request arrives.
    await stack.publish(answer(plan_id, early, "web.search.no_results", hits=0))
    await stack.publish(request(plan_id, early))
    # An answer from another plan with the same correlation id is not this request's.
    await stack.publish(request(plan_id, other))
    await stack.publish(answer(str(uuid.uuid4()), other, "web.search.no_results"))

    async def paired() -> list[dict[str, Any]] | None:
        r = await stack.get(f"/plans/{plan_id}/actions")
        if r.status_code == 404:
            return None  # not projected yet
        actions: list[dict[str, Any]] = r.json()["actions"]
        done = [a for a in actions if a["status"] != "pending"]
        return actions if len(actions) == 4 and len(done) == 3 else None

    actions = {a["correlation_id"]: a for a in await stack.until(paired)}
    got = {cid: (a["status"], a["agent"], a["answer_type"]) for cid, a in actions.items()}
    assert got == {
        ok: ("completed", "searcher", "web.search.no_results"),
        failed: ("failed", "searcher", "web.search.failed"),
        early: ("completed", "searcher", "web.search.no_results"),
        other: ("pending", None, None),
    }
    for cid in (ok, failed, early):
        assert actions[cid]["latency_ms"] is not None
