"""Hostile input against every service: a clear 4xx in the common shape, service unharmed.

Non-JSON and mis-typed bodies, 10 MB bodies, 100k-level nesting, invalid UTF-8, NUL in
ids and keys (Postgres text cannot hold it), slashes and percent-encoding in path ids,
forged tenant headers and out-of-range stream parameters.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from fuzz_support import (
    ThreadedServer,
    assert_client_error,
    deeply_nested,
    named_fields,
    serve_in_thread,
)

TEN_MB = 10 * 1024 * 1024


@pytest.fixture(scope="module")
def small_limit_event_server(event_backend: dict[str, Any]) -> Iterator[ThreadedServer]:
    """The event service with a 1 MiB request limit (the default is 16 MiB)."""
    from event_service import create_app
    from event_service.settings import Settings

    settings = Settings(**event_backend, max_request_bytes=1024 * 1024)
    with serve_in_thread(create_app(settings)) as server:
        yield server


# Each service: a JSON body route with a valid body, to show it still works afterwards.
VALID_WRITES: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "event": [
        ("/v1/events/publish", {"event": {"topic": "fuzz-hostile", "type": "t"}}),
        ("/v1/events/publish-batch", {"events": [{"topic": "fuzz-hostile", "type": "t"}]}),
        ("/v1/events/ack", {"group": "g", "ids": ["fuzz-hostile=1-0"]}),
    ],
    "memory": [
        ("/v1/working-memory/fuzz-plan", {"key": "k", "value": 1}),
        ("/v1/memory/task-context", {"task_id": "fuzz-task"}),
        ("/v1/memory/sessions", {"name": "s"}),
    ],
    "registry": [
        ("/v1/agents", {"agent_id": "fuzz-agent", "name": "a"}),
        ("/v1/events", {"event_name": "fuzz.event", "topic": "action-requests"}),
    ],
}


# Pytest cannot pick parametrized fixtures dynamically, so each service has its own
# client fixture and each rule below one thin test per service.
@pytest.fixture
def event_client(small_limit_event_server: ThreadedServer) -> Iterator[httpx.Client]:
    with small_limit_event_server.client() as client:
        yield client


@pytest.fixture
def memory_client(memory_server: ThreadedServer) -> Iterator[httpx.Client]:
    with memory_server.client() as client:
        yield client


@pytest.fixture
def registry_client(registry_server: ThreadedServer) -> Iterator[httpx.Client]:
    with registry_server.client() as client:
        yield client


def _still_works(name: str, client: httpx.Client) -> None:
    for path, body in VALID_WRITES[name]:
        r = client.post(path, json=body)
        assert r.status_code < 300, (path, r.status_code, r.text)


HOSTILE_BODIES = [
    pytest.param(b"hello", "application/json", id="not-json"),
    pytest.param(b"", "application/json", id="empty"),
    pytest.param(b"[]", "application/json", id="array"),
    pytest.param(b"null", "application/json", id="null"),
    pytest.param(b'{"event": {"topic": ', "application/json", id="truncated"),
    pytest.param(b'{"a": 1} trailing', "application/json", id="trailing-garbage"),
    pytest.param(b'{"key": "\xff\xfe", "x": "\xc3"}', "application/json", id="invalid-utf8"),
    pytest.param(b"<a>xml</a>", "application/xml", id="xml"),
    pytest.param(b"a=1&b=2", "application/x-www-form-urlencoded", id="form"),
    pytest.param(b"\x00\x01\x02\x03", "application/octet-stream", id="binary"),
    pytest.param(deeply_nested(100_000), "application/json", id="nested-100k"),
    pytest.param(b'{"a":' * 5_000 + b"1" + b"}" * 5_000, "application/json", id="nested-5k"),
]


def _malformed_bodies_are_refused(
    name: str, client: httpx.Client, body: bytes, content_type: str
) -> None:
    for path, _ in VALID_WRITES[name]:
        r = client.post(path, content=body, headers={"Content-Type": content_type})
        error = assert_client_error(r)
        assert "body" in named_fields(error), (path, error)  # says what to fix
    _still_works(name, client)


@pytest.mark.parametrize(("body", "content_type"), HOSTILE_BODIES)
def test_event_service_answers_malformed_bodies_with_a_4xx_and_keeps_working(
    event_client: httpx.Client, body: bytes, content_type: str
) -> None:
    _malformed_bodies_are_refused("event", event_client, body, content_type)


@pytest.mark.parametrize(("body", "content_type"), HOSTILE_BODIES)
def test_memory_service_answers_malformed_bodies_with_a_4xx_and_keeps_working(
    memory_client: httpx.Client, body: bytes, content_type: str
) -> None:
    _malformed_bodies_are_refused("memory", memory_client, body, content_type)


@pytest.mark.parametrize(("body", "content_type"), HOSTILE_BODIES)
def test_registry_service_answers_malformed_bodies_with_a_4xx_and_keeps_working(
    registry_client: httpx.Client, body: bytes, content_type: str
) -> None:
    _malformed_bodies_are_refused("registry", registry_client, body, content_type)


def _ten_megabytes_refused_before_parsing(name: str, client: httpx.Client) -> None:
    path, _ = VALID_WRITES[name][0]
    # Not JSON at all: a 413 (not a 422) shows the body was refused before parsing.
    r = client.post(path, content=b"x" * TEN_MB, headers={"Content-Type": "application/json"})
    assert assert_client_error(r, 413)["code"] == "payload_too_large"

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit counts as it reads
        for _ in range(10):
            yield b"y" * (TEN_MB // 10)

    r = client.post(path, content=chunks(), headers={"Content-Type": "application/json"})
    assert_client_error(r, 413)
    _still_works(name, client)


def test_event_service_refuses_ten_megabyte_bodies_before_parsing(
    event_client: httpx.Client,
) -> None:
    _ten_megabytes_refused_before_parsing("event", event_client)


def test_memory_service_refuses_ten_megabyte_bodies_before_parsing(
    memory_client: httpx.Client,
) -> None:
    _ten_megabytes_refused_before_parsing("memory", memory_client)


def test_registry_service_refuses_ten_megabyte_bodies_before_parsing(
    registry_client: httpx.Client,
) -> None:
    _ten_megabytes_refused_before_parsing("registry", registry_client)


# --- NUL and odd characters in ids ----------------------------------------------------

MEMORY_NUL_REQUESTS = [
    ("GET", "/v1/memory/task-context/a%00b", None, "task_id"),
    ("GET", "/v1/memory/task-context/by-subtask/%00", None, "sub_task_id"),
    ("GET", "/v1/memory/plan-context/by-correlation/c%00", None, "correlation_id"),
    ("DELETE", "/v1/memory/plans/p%00", None, "plan_id"),
    ("GET", "/v1/memory/sessions/s%00", None, "session_id"),
    ("GET", "/v1/memory/plans?session_id=%00", None, "session_id"),
    ("GET", "/v1/working-memory/p%00/k", None, "plan_id"),
    ("GET", "/v1/working-memory/p/k%00", None, "key"),
    ("POST", "/v1/working-memory/p", {"key": "k\x00", "value": 1}, "key"),
    ("POST", "/v1/memory/task-context", {"task_id": "t\x00"}, "task_id"),
    ("POST", "/v1/memory/task-context", {"task_id": "t", "event_type": "e\x00"}, "event_type"),
    (
        "POST",
        "/v1/memory/task-context",
        {
            "task_id": "t",
            "sub_tasks": {
                "s\x00": {"sub_task_id": "s\x00", "event_type": "e", "response_event": "r"}
            },
        },
        "sub_tasks",
    ),
    (
        "POST",
        "/v1/memory/plan-context",
        {"plan_id": "p", "correlation_ids": ["c\x00"]},
        "correlation_ids",
    ),
    ("POST", "/v1/memory/plans", {"goal_event": "g\x00"}, "goal_event"),
    ("POST", "/v1/memory/sessions", {"session_id": "s", "name": "n\x00"}, "name"),
]

REGISTRY_NUL_REQUESTS = [
    ("GET", "/v1/agents/a%00", None, "agent_id"),
    ("PUT", "/v1/agents/a%00/heartbeat", None, "agent_id"),
    ("GET", "/v1/agents?name=%00", None, "name"),
    ("GET", "/v1/agents/discover?requirements=x%00", None, "requirements"),
    ("GET", "/v1/events/e%00", None, "event_name"),
    ("GET", "/v1/events?owner=%00", None, "owner"),
    ("POST", "/v1/agents", {"agent_id": "a\x00", "name": "n"}, "agent_id"),
    ("POST", "/v1/agents", {"agent_id": "a", "name": "n", "metadata": {"k": "\x00"}}, "metadata.k"),
    (
        "POST",
        "/v1/agents",
        {"agent_id": "a", "name": "n", "events_consumed": ["e\x00"]},
        "events_consumed",
    ),
    ("POST", "/v1/events", {"event_name": "e\x00", "topic": "t"}, "event_name"),
    ("POST", "/v1/events", {"event_name": "e", "description": "\x00"}, "description"),
]


def _send(client: httpx.Client, method: str, url: str, body: Any) -> httpx.Response:
    return (
        client.request(method, url, json=body) if body is not None else client.request(method, url)
    )


@pytest.mark.parametrize(("method", "url", "body", "field"), MEMORY_NUL_REQUESTS)
def test_nul_in_memory_ids_and_keys_is_422_naming_the_field(
    memory_client: httpx.Client, method: str, url: str, body: Any, field: str
) -> None:
    error = assert_client_error(_send(memory_client, method, url, body), 422)
    assert field in named_fields(error) and "NUL" in error["message"], error
    _still_works("memory", memory_client)


@pytest.mark.parametrize(("method", "url", "body", "field"), REGISTRY_NUL_REQUESTS)
def test_nul_in_registry_names_and_filters_is_422_naming_the_field(
    registry_client: httpx.Client, method: str, url: str, body: Any, field: str
) -> None:
    error = assert_client_error(_send(registry_client, method, url, body), 422)
    assert field in named_fields(error) and "NUL" in error["message"], error
    _still_works("registry", registry_client)


@pytest.mark.parametrize("task_id", ["a%b", "100% sure", "é/ü?#&", "..%2F..", "a b\tc", "🙂"])
def test_memory_ids_with_percent_signs_and_unicode_round_trip_through_the_path(
    memory_server: ThreadedServer, task_id: str
) -> None:
    with memory_server.client() as client:
        r = client.post("/v1/memory/task-context", json={"task_id": task_id})
        assert r.status_code == 200, r.text
        url = f"/v1/memory/task-context/{quote(task_id, safe='')}"
        got = client.get(url)
        if "/" in task_id:
            # "%2F" is decoded before routing: such ids are not addressable by path.
            assert_client_error(got, 404)
        else:
            assert got.status_code == 200 and got.json()["task_id"] == task_id, got.text


@pytest.mark.parametrize("agent_id", ["a/b", "a%2Fb", "%", "..", "a?b", "a#b"])
def test_registry_agent_ids_with_slashes_or_escapes_never_break_the_service(
    registry_server: ThreadedServer, agent_id: str
) -> None:
    with registry_server.client() as client:
        r = client.post("/v1/agents", json={"agent_id": agent_id, "name": "odd"})
        assert r.status_code in (200, 201), r.text
        got = client.get(f"/v1/agents/{quote(agent_id, safe='')}")
        if got.status_code == 200:
            assert got.json()["agent_id"] == agent_id
        else:
            assert_client_error(got, 404)  # documented: "/" ids are not addressable
        listed = client.get("/v1/agents", params={"name": "odd"}).json()
        assert agent_id in [a["agent_id"] for a in listed]


# --- tenant header ----------------------------------------------------------------------

FORGED_TENANTS = ["a{b}", "a b", "../other", "*", "t" * 10_000, "é", "a,b", "'; DROP TABLE x"]


def _forged_identity_refused(name: str, client: httpx.Client, tenant: str) -> None:
    path, body = VALID_WRITES[name][0]
    headers = {"X-Tenant-ID": tenant.encode()}  # raw UTF-8 bytes, as a hostile client sends
    error = assert_client_error(client.post(path, json=body, headers=headers), 422)
    assert "tenant_id" in named_fields(error)
    for user in ("u{1}", "u" * 10_000):
        error = assert_client_error(client.post(path, json=body, headers={"X-User-ID": user}), 422)
        assert "user_id" in named_fields(error)
    _still_works(name, client)


@pytest.mark.parametrize("tenant", FORGED_TENANTS, ids=lambda t: t[:12])
def test_event_service_refuses_forged_tenant_headers(
    event_client: httpx.Client, tenant: str
) -> None:
    _forged_identity_refused("event", event_client, tenant)


@pytest.mark.parametrize("tenant", FORGED_TENANTS, ids=lambda t: t[:12])
def test_memory_service_refuses_forged_tenant_headers(
    memory_client: httpx.Client, tenant: str
) -> None:
    _forged_identity_refused("memory", memory_client, tenant)


@pytest.mark.parametrize("tenant", FORGED_TENANTS, ids=lambda t: t[:12])
def test_registry_service_refuses_forged_tenant_headers(
    registry_client: httpx.Client, tenant: str
) -> None:
    _forged_identity_refused("registry", registry_client, tenant)


# --- stream parameters ------------------------------------------------------------------

BAD_STREAM_QUERIES = [
    ({"topics": ""}, "topics"),
    ({"topics": "UPPER"}, "topics"),
    ({"topics": "a%00"}, "topics"),
    ({"topics": ",".join(f"t{i}" for i in range(40))}, "topics"),
    ({"topics": "a", "heartbeat": "0"}, "heartbeat"),
    ({"topics": "a", "heartbeat": "-1"}, "heartbeat"),
    ({"topics": "a", "heartbeat": "nan"}, "heartbeat"),
    ({"topics": "a", "heartbeat": "1e400"}, "heartbeat"),
    ({"topics": "a", "group": "g", "visibility_timeout": "0.001"}, "visibility_timeout"),
    ({"topics": "a", "group": "g", "visibility_timeout": "inf"}, "visibility_timeout"),
    ({"topics": "a", "group": "g", "max_deliveries": "0"}, "max_deliveries"),
    ({"topics": "a", "group": "g", "max_deliveries": "9" * 30}, "max_deliveries"),
    ({"topics": "a", "group": "a/b"}, "group"),
    ({"topics": "a", "group": "g" * 500}, "group"),
    ({"topics": "a", "group": "g", "consumer": "\x00"}, "consumer"),
    ({"topics": "a", "from": "yesterday"}, "from"),
    ({"topics": "a", "last_event_id": "garbage"}, "garbage"),
    ({"topics": "a", "last_event_id": "a=" + "9" * 40 + "-0"}, "stream id"),
]


@pytest.mark.parametrize(
    ("params", "named"),
    BAD_STREAM_QUERIES,
    ids=[f"{i}-{n}" for i, (_, n) in enumerate(BAD_STREAM_QUERIES)],
)
def test_out_of_range_stream_parameters_are_422_not_a_stream(
    event_server: ThreadedServer, params: dict[str, str], named: str
) -> None:
    with event_server.client() as client:
        with client.stream("GET", "/v1/events/stream", params=params) as r:
            r.read()
        error = assert_client_error(r, 422)
        assert named in named_fields(error), error
        ok = client.post("/v1/events/publish", json={"event": {"topic": "a", "type": "t"}})
        assert ok.status_code == 200


def _nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


# One JSON value per service, nested ``depth`` levels below the named field.
def _deep_bodies(depth: int) -> dict[str, tuple[str, dict[str, Any], str]]:
    value = _nested(depth)
    return {
        "event": (
            "/v1/events/publish",
            {"event": {"topic": "fuzz-hostile", "type": "t", "data": {"x": value}}},
            "event.data.x",
        ),
        "memory": ("/v1/working-memory/fuzz-plan", {"key": "deep", "value": value}, "value"),
        "registry": (
            "/v1/agents",
            {"agent_id": "fuzz-deep", "name": "a", "metadata": {"x": value}},
            "metadata.x",
        ),
    }


def _one_depth_limit(name: str, client: httpx.Client) -> None:
    from soorma_common.jsonvalue import MAX_JSON_DEPTH

    path, body, field = _deep_bodies(MAX_JSON_DEPTH + 1)[name]
    error = assert_client_error(client.post(path, json=body), 422)
    assert f"nests deeper than {MAX_JSON_DEPTH} levels" in error["message"], error
    assert error["details"][0]["field"].startswith(field), error["details"]
    # The field's own object is a level: its value may nest one level less.
    path, body, _ = _deep_bodies(MAX_JSON_DEPTH - 1)[name]
    r = client.post(path, json=body)
    assert r.status_code < 300, (path, r.status_code, r.text[:300])


def test_event_service_holds_json_to_the_platform_depth_limit(event_client: httpx.Client) -> None:
    _one_depth_limit("event", event_client)


def test_memory_service_holds_json_to_the_platform_depth_limit(
    memory_client: httpx.Client,
) -> None:
    _one_depth_limit("memory", memory_client)


def test_registry_service_holds_json_to_the_platform_depth_limit(
    registry_client: httpx.Client,
) -> None:
    _one_depth_limit("registry", registry_client)
