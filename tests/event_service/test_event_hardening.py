"""Input found by attacking the service: bounded, answered with a 4xx naming the field."""

from __future__ import annotations

import asyncio
import fnmatch
import json
import re
import uuid
from typing import Any

import pytest
from event_sse_client import SSEStream
from event_stack import Service
from hypothesis import given, settings
from hypothesis import strategies as st

from event_service.ids import DELIVERY_ID_PATTERN, STREAM_ID_PATTERN, parse_id, parse_ref
from event_service.routes import MAX_EVENT_TYPES
from event_service.sse import TypeFilter
from soorma_common.errors import ValidationFailed
from soorma_common.events import TOPIC_PATTERN
from soorma_common.jsonvalue import MAX_JSON_DEPTH

JSON = {"content-type": "application/json"}


def nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


async def _stream_status(service: Service, **params: Any) -> tuple[int, dict[str, Any]]:
    """Status and (for an error) body of opening a stream; a 200 stream is closed at once."""
    async with service.client.stream("GET", "/v1/events/stream", params=params) as r:
        if r.status_code == 200:
            return 200, {}
        return r.status_code, json.loads(await r.aread())


@pytest.mark.asyncio
async def test_event_data_nested_beyond_the_platform_limit_is_422_naming_the_field(
    service: Service,
) -> None:
    too_deep = nested(MAX_JSON_DEPTH + 1)
    r = await service.client.post(
        "/v1/events/publish",
        json={"event": {"topic": "business-facts", "type": "deep", "data": {"x": too_deep}}},
    )
    assert r.status_code == 422, r.text[:300]
    error = r.json()["error"]
    assert f"nests deeper than {MAX_JSON_DEPTH} levels" in error["message"]
    assert error["details"][0]["field"].startswith("event.data.x."), error["details"]

    r = await service.client.post(
        "/v1/events/publish-batch",
        json={
            "events": [
                {"topic": "business-facts", "type": "ok"},
                {"topic": "business-facts", "type": "deep", "data": {"x": too_deep}},
            ]
        },
    )
    assert r.status_code == 422, r.text[:300]
    assert r.json()["error"]["details"][0]["field"].startswith("events.1.data.x.")

    # Up to the limit is fine (the "x" object is one of the levels).
    await service.publish("business-facts", "deep-ok", {"x": nested(MAX_JSON_DEPTH - 1)})


@pytest.mark.asyncio
async def test_dead_letters_holding_integers_beyond_64_bits_are_listed(service: Service) -> None:
    big = {"big": 2**80, "neg": -(10**30)}
    async with SSEStream(
        service.client,
        topics="action-requests",
        group="g",
        max_deliveries=1,
        visibility_timeout=600,
    ) as stream:
        published = await service.publish("action-requests", "poison", big)
        frame = await stream.next()
        assert await service.nack("g", [frame.id or ""], "boom") == 1
        # Dead-lettered by the open stream's next claim pass.
        async with asyncio.timeout(15):
            while True:
                r = await service.client.get("/v1/events/dlq", params={"topic": "action-requests"})
                assert r.status_code == 200, r.text[:300]
                if r.json()["events"]:
                    break
                await asyncio.sleep(0.05)
    [dead] = r.json()["events"]
    assert dead["event"]["id"] == published["event_id"]
    assert dead["event"]["data"] == big
    assert str(2**80) in r.text  # digit for digit, not a float


@pytest.mark.asyncio
@pytest.mark.parametrize("heartbeat", ["1e-300", "0.01", "0.49", "0"])
async def test_heartbeat_below_half_a_second_is_422(service: Service, heartbeat: str) -> None:
    status, body = await _stream_status(service, topics="system-events", heartbeat=heartbeat)
    assert status == 422, (heartbeat, body)
    assert "heartbeat" in json.dumps(body["error"]["details"])


@pytest.mark.asyncio
async def test_heartbeat_of_half_a_second_streams(service: Service) -> None:
    async with SSEStream(service.client, topics="system-events", heartbeat=0.5) as stream:
        await stream.next("heartbeat")


