"""Fuzzing every gateway route: no 5xx, and every error is the A2A error for its case.

Hypothesis generates requests for every route the gateway serves (each JSON-RPC method
by its 1.0 and 0.3 names on every JSON-RPC URL, every HTTP+JSON route with and without
the tenant prefix and the 0.3 ``/v1`` routes, the per-agent routes, the legacy
``/tasks/send`` and the cards): any JSON, near-valid bodies with fields dropped or of the
wrong type, odd ids and versions. The platform behind the gateway is up, so no answer
may be a 5xx and no JSON-RPC error may be -32603 (internal). Fixed cases check the
code of each kind of error. A route the app serves that no generator covers fails
:func:`test_every_route_is_fuzzed`.

Hypothesis drives synchronous code: the requests run in a worker thread (sync httpx)
while the gateway serves them on the test's event loop.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.routing import Mount

from gateway_a2a import create_app
from gateway_a2a.settings import Settings
from soorma.client import verified_tls
from testsupport.gateway_platform import HEADERS_A, Platform

pytestmark = pytest.mark.asyncio(loop_scope="module")

EXAMPLES = 150
METHODS_V1 = [
    "SendMessage",
    "SendStreamingMessage",
    "GetTask",
    "ListTasks",
    "CancelTask",
    "SubscribeToTask",
    "CreateTaskPushNotificationConfig",
    "GetTaskPushNotificationConfig",
    "ListTaskPushNotificationConfigs",
    "DeleteTaskPushNotificationConfig",
    "GetExtendedAgentCard",
]
METHODS_V03 = [
    "message/send",
    "message/stream",
    "tasks/get",
    "tasks/cancel",
    "tasks/resubscribe",
    "tasks/pushNotificationConfig/set",
    "tasks/pushNotificationConfig/get",
    "tasks/pushNotificationConfig/list",
    "tasks/pushNotificationConfig/delete",
    "agent/getAuthenticatedExtendedCard",
]
RPC_URLS = ["/", "/agents/echo-tool", "/agents/echo-tool/", "/agents/nobody/"]
# -32603 (internal error) is missing on purpose: the platform is up (one exception: see
# check_rpc).
RPC_CODES = {-32700, -32600, -32601, -32602, *range(-32009, -32000)}
STREAMING = {"SendStreamingMessage", "SubscribeToTask", "message/stream", "tasks/resubscribe"}

# The HTTP+JSON routes by template: method -> templates. {tenant}, {agent}, {id} and
# {push_id} are filled by the generator.
REST: dict[str, list[str]] = {
    "GET": [
        "/tasks",
        "/tasks/{id}",
        "/tasks/{id}:subscribe",
        "/tasks/{id}/pushNotificationConfigs",
        "/tasks/{id}/pushNotificationConfigs/{push_id}",
        "/extendedAgentCard",
        "/v1/card",
        "/v1/tasks/{id}",
        "/v1/tasks/{id}:subscribe",
        "/v1/tasks/{id}/pushNotificationConfigs",
        "/v1/tasks/{id}/pushNotificationConfigs/{push_id}",
        "/.well-known/agent-card.json",
        "/.well-known/agent.json",
        "/agents/{agent}/.well-known/agent-card.json",
        "/agents/{agent}/extendedAgentCard",
        "/agents/{agent}/tasks",
        "/agents/{agent}/tasks/{id}",
        "/agents/{agent}/tasks/{id}:subscribe",
        "/agents/{agent}/tasks/{id}/pushNotificationConfigs",
        "/agents/{agent}/tasks/{id}/pushNotificationConfigs/{push_id}",
        "/{tenant}/tasks",
        "/{tenant}/tasks/{id}",
        "/{tenant}/tasks/{id}:subscribe",
        "/{tenant}/tasks/{id}/pushNotificationConfigs",
        "/{tenant}/tasks/{id}/pushNotificationConfigs/{push_id}",
        "/{tenant}/extendedAgentCard",
        "/health",
        "/ready",
        "/openapi.json",
        "/docs",
        "/redoc",
    ],
    "POST": [
        "/message:send",
        "/message:stream",
        "/tasks/{id}:cancel",
        "/tasks/{id}:subscribe",
        "/tasks/{id}/pushNotificationConfigs",
        "/v1/message:send",
        "/v1/message:stream",
        "/v1/tasks/{id}:cancel",
        "/v1/tasks/{id}:subscribe",
        "/v1/tasks/{id}/pushNotificationConfigs",
        "/agents/{agent}/message:send",
        "/agents/{agent}/message:stream",
        "/agents/{agent}/tasks/{id}:cancel",
        "/agents/{agent}/tasks/{id}:subscribe",
        "/agents/{agent}/tasks/{id}/pushNotificationConfigs",
        "/{tenant}/message:send",
        "/{tenant}/message:stream",
        "/{tenant}/tasks/{id}:cancel",
        "/{tenant}/tasks/{id}:subscribe",
        "/{tenant}/tasks/{id}/pushNotificationConfigs",
        "/tasks/send",
    ],
    "DELETE": [
        "/tasks/{id}/pushNotificationConfigs/{push_id}",
        "/v1/tasks/{id}/pushNotificationConfigs/{push_id}",
        "/agents/{agent}/tasks/{id}/pushNotificationConfigs/{push_id}",
        "/{tenant}/tasks/{id}/pushNotificationConfigs/{push_id}",
    ],
}

MESSAGE = {
    "messageId": "m-1",
    "role": "ROLE_USER",
    "parts": [{"text": "hi"}],
    "metadata": {"skill": "echo"},
}
VALID_PARAMS: dict[str, dict[str, Any]] = {
    "message": {"message": MESSAGE},
    "task": {"id": "no-such-task"},
    "list": {"pageSize": 5},
    "push": {"taskId": "no-such-task", "id": "p-1", "url": "http://127.0.0.1:9/hook"},
    "legacy": {"id": "t-1", "message": {"role": "user", "parts": [{"text": "hi"}]}},
}

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**40), max_value=2**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3)
    ),
    max_leaves=8,
)


@st.composite
def near_valid(draw: Any) -> Any:
    """A valid-looking body with one field dropped or replaced by any JSON value."""
    body = json.loads(json.dumps(draw(st.sampled_from(list(VALID_PARAMS.values())))))
    target = body
    while isinstance(target, dict) and target and draw(st.booleans()):
        key = draw(st.sampled_from(sorted(target)))
        if not isinstance(target[key], dict | list):
            break
        target = target[key] if isinstance(target[key], dict) else target
        if not isinstance(target, dict):
            break
    if isinstance(target, dict) and target:
        key = draw(st.sampled_from(sorted(target)))
        if draw(st.booleans()):
            del target[key]
        else:
            target[key] = draw(json_values)
    return body


bodies = st.one_of(json_values, near_valid())
ids = st.one_of(
    st.just("no-such-task"),
    st.text(
        alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="/?#"),
        min_size=1,
        max_size=20,
    ),
)
versions = st.sampled_from([None, "1.0", "0.3", "2.0", "x"])


def headers(version: str | None) -> dict[str, str]:
    return {**HEADERS_A, **({"A2A-Version": version} if version is not None else {})}


def first_payload(response: httpx.Response) -> Any:
    """The JSON body, or the first SSE event's data; None for HTML/text answers."""
    kind = response.headers.get("content-type", "")
    if "text/event-stream" in kind:
        for line in response.iter_lines():
            if line.startswith("data:"):
                return json.loads(line.removeprefix("data:"))
        return None
    if "json" in kind:
        return json.loads(response.read() or b"null")
    return None


