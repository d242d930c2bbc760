"""Bad input and unreachable platform services are never a bare 500 on the A2A routes.

The gateway runs under real uvicorn; its registry and/or event service URLs point at
closed loopback ports. Requests are raw httpx on both bindings.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from gateway_a2a import create_app
from soorma.client import verified_tls
from testsupport.gateway_platform import HEADERS_A, Platform, gateway_settings
from testsupport.server import LiveServer, closed_port

pytestmark = pytest.mark.asyncio(loop_scope="module")

V1 = {**HEADERS_A, "A2A-Version": "1.0"}
MESSAGE = {
    "messageId": "m-1",
    "role": "ROLE_USER",
    "parts": [{"text": "hi"}],
    "metadata": {"skill": "echo"},
}
MALFORMED: list[Any] = [
    {},
    [],
    {"message": 5},
    {"message": {"parts": "x"}},
    {"message": {**MESSAGE, "parts": []}},
    {"message": {**MESSAGE, "parts": [{"kind": "weird", "weird": 1}]}},
    {"message": {**MESSAGE, "parts": [{}]}},
    {"message": {**MESSAGE, "role": "ROLE_NOPE"}},
    {"message": MESSAGE, "configuration": {"historyLength": "many"}},
]


def closed_url() -> str:
    return f"http://127.0.0.1:{closed_port()}"


def error_of(response: httpx.Response) -> dict[str, Any]:
    """The error object of a REST answer, a JSON-RPC answer, or an SSE stream's one event."""
    text = response.text.strip()
    body = json.loads(text.removeprefix("data:")) if text.startswith("data:") else json.loads(text)
    assert "error" in body, body
    return dict(body["error"])


async def start(tmp_path: Any, events: str, registry: str) -> LiveServer:
    settings = gateway_settings(
        events,
        registry,
        f"sqlite+aiosqlite:///{tmp_path}/gw.db",
        tmp_path,
        gateway_bus_ready_timeout_seconds=0.5,
    )
    server = LiveServer(create_app(settings))
    await server.start()
    return server


async def sends(http: httpx.AsyncClient, path: str = "") -> list[httpx.Response]:
    """message:send, message:stream, JSON-RPC SendMessage and 0.3 message/send."""
    old = {
        "messageId": "m-old",
        "role": "user",
        "kind": "message",
        "parts": [{"kind": "text", "text": "hi"}],
        "metadata": {"skill": "echo"},
    }
    return [
        await http.post(f"{path}/message:send", json={"message": MESSAGE}),
        await http.post(f"{path}/message:stream", json={"message": MESSAGE}),
        await http.post(
            f"{path}/",
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "SendMessage",
                "params": {"message": MESSAGE},
            },
        ),
        await http.post(
            f"{path}/",
            json={"jsonrpc": "2.0", "id": 2, "method": "message/send", "params": {"message": old}},
            headers={**HEADERS_A, "A2A-Version": "0.3"},
        ),
    ]


def assert_unavailable(responses: list[httpx.Response], service: str) -> None:
    rest_send, rest_stream, rpc, rpc_old = responses
    for response in (rest_send, rest_stream):
        assert response.status_code == 503, response.text
        error = error_of(response)
        assert error["status"] == "UNAVAILABLE"
        assert f"the {service} is unavailable" in error["message"]
        assert error["details"][0]["reason"] == "SERVICE_UNAVAILABLE"
    for response in (rpc, rpc_old):
        assert response.status_code == 200
        error = error_of(response)
        assert error["code"] == -32603
        assert f"the {service} is unavailable" in error["message"]


async def test_registry_down_is_503_naming_it_and_bad_bodies_are_400(tmp_path: Any):
    gateway = await start(tmp_path, closed_url(), closed_url())
    try:
        async with httpx.AsyncClient(
            verify=verified_tls(), base_url=gateway.url, headers=V1, timeout=30
        ) as http:
            assert_unavailable(await sends(http), "registry")
            # Bad input is answered before any service is asked: 400 naming the problem.
            for body in MALFORMED:
                response = await http.post("/message:send", json=body)
                assert response.status_code == 400, (body, response.text)
                assert error_of(response)["status"] == "INVALID_ARGUMENT"
                stream = await http.post("/message:stream", json=body)
                assert stream.status_code == 400, (body, stream.text)
                rpc = await http.post(
                    "/", json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": body}
                )
                assert error_of(rpc)["code"] in (-32602, -32700), (body, rpc.text)
            # Bytes that are not UTF-8: a parse error on both bindings (was a bare 500).
            for path in ("/message:send", "/message:stream", "/agents/echo-tool/message:send"):
                garbled = await http.post(
                    path, content=b'{"\xff\xfe": 1}', headers={"Content-Type": "application/json"}
                )
                assert garbled.status_code == 400, (path, garbled.text)
                assert "UTF-8" in error_of(garbled)["message"]
            for path in ("/", "/agents/echo-tool"):
                garbled = await http.post(
                    path, content=b"\xff\xfe", headers={"Content-Type": "application/json"}
                )
                assert garbled.status_code == 200 and error_of(garbled)["code"] == -32700
            empty = await http.post("/message:send", json={"message": {**MESSAGE, "parts": [{}]}})
            assert "message.parts[0]" in error_of(empty)["message"]
            missing = await http.post("/message:send", json={})
            assert "message" in json.dumps(error_of(missing))
    finally:
        await gateway.stop()


async def test_event_service_down_is_503_naming_it(platform: Platform, tmp_path: Any):
    """The registry knows the echo skill; the event service is unreachable."""
    gateway = await start(tmp_path, closed_url(), platform.registry.url)
    try:
        async with httpx.AsyncClient(
            verify=verified_tls(), base_url=gateway.url, headers=V1, timeout=30
        ) as http:
            assert_unavailable(await sends(http), "event service")
            # Nothing half-made: no task was stored for the refused sends.
            listed = await http.get("/tasks")
            assert listed.status_code == 200
            assert listed.json().get("tasks", []) == []
            per_agent = await http.post("/agents/echo-tool/message:send", json={"message": MESSAGE})
            assert per_agent.status_code == 503
            assert "event service" in error_of(per_agent)["message"]
    finally:
        await gateway.stop()
