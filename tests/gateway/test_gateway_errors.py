"""Every A2A error for its case, over raw HTTP on both bindings, plus 413 and the 0.3 names.

Nothing reaches the bus from a rejected request (checked with a tap on action-requests).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from a2a.types.a2a_pb2 import CancelTaskRequest
from a2a.utils.errors import ContentTypeNotSupportedError, TaskNotCancelableError

from soorma.client import verified_tls
from soorma_common.events import ACTION_REQUESTS
from testsupport.a2a import a2a_client, collect, final_task, send_request, user_message
from testsupport.gateway_platform import HEADERS_A, Platform

pytestmark = pytest.mark.asyncio(loop_scope="module")

V1 = {**HEADERS_A, "A2A-Version": "1.0"}


def rpc(method: str, params: Any = None, *, id_: Any = 1) -> dict[str, Any]:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": id_, "method": method}
    if params is not None:
        body["params"] = params
    return body


def message(data: dict[str, Any] | None = None, *, skill: str = "echo", **extra: Any) -> dict:
    parts = [{"data": data}] if data is not None else [{"text": "hi"}]
    return {
        "messageId": "m-1",
        "role": "ROLE_USER",
        "parts": parts,
        "metadata": {"skill": skill},
        **extra,
    }


async def completed_task(http: httpx.AsyncClient) -> str:
    body = (
        await http.post(
            "/", json=rpc("SendMessage", {"message": message({"text": "x"})}), headers=V1
        )
    ).json()
    return str(body["result"]["task"]["id"])


async def test_json_rpc_error_codes(platform: Platform):
    context = await platform.context()
    async with (
        context.bus.subscribe([ACTION_REQUESTS]) as tap,
        httpx.AsyncClient(verify=verified_tls(), base_url=platform.url) as http,
    ):
        await tap.wait_ready()

        async def code(body: Any, headers: dict[str, str] = V1, raw: bool = False) -> int:
            content = body if raw else json.dumps(body)
            response = await http.post(
                "/", content=content, headers={**headers, "Content-Type": "application/json"}
            )
            assert response.status_code == 200
            return int(response.json()["error"]["code"])

        assert await code("{not json", raw=True) == -32700
        assert await code({"jsonrpc": "1.0", "id": 1, "method": "GetTask"}) == -32600
        assert await code([rpc("GetTask")]) == -32600
        assert await code(rpc("NoSuchMethod")) == -32601
        assert await code(rpc("GetTask", {"id": 5, "historyLength": "x"})) == -32602
        assert await code(rpc("SendMessage", {"message": message({"text": 1})})) == -32602
        assert await code(rpc("GetTask", {"id": "missing"})) == -32001
        assert (
            await code(
                rpc(
                    "SendMessage",
                    {"message": {**message(), "parts": [{"text": "x", "mediaType": "image/png"}]}},
                )
            )
            == -32005
        )
        assert (
            await code(rpc("GetTask", {"id": "x"}), headers={**HEADERS_A, "A2A-Version": "9.0"})
            == -32009
        )
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.4):
                await anext(aiter(tap))
        done = await completed_task(http)
        assert await code(rpc("CancelTask", {"id": done})) == -32002
        assert await code(rpc("SendMessage", {"message": message(taskId=done)})) == -32004
        assert await code(rpc("SubscribeToTask", {"id": done})) == -32004


async def test_push_not_supported_when_disabled(platform: Platform):
    gateway = await platform.start_gateway(gateway_push_enabled=False, gateway_replica_id="no-push")
    try:
        async with httpx.AsyncClient(verify=verified_tls(), base_url=gateway.url) as http:
            done = await completed_task(http)
            body = (
                await http.post(
                    "/",
                    json=rpc(
                        "CreateTaskPushNotificationConfig",
                        {"taskId": done, "url": "https://example.com/hook"},
                    ),
                    headers=V1,
                )
            ).json()
            rest = await http.post(
                f"/tasks/{done}/pushNotificationConfigs",
                json={"url": "https://example.com/hook"},
                headers=V1,
            )
    finally:
        await gateway.stop()
    assert body["error"]["code"] == -32003
    assert rest.status_code == 400


async def test_http_json_statuses(platform: Platform):
    """A2A 1.0 HTTP+JSON: the spec's status per error, errors as ``application/a2a+json``."""
    png = {**message(), "parts": [{"text": "x", "mediaType": "image/png"}]}
    async with httpx.AsyncClient(verify=verified_tls(), base_url=platform.url, headers=V1) as http:
        missing = await http.get("/tasks/nope")
        bad = await http.post("/message:send", json={"message": message({"text": 3})})
        garbage = await http.post(
            "/message:send", content="{oops", headers={"Content-Type": "application/json"}
        )
        done = await http.post("/message:send", json={"message": message({"text": "x"})})
        task_id = done.json()["task"]["id"]
        not_cancelable = await http.post(f"/tasks/{task_id}:cancel")
        got = await http.get(f"/tasks/{task_id}")
        media = await http.post("/message:send", json={"message": png})
        plain = await http.post(
            "/message:send",
            content=json.dumps({"message": message({"text": "x"})}),
            headers={"Content-Type": "text/plain"},
        )
        a2a_json = await http.post(
            "/message:send",
            content=json.dumps({"message": message({"text": "y"})}),
            headers={"Content-Type": "application/a2a+json"},
        )
    assert missing.status_code == 404
    assert bad.status_code == 400 and "text" in bad.text
    assert garbage.status_code == 400
    assert done.status_code == 200
    assert not_cancelable.status_code == 409 and "TASK_NOT_CANCELABLE" in not_cancelable.text
    assert got.json()["status"]["state"] == "TASK_STATE_COMPLETED"
    assert media.status_code == 415 and "CONTENT_TYPE_NOT_SUPPORTED" in media.text
    assert plain.status_code == 415 and "text/plain" in plain.json()["error"]["message"]
    assert a2a_json.status_code == 200
    for error in (missing, bad, garbage, not_cancelable, media, plain):
        assert error.headers["content-type"] == "application/a2a+json", error.request.url
        assert error.json()["error"]["code"] == error.status_code