def check_rpc(response: httpx.Response, body: Any) -> None:
    assert response.status_code < 500, (body, response.status_code, response.text[:300])
    payload = first_payload(response)
    if isinstance(payload, dict) and "error" in payload:
        code = payload["error"].get("code")
        if code == -32603 and isinstance(body, dict) and body.get("method") in METHODS_V03:
            # a2a-sdk's 0.3 layer reports errors 0.3 lacks (-32009 version not
            # supported) as -32603 for 0.3 clients, by design: only that one.
            assert "is not supported by this handler" in payload["error"]["message"], payload
            return
        assert code in RPC_CODES, (body, payload)


def check_rest(response: httpx.Response, method: str, path: str, body: Any) -> None:
    assert response.status_code < 500, (method, path, body, response.text[:300])
    if response.status_code >= 400 and "json" in response.headers.get("content-type", ""):
        error = json.loads(response.read()).get("error")
        assert isinstance(error, dict) and error.get("message"), (method, path, error)


def fill(template: str, draw: Any) -> str:
    values = {
        "tenant": quote(draw(st.sampled_from(["tenant-a", "tenant-b", "x"])), safe=""),
        "agent": draw(st.sampled_from(["echo-tool", "reviewer", "nobody"])),
        "id": quote(draw(ids), safe=""),
        "push_id": quote(draw(ids), safe=""),
    }
    return re.sub(r"\{(\w+)\}", lambda m: values[m.group(1)], template)


async def run_in_thread(platform: Platform, fuzz: Any) -> None:
    def work() -> None:
        with httpx.Client(verify=verified_tls(), base_url=platform.url, timeout=10) as http:
            fuzz(http)

    await asyncio.to_thread(work)


HYPOTHESIS = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)


