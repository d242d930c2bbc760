"""a2a-sdk's 0.3 HTTP+JSON routes under ``/v1``: streams are valid SSE or a clean refusal."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from soorma.client import verified_tls
from testsupport.gateway_platform import HEADERS_A, Platform

pytestmark = pytest.mark.asyncio(loop_scope="module")


def v03_message(data: dict[str, Any], *, skill: str = "echo", message_id: str = "m-03") -> dict:
    return {
        "message": {
            "messageId": message_id,
            "role": "ROLE_USER",
            "content": [{"data": {"data": data}}],
            "metadata": {"skill": skill},
        }
    }


async def sse_events(response: httpx.Response) -> list[dict[str, Any]]:
    events = []
    async for line in response.aiter_lines():
        if line.startswith("data:"):
            events.append(json.loads(line[5:]))
    return events


async def test_v03_message_stream_answers_a_valid_stream(platform: Platform):
    async with (
        httpx.AsyncClient(verify=verified_tls(), base_url=platform.url, timeout=20) as http,
        http.stream(
            "POST", "/v1/message:stream", json=v03_message({"text": "v03"}), headers=HEADERS_A
        ) as response,
    ):
        assert response.status_code == 200, await response.aread()
        events = await sse_events(response)
    assert events, "no event in the stream"
    assert events[0]["task"]["id"]
    assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    [
        ("POST", "/v1/message:stream", v03_message({"text": 5}), 400),
        ("POST", "/v1/message:stream", {"message": {}}, 400),
        ("POST", "/v1/message:stream", v03_message({"text": "x"}, skill="nope"), 400),
        ("GET", "/v1/tasks/no-such-task:subscribe", None, 404),
        ("POST", "/v1/tasks/no-such-task:subscribe", None, 404),
    ],
)
async def test_v03_stream_refused_before_it_starts_is_a_json_error(
    platform: Platform, method: str, path: str, body: Any, status: int
):
    async with (
        httpx.AsyncClient(verify=verified_tls(), base_url=platform.url, timeout=20) as http,
        http.stream(method, path, json=body, headers=HEADERS_A) as response,
    ):
        payload = json.loads(await response.aread())
    assert response.status_code == status
    assert response.headers["content-type"].startswith("application/")
    assert payload["error"]["code"] == status


async def test_v03_subscribe_to_a_running_task_streams_it_to_the_end(platform: Platform):
    doc = "v03-subscribe"
    async with httpx.AsyncClient(verify=verified_tls(), base_url=platform.url, timeout=20) as http:
        sent = await http.post(
            "/v1/message:send",
            json={
                **v03_message({"doc": doc, "mode": "slow"}, skill="review"),
                "configuration": {"blocking": False},
            },
            headers=HEADERS_A,
        )
        assert sent.status_code == 200, sent.text
        task_id = sent.json()["task"]["id"]
        for method in ("GET", "POST"):
            async with http.stream(
                method, f"/v1/tasks/{task_id}:subscribe", headers=HEADERS_A
            ) as response:
                assert response.status_code == 200
                assert response.headers["content-type"].startswith("text/event-stream")
                lines = response.aiter_lines()
                async for line in lines:
                    if line.startswith("data:"):
                        assert json.loads(line[5:])["task"]["id"] == task_id
                        break
                if method == "POST":
                    platform.control.release(doc)
                    events = [json.loads(x[5:]) async for x in lines if x.startswith("data:")]
                    assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
