"""What event ``data`` may hold: any JSON (integers of any size), never NaN or Infinity."""

from __future__ import annotations

import json

import pytest
from event_sse_client import SSEStream
from event_stack import Service

pytestmark = pytest.mark.asyncio

JSON = {"content-type": "application/json"}
# Python's parser reads all of these; none is JSON, and 1e400 overflows to infinity.
NON_FINITE = ["NaN", "Infinity", "-Infinity", "1e400", "-1e400"]


async def test_non_finite_numbers_in_data_are_422_naming_the_value(service: Service) -> None:
    for token in NON_FINITE:
        body = (
            '{"event": {"topic": "business-facts", "type": "reading", '
            '"data": {"readings": [1.5, ' + token + "]}}}"
        )
        r = await service.client.post("/v1/events/publish", content=body, headers=JSON)
        assert r.status_code == 422, (token, r.text)
        error = r.json()["error"]
        assert error["code"] == "validation_error"
        assert "event.data.readings.1" in error["message"], error
        assert "NaN/Infinity" in error["message"], error
        assert [d["field"] for d in error["details"]] == ["event.data.readings.1"]


async def test_a_batch_with_one_non_finite_number_is_rejected_whole(service: Service) -> None:
    body = (
        '{"events": [{"topic": "business-facts", "type": "ok"}, '
        '{"topic": "business-facts", "type": "bad", "data": {"x": {"y": NaN}}}]}'
    )
    r = await service.client.post("/v1/events/publish-batch", content=body, headers=JSON)
    assert r.status_code == 422, r.text
    assert "events.1.data.x.y" in r.json()["error"]["message"]
    # Nothing of the batch was appended: the first event on the topic is the marker.
    async with SSEStream(service.client, topics="business-facts", from_="earliest") as stream:
        await service.publish("business-facts", "marker")
        assert (await stream.next()).json()["type"] == "marker"


async def test_big_integers_and_text_naming_nan_arrive_exactly_as_sent(
    service: Service,
) -> None:
    # Text holding "NaN"/"Infinity" takes the slower check and must pass it unchanged;
    # integers beyond 64 bits are valid JSON and are kept digit for digit.
    data = {
        "note": "NaN and -Infinity are not JSON",
        "big": 2**80,
        "neg": -(10**30),
        "ratio": 0.1,
        "nested": [{"NaN": "Infinity"}],
    }
    async with SSEStream(service.client, topics="business-facts") as stream:
        r = await service.client.post(
            "/v1/events/publish",
            headers=JSON,
            content=json.dumps({"event": {"topic": "business-facts", "type": "t", "data": data}}),
        )
        assert r.status_code == 200, r.text
        frame = await stream.next()
    assert frame.json()["data"] == data
    assert str(2**80) in frame.data and str(-(10**30)) in frame.data


async def test_oversized_data_holding_a_huge_integer_is_413_not_a_server_error(
    service: Service,
) -> None:
    limit = service.settings.max_payload_bytes
    body = (
        '{"event": {"topic": "business-facts", "type": "t", "data": {"n": '
        + "9" * 30
        + ', "blob": "'
        + "x" * limit
        + '"}}}'
    )
    r = await service.client.post("/v1/events/publish", content=body, headers=JSON)
    assert r.status_code == 413, r.text
    error = r.json()["error"]
    assert error["code"] == "payload_too_large"
    assert error["details"]["field"] == "event.data"
    assert error["details"]["size"] > limit
