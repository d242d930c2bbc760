"""Event service properties: arbitrary JSON survives publish -> SSE; bad envelopes are 4xx.

Each property runs against one live server (memory log, and Redis when configured); a
single SSE stream stays open across all examples, so every published event must come
back on it, in order, unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fuzz_support import (
    HYPOTHESIS_SETTINGS,
    WAIT,
    ThreadedServer,
    assert_client_error,
    json_keys,
    named_fields,
    same_json,
)
from hypothesis import example, given, settings
from hypothesis import strategies as st

from soorma.client import verified_tls
from soorma_common.events import is_valid_topic

TOPIC = "fuzz-roundtrip"

# Event data is JSON text to the bus, not a database column: any integer and NUL too.
event_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40)
)
event_data = st.dictionaries(
    st.text(max_size=20),
    st.recursive(
        event_scalars,
        lambda children: (
            st.lists(children, max_size=5) | st.dictionaries(json_keys, children, max_size=5)
        ),
        max_leaves=30,
    ),
    max_size=6,
)


def _nested(depth: int) -> dict[str, Any]:
    value: Any = "bottom"
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return {"deep": value}


def _sse_lines(response: httpx.Response) -> Iterator[str]:
    # Split on LF only, as the SSE spec says. httpx's iter_lines() uses str.splitlines(),
    # which also breaks on U+2028, U+0085, ... inside JSON strings (the round-trip
    # property below pins a U+2028 example).
    pending = b""
    for chunk in response.iter_bytes():
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            yield line.decode().removesuffix("\r")


class SSEReader:
    """Blocking reader of one SSE response: ``next_message()`` returns the parsed envelope."""

    def __init__(self, response: httpx.Response) -> None:
        self._lines = _sse_lines(response)

    def next_frame(self) -> tuple[str, str]:
        event, data = "message", []
        for line in self._lines:
            if not line:
                if data:
                    return event, "\n".join(data)
                event = "message"
                continue
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "event":
                event = value
            elif name == "data":
                data.append(value)
        raise AssertionError("stream ended")

    def next_message(self) -> dict[str, Any]:
        while True:
            event, data = self.next_frame()
            if event == "message":
                parsed: dict[str, Any] = json.loads(data)
                return parsed


@pytest.fixture
def client(event_server: ThreadedServer) -> Iterator[httpx.Client]:
    with event_server.client() as c:
        yield c


@pytest.fixture
def stream(client: httpx.Client) -> Iterator[SSEReader]:
    timeout = httpx.Timeout(WAIT)
    with client.stream(
        "GET", "/v1/events/stream", params={"topics": TOPIC}, timeout=timeout
    ) as response:
        assert response.status_code == 200
        reader = SSEReader(response)
        assert reader.next_frame()[0] == "ready"
        yield reader


def test_arbitrary_json_data_arrives_on_the_stream_exactly_as_published(
    client: httpx.Client, stream: SSEReader
) -> None:
    @settings(max_examples=40, **HYPOTHESIS_SETTINGS)
    @given(data=event_data)
    @example(data={"big": 2**80, "neg": -(2**70), "f": 1.0, "tiny": 5e-324, "z": -0.0})
    @example(data={"unicode": '😀 \u2028 é \x00 \\ "', "": {"": []}})
    @example(data=_nested(150))
    def roundtrip(data: dict[str, Any]) -> None:
        # Sent as raw JSON text (Python's encoder keeps every integer and float exactly).
        body = json.dumps({"event": {"topic": TOPIC, "type": "fuzz.data", "data": data}})
        r = client.post(
            "/v1/events/publish", content=body, headers={"Content-Type": "application/json"}
        )
        assert r.status_code == 200, r.text
        envelope = stream.next_message()
        assert envelope["id"] == r.json()["event_id"]
        assert same_json(envelope["data"], data), (envelope["data"], data)

    roundtrip()


# --- invalid envelopes ------------------------------------------------------------------

VALID = {"topic": "fuzz-invalid", "type": "fuzz.valid", "data": {}}
not_a_string = (
    st.none()
    | st.integers()
    | st.booleans()
    | st.lists(st.integers(), max_size=2)
    | st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)
)
bad_topics = st.text(max_size=80).filter(lambda t: not is_valid_topic(t))


@st.composite
def invalid_envelopes(draw: st.DrawFn) -> tuple[dict[str, Any], str]:
    """An envelope with exactly one thing wrong, and the field the answer must name."""
    event = dict(VALID)
    kind = draw(st.sampled_from(["missing", "wrong_type", "bad_topic", "huge", "data"]))
    if kind == "missing":
        field = draw(st.sampled_from(["type", "topic"]))
        del event[field]
    elif kind == "wrong_type":
        field = draw(st.sampled_from(["type", "topic", "id", "source", "correlation_id"]))
        optional = field == "correlation_id"
        event[field] = draw(not_a_string.filter(lambda v: v is not None or not optional))
    elif kind == "bad_topic":
        field = draw(st.sampled_from(["topic", "response_topic"]))
        event[field] = draw(bad_topics)
    elif kind == "huge":
        field, limit = draw(st.sampled_from([("type", 256), ("id", 128), ("source", 256)]))
        event[field] = "x" * draw(st.integers(min_value=limit + 1, max_value=200_000))
    else:
        field = "data"
        event[field] = draw(
            st.lists(st.integers(), max_size=3) | st.text(max_size=5) | st.integers()
        )
    return event, field


def test_invalid_envelopes_get_a_422_naming_the_field_and_the_bus_keeps_working(
    client: httpx.Client,
) -> None:
    @settings(max_examples=60, **HYPOTHESIS_SETTINGS)
    @given(case=invalid_envelopes(), batch=st.booleans())
    def rejected(case: tuple[dict[str, Any], str], batch: bool) -> None:
        event, field = case
        if batch:
            r = client.post("/v1/events/publish-batch", json={"events": [VALID, event]})
            path = f"events.1.{field}"
        else:
            r = client.post("/v1/events/publish", json={"event": event})
            path = f"event.{field}"
        error = assert_client_error(r, 422)
        assert path in named_fields(error) or (
            field in ("topic", "response_topic") and error["code"] == "invalid_topic"
        ), error
        ok = client.post("/v1/events/publish", json={"event": VALID})
        assert ok.status_code == 200, ok.text

    rejected()


def test_event_data_over_the_payload_limit_is_413_naming_event_data(
    client: httpx.Client,
) -> None:
    big = {"blob": "x" * (256 * 1024 + 1)}
    r = client.post("/v1/events/publish", json={"event": {**VALID, "data": big}})
    error = assert_client_error(r, 413)
    assert error["code"] == "payload_too_large" and "event.data" in named_fields(error)
    r = client.post("/v1/events/publish-batch", json={"events": [VALID, {**VALID, "data": big}]})
    assert "events.1.data" in named_fields(assert_client_error(r, 413))
    assert client.post("/v1/events/publish", json={"event": VALID}).status_code == 200


def test_oversized_data_with_a_huge_integer_is_413_not_a_server_error(
    client: httpx.Client,
) -> None:
    body = (
        '{"event": {"topic": "fuzz-invalid", "type": "t", "data": {"n": '
        + "9" * 30
        + ', "blob": "'
        + "x" * (256 * 1024)
        + '"}}}'
    )
    r = client.post(
        "/v1/events/publish", content=body, headers={"Content-Type": "application/json"}
    )
    assert_client_error(r, 413)


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_non_json_numbers_in_event_data_are_rejected(client: httpx.Client, token: str) -> None:
    body = '{"event": {"topic": "fuzz-invalid", "type": "t", "data": {"x": ' + token + "}}}"
    r = client.post(
        "/v1/events/publish", content=body, headers={"Content-Type": "application/json"}
    )
    assert_client_error(r, 422)


@pytest.mark.asyncio
async def test_sdk_stream_reader_keeps_events_whose_data_holds_unicode_line_separators(
    event_server: ThreadedServer,
) -> None:
    from soorma._sse import stream_frames

    data = {"text": "line\u2028separator \u0085 next"}
    async with httpx.AsyncClient(
        verify=verified_tls(), base_url=event_server.url, timeout=WAIT
    ) as http:
        frames = stream_frames(
            http, "/v1/events/stream", params={"topics": "fuzz-sdk-sse"}, reconnect=False
        )
        ready = await anext(frames)
        assert ready.event == "ready"
        r = await http.post(
            "/v1/events/publish",
            json={"event": {"topic": "fuzz-sdk-sse", "type": "t", "data": data}},
        )
        assert r.status_code == 200
        frame = await anext(frames)
        await frames.aclose()
    assert json.loads(frame.data)["data"] == data