async def test_jsonrpc_methods_fuzzed(platform: Platform):
    @HYPOTHESIS
    @given(
        url=st.sampled_from(RPC_URLS),
        method=st.one_of(st.sampled_from(METHODS_V1 + METHODS_V03), st.text(max_size=12)),
        params=bodies,
        request_id=st.one_of(st.integers(), st.text(max_size=5), st.none()),
        version=versions,
        envelope=st.sampled_from(["ok", "no-jsonrpc", "params-any", "batch", "raw"]),
        raw=st.binary(max_size=30),
    )
    def fuzz(
        http: httpx.Client,
        url: str,
        method: str,
        params: Any,
        request_id: Any,
        version: str | None,
        envelope: str,
        raw: bytes,
    ) -> None:
        body: Any = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        if envelope == "no-jsonrpc":
            del body["jsonrpc"]
        elif envelope == "batch":
            body = [body]
        if envelope == "raw":
            content = raw
        else:
            content = json.dumps(body).encode()
        kind = {"Content-Type": "application/json"}
        with http.stream("POST", url, content=content, headers={**headers(version), **kind}) as r:
            check_rpc(r, body)

    await run_in_thread(platform, fuzz)


async def test_rest_routes_fuzzed(platform: Platform):
    @HYPOTHESIS
    @given(
        route=st.sampled_from([(m, t) for m, templates in REST.items() for t in templates]),
        body=bodies,
        query=st.dictionaries(
            st.sampled_from(["pageSize", "pageToken", "contextId", "status", "historyLength"]),
            st.text(max_size=6),
            max_size=3,
        ),
        version=versions,
        data=st.data(),
    )
    def fuzz(
        http: httpx.Client,
        route: tuple[str, str],
        body: Any,
        query: dict[str, str],
        version: str | None,
        data: Any,
    ) -> None:
        method, template = route
        path = fill(template, data.draw)
        content = json.dumps(body).encode() if method == "POST" else None
        kind = {"Content-Type": "application/json"} if content is not None else {}
        with http.stream(
            method, path, params=query, content=content, headers={**headers(version), **kind}
        ) as r:
            check_rest(r, method, path, body)

    await run_in_thread(platform, fuzz)


async def test_error_codes_for_each_case(platform: Platform):
    """The code of each kind of error, on both bindings (fixed cases)."""
    v1 = {**HEADERS_A, "A2A-Version": "1.0"}
    async with httpx.AsyncClient(
        verify=verified_tls(), base_url=platform.url, headers=v1, timeout=30
    ) as http:

        async def rpc(method: str, params: Any, url: str = "/") -> int:
            body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
            version = "0.3" if "/" in method else "1.0"
            answer = await http.post(url, json=body, headers={"A2A-Version": version})
            assert answer.status_code == 200, answer.text
            return int(answer.json()["error"]["code"])

        for method in ("GetTask", "CancelTask", "tasks/get", "tasks/cancel"):
            assert await rpc(method, {"id": "no-such-task"}) == -32001, method
        assert await rpc("NoSuchMethod", {}) == -32601
        for url in RPC_URLS[1:3]:
            assert await rpc("GetTask", {"id": "no-such-task"}, url) == -32001, url
        assert await rpc("GetTask", {"id": "no-such-task"}, "/agents/nobody/") in (-32001, -32602)
        unsupported = await http.post(
            "/",
            json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}},
            headers={"A2A-Version": "9.9"},
        )
        assert unsupported.json()["error"]["code"] == -32009
        assert await rpc("GetTask", "not an object") in (-32602, -32600)
        assert await rpc("SendMessage", {"message": {**MESSAGE, "parts": []}}) == -32602
        parse = await http.post(
            "/", content=b"{not json", headers={"Content-Type": "application/json"}
        )
        assert parse.json()["error"]["code"] == -32700
        assert (await http.get("/tasks/no-such-task")).status_code == 404
        old = await http.get("/v1/tasks/no-such-task", headers={"A2A-Version": "0.3"})
        assert old.status_code == 404, old.text
        assert (await http.get("/tasks/x", headers={"A2A-Version": "9.9"})).status_code == 400
        assert (await http.post("/tasks/no-such-task:cancel", json={})).status_code == 404
        assert (
            await http.post(
                "/message:send", content=b"{", headers={"Content-Type": "application/json"}
            )
        ).status_code == 400
        assert (await http.get("/agents/nobody/.well-known/agent-card.json")).status_code == 404
        legacy = await http.post("/tasks/send", json={"id": 5})
        assert 400 <= legacy.status_code < 500, legacy.text


async def test_every_route_is_fuzzed(tmp_path: Any):
    """Every (method, path) the app serves is one the generators above cover."""
    app = create_app(Settings(gateway_database_url=f"sqlite+aiosqlite:///{tmp_path}/g.db"))
    served: set[tuple[str, str]] = set()

    def walk(routes: list[Any], prefix: str = "") -> None:
        for route in routes:
            if isinstance(route, Mount):
                walk(route.routes, prefix + route.path)
                continue
            for method in getattr(route, "methods", None) or []:
                if method != "HEAD":
                    served.add((method, prefix + route.path))

    walk(app.routes)
    covered = {(m, t) for m, templates in REST.items() for t in templates}
    covered |= {("POST", url) for url in RPC_URLS}
    covered |= {("POST", "/agents/{agent}"), ("POST", "/agents/{agent}/")}
    assert served - covered == set()