async def test_http_json_errors_reach_the_official_client_as_their_a2a_error(
    platform: Platform,
):
    async with a2a_client(platform.url, "HTTP+JSON", streaming=False, headers=HEADERS_A) as client:
        task = final_task(
            await collect(client, send_request(user_message(data={"text": "c"}, skill="echo")))
        )
        with pytest.raises(TaskNotCancelableError):
            await client.cancel_task(CancelTaskRequest(id=task.id))
        png = user_message(text="x", skill="echo")
        png.parts[0].media_type = "image/png"
        with pytest.raises(ContentTypeNotSupportedError):
            await collect(client, send_request(png))


async def test_oversized_body_is_413_and_never_published(platform: Platform):
    context = await platform.context()
    big = "x" * (1024 * 1024 + 10)
    async with (
        context.bus.subscribe([ACTION_REQUESTS]) as tap,
        httpx.AsyncClient(verify=verified_tls(), base_url=platform.url, headers=V1) as http,
    ):
        await tap.wait_ready()
        rpc_response = await http.post(
            "/", json=rpc("SendMessage", {"message": message({"text": big})})
        )
        rest_response = await http.post("/message:send", json={"message": message({"text": big})})
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.4):
                await anext(aiter(tap))
    assert rpc_response.status_code == 413
    assert rest_response.status_code == 413


@pytest.mark.parametrize("path", ["/", "/agents/echo-tool/", "/agents/echo-tool"])
async def test_v0_3_method_names(platform: Platform, path: str):
    old = {
        "messageId": "m-old",
        "role": "user",
        "kind": "message",
        "parts": [{"kind": "data", "data": {"text": "old"}}],
        "metadata": {"skill": "echo"},
    }
    async with httpx.AsyncClient(
        verify=verified_tls(), base_url=platform.url, headers=HEADERS_A
    ) as http:
        sent = (await http.post(path, json=rpc("message/send", {"message": old}))).json()
        task = sent["result"]
        assert task["kind"] == "task" and task["status"]["state"] == "completed"
        got = (await http.post(path, json=rpc("tasks/get", {"id": task["id"]}))).json()
        assert got["result"]["artifacts"][0]["parts"][0]["data"]["echo"] == "old"
        cancel = (await http.post(path, json=rpc("tasks/cancel", {"id": task["id"]}))).json()
        assert cancel["error"]["code"] == -32002
        async with http.stream("POST", path, json=rpc("message/stream", {"message": old})) as s:
            lines = [
                json.loads(line[5:]) async for line in s.aiter_lines() if line.startswith("data:")
            ]
        assert lines[-1]["result"]["status"]["state"] == "completed"
        push = (
            await http.post(path, json=rpc("tasks/pushNotificationConfig/list", {"id": task["id"]}))
        ).json()
        assert push["result"] == []
        missing = await http.post(path, json=rpc("tasks/resubscribe", {"id": "nope"}))
        # A streaming method answers its error as the stream's one event.
        body = missing.text.strip()
        body = (
            json.loads(body.removeprefix("data:")) if body.startswith("data:") else json.loads(body)
        )
        assert body["error"]["code"] == -32001


async def test_client_errors_are_logged_in_one_line_without_traceback(
    platform: Platform, caplog: pytest.LogCaptureFixture
):
    bad_requests: list[tuple[str, str, Any, dict[str, str]]] = [
        ("POST", "/", {"jsonrpc": "1.0", "id": 1, "method": "GetTask"}, V1),
        ("POST", "/", rpc("GetTask", {"id": 5, "historyLength": "x"}), V1),
        ("POST", "/", rpc("GetTask", None) | {"params": None}, V1),
        ("POST", "/", rpc("SendMessage", {"message": message({"text": 1})}), V1),
        ("POST", "/", rpc("message/send", {"message": {"parts": 3}}), HEADERS_A),
        ("POST", "/", rpc("GetTask", {"id": "x"}), {**HEADERS_A, "A2A-Version": "9.9"}),
        ("POST", "/message:send", {"message": {"parts": "x"}}, V1),
        ("GET", "/tasks/missing", None, V1),
        ("POST", "/v1/message:stream", {"message": {}}, HEADERS_A),
    ]
    async with httpx.AsyncClient(verify=verified_tls(), base_url=platform.url) as http:
        for method, path, body, headers in bad_requests:
            caplog.clear()
            with caplog.at_level("INFO"):
                response = await http.request(method, path, json=body, headers=headers)
                await asyncio.sleep(0.05)
            assert response.status_code < 500, (path, response.text)
            records = [
                r
                for r in caplog.records
                if r.levelno >= 30 and r.name.startswith(("a2a", "gateway_a2a", "servicekit"))
            ]
            assert len(records) <= 1, (path, body, [r.getMessage() for r in records])
            for record in records:
                assert record.exc_info is None and record.exc_text is None, record.getMessage()
                assert "\n" not in record.getMessage()
