"""The seed's legacy ``POST /tasks/send``: ``A2ATask`` in, ``A2ATaskResponse`` out."""

from __future__ import annotations

import httpx
import pytest

from soorma.client import verified_tls
from soorma_common.a2a import A2ATaskResponse, A2ATaskStatus
from testsupport.gateway_platform import HEADERS_A, Platform

pytestmark = pytest.mark.asyncio(loop_scope="module")


def legacy_task(parts: list[dict], skill: str = "echo") -> dict:
    return {
        "id": "legacy-1",
        "sessionId": "s-1",
        "metadata": {"skill": skill},
        "message": {"role": "user", "parts": parts},
    }


async def test_legacy_send_answers_with_the_seed_shape(platform: Platform):
    async with httpx.AsyncClient(
        verify=verified_tls(), base_url=platform.url, headers=HEADERS_A
    ) as http:
        text = await http.post("/tasks/send", json=legacy_task([{"type": "text", "text": "yo"}]))
        data = await http.post(
            "/tasks/send",
            json=legacy_task(
                [{"type": "data", "data": {"doc": "d", "mode": "fail"}}], skill="review"
            ),
        )
        invalid = await http.post(
            "/tasks/send", json=legacy_task([{"type": "data", "data": {"text": 5}}])
        )
        malformed = await http.post("/tasks/send", json={"id": "x"})
    answer = A2ATaskResponse.model_validate(text.json())
    assert answer.id == "legacy-1" and answer.sessionId == "s-1"
    assert answer.status == A2ATaskStatus.COMPLETED
    assert answer.message is not None and answer.message.parts[0].type == "data"
    echoed = answer.message.parts[0].data
    assert echoed == {"echo": "yo", "message_id": echoed["message_id"], "tenant": "tenant-a"}
    failed = A2ATaskResponse.model_validate(data.json())
    assert failed.status == A2ATaskStatus.FAILED
    assert failed.error == "the document is unreadable"
    assert invalid.status_code == 422 and "'text'" in invalid.json()["error"]["message"]
    assert malformed.status_code == 422 and "message" in malformed.json()["error"]["message"]
