"""``/openapi.json`` describes every route the gateway serves, as the route answers."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from gateway_a2a.openapi import served
from gateway_a2a.restwire import is_rest_v1_0
from soorma.client import verified_tls
from testsupport.gateway_platform import HEADERS_A, Platform

pytestmark = pytest.mark.asyncio(loop_scope="module")

V1 = {**HEADERS_A, "A2A-Version": "1.0"}
PARAM = re.compile(r"{([^}:]+)(?::[^}]+)?}")


def send_body(data: dict[str, Any], *, skill: str = "echo") -> dict[str, Any]:
    return {
        "message": {
            "messageId": "m-openapi",
            "role": "ROLE_USER",
            "parts": [{"data": data}],
            "metadata": {"skill": skill},
        }
    }


async def spec_of(http: httpx.AsyncClient) -> dict[str, Any]:
    response = await http.get("/openapi.json", headers=HEADERS_A)
    assert response.status_code == 200
    return dict(response.json())


def documented(spec: dict[str, Any], path: str, method: str, status: int) -> set[str]:
    responses = spec["paths"][path][method.lower()]["responses"]
    assert str(status) in responses, (method, path, status, sorted(responses))
    return set(responses[str(status)].get("content", {}))


async def test_every_served_route_and_path_parameter_is_documented(platform: Platform):
    async with httpx.AsyncClient(verify=verified_tls(), base_url=platform.url) as http:
        spec = await spec_of(http)
    app = platform.gateway.app  # type: ignore[union-attr]
    routes = {(PARAM.sub(lambda m: "{" + m.group(1) + "}", p), m) for p, m in served(app.routes)}
    documented_ops = {
        (path, method.upper())
        for path, operations in spec["paths"].items()
        for method in operations
    }
    assert routes == documented_ops
    for path, operations in spec["paths"].items():
        names = set(PARAM.findall(path))
        for method, operation in operations.items():
            declared = {p["name"] for p in operation.get("parameters", []) if p["in"] == "path"}
            assert declared == names, (method, path, declared)
            codes = set(operation["responses"])
            http_json = is_rest_v1_0(path) or (path.startswith("/v1/") and path != "/v1/card")
            if http_json:
                assert {"200", "400", "401", "404"} <= codes, (method, path, codes)
            if path.endswith(":cancel"):
                assert "409" in codes, path
            if http_json and method == "post" and path.endswith(("message:send", "Configs")):
                assert "415" in codes, path


async def test_documented_statuses_and_media_types_are_what_the_routes_answer(
    platform: Platform,
):
    async with httpx.AsyncClient(verify=verified_tls(), base_url=platform.url, timeout=20) as http:
        spec = await spec_of(http)

        async def check(method: str, url: str, doc_path: str, status: int, **kw: Any) -> Any:
            response = await http.request(method, url, **kw)
            assert response.status_code == status, (url, response.text[:300])
            media_type = response.headers["content-type"].split(";")[0]
            assert media_type in documented(spec, doc_path, method, status), (url, media_type)
            return response

        sent = await check(
            "POST",
            "/message:send",
            "/message:send",
            200,
            json=send_body({"text": "doc"}),
            headers=V1,
        )
        task_id = sent.json()["task"]["id"]
        await check("GET", f"/tasks/{task_id}", "/tasks/{id}", 200, headers=V1)
        await check("GET", "/tasks/missing", "/tasks/{id}", 404, headers=V1)
        await check("POST", f"/tasks/{task_id}:cancel", "/tasks/{id}:cancel", 409, headers=V1)
        await check(
            "POST", "/message:send", "/message:send", 400, json=send_body({"text": 5}), headers=V1
        )
        await check(
            "POST",
            "/message:send",
            "/message:send",
            415,
            content=b'{"message": {}}',
            headers={**V1, "Content-Type": "text/plain"},
        )
        await check("GET", "/v1/tasks/missing", "/v1/tasks/{id}", 404, headers=HEADERS_A)
        await check("GET", "/tasks", "/tasks", 401)
        await check(
            "POST",
            "/",
            "/",
            200,
            json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}},
            headers=V1,
        )
        await check("GET", "/.well-known/agent-card.json", "/.well-known/agent-card.json", 200)
        await check(
            "GET",
            "/agents/nobody/.well-known/agent-card.json",
            "/agents/{agent}/.well-known/agent-card.json",
            404,
        )
        async with http.stream(
            "POST", "/message:stream", json=send_body({"text": "s"}), headers=V1
        ) as response:
            assert response.status_code == 200
            media_type = response.headers["content-type"].split(";")[0]
            assert media_type in documented(spec, "/message:stream", "POST", 200)
            await response.aread()