@pytest.mark.asyncio
async def test_event_types_are_bounded_in_count_and_length(service: Service) -> None:
    too_many = ",".join(f"type{i}.*" for i in range(MAX_EVENT_TYPES + 1))
    status, body = await _stream_status(service, topics="system-events", event_types=too_many)
    assert status == 422, body
    assert "event_types" in json.dumps(body["error"])

    too_long = "a" * 257 + "*"
    for group in (None, "g"):
        status, body = await _stream_status(
            service,
            topics="system-events",
            event_types=f"ok.*,{too_long}",
            **({"group": group} if group else {}),
        )
        assert status == 422, body
        assert "event_types" in json.dumps(body["error"])

    at_limit = ",".join(f"type{i}.{'x' * 240}*" for i in range(MAX_EVENT_TYPES))
    status, body = await _stream_status(service, topics="system-events", event_types=at_limit)
    assert status == 200, body


def test_event_type_globs_are_compiled_when_the_stream_opens_not_per_event(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Fresh patterns: nothing in any compile cache yet.
    run = uuid.uuid4().hex
    patterns = [f"{run}.{i}.*.done" for i in range(20)] + [f"{run}.[ab]?.x"]
    accept = TypeFilter(patterns)

    def no_compiling(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("glob compiled while events flow")

    monkeypatch.setattr(fnmatch, "translate", no_compiling)
    monkeypatch.setattr(fnmatch, "_compile_pattern", no_compiling)
    monkeypatch.setattr(re, "compile", no_compiling)
    assert accept(f"{run}.3.anything.done")
    assert accept(f"{run}.a1.x")
    assert not accept(f"{run}.3.anything.failed")
    assert not accept("other.type")


def _resolve(spec: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = spec["components"]["schemas"][node["$ref"].rsplit("/", 1)[-1]]
    return node


@pytest.mark.asyncio
async def test_openapi_declares_the_id_and_topic_formats_of_ack_nack_dlq_and_replay(
    service: Service,
) -> None:
    spec = (await service.client.get("/openapi.json")).json()

    def body(path: str) -> dict[str, Any]:
        content = spec["paths"][path]["post"]["requestBody"]["content"]["application/json"]
        return _resolve(spec, content["schema"])["properties"]

    for path in ("/v1/events/ack", "/v1/events/nack"):
        assert body(path)["ids"]["items"]["pattern"] == DELIVERY_ID_PATTERN, path
    replay = body("/v1/events/dlq/replay")
    assert replay["ids"]["items"]["pattern"] == STREAM_ID_PATTERN
    assert replay["topic"]["pattern"] == TOPIC_PATTERN.pattern
    [topic] = [
        p for p in spec["paths"]["/v1/events/dlq"]["get"]["parameters"] if p["name"] == "topic"
    ]
    assert topic["schema"]["pattern"] == TOPIC_PATTERN.pattern


@settings(max_examples=200, derandomize=True, database=None, deadline=None)
@given(token=st.from_regex(DELIVERY_ID_PATTERN, fullmatch=True))
def test_every_id_the_declared_format_allows_is_accepted(token: str) -> None:
    topic, stream_id = parse_ref(token)
    assert f"{topic}={stream_id}" == token
    parse_id(stream_id)


@pytest.mark.parametrize(
    "token",
    [
        "a=\u0661\u0662-0",  # Arabic-Indic digits: \d matches them, Redis does not
        "a=" + "9" * 20 + "-0",  # beyond 64 bits
        "A=1-0",
        "a=1",
        "a=1-",
        "=1-0",
        "a=-1-0",
    ],
)
def test_ids_outside_the_declared_format_are_refused(token: str) -> None:
    assert re.fullmatch(DELIVERY_ID_PATTERN, token) is None
    with pytest.raises(ValidationFailed):
        parse_ref(token)


@pytest.mark.asyncio
async def test_streams_with_the_same_event_types_share_one_compiled_filter() -> None:
    from event_service.sse import type_filter

    patterns = [f"{uuid.uuid4().hex}.*", "b.?"]
    first = await type_filter(patterns)
    assert await type_filter(list(patterns)) is first
    assert first(patterns[0][:-1] + "done") and not first("c.x")
