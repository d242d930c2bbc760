"""The published OpenAPI document says what the publish routes accept and answer."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from event_service import create_app
from soorma_common.events import TOPIC_PATTERN

PUBLISH = {
    "/v1/events/publish": lambda event: {"event": event},
    "/v1/events/publish-batch": lambda event: {"events": [event]},
}


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    return create_app().openapi()


def _body_schema(spec: dict[str, Any], path: str) -> dict[str, Any]:
    body = spec["paths"][path]["post"]["requestBody"]
    assert body["required"] is True
    schema: dict[str, Any] = body["content"]["application/json"]["schema"]
    return schema


@pytest.mark.parametrize("path", PUBLISH)
def test_publish_routes_document_their_error_answers_in_the_common_shape(
    spec: dict[str, Any], path: str
) -> None:
    responses = spec["paths"][path]["post"]["responses"]
    assert {"200", "413", "422", "503"} <= set(responses)
    for status in ("413", "422", "503"):
        schema = responses[status]["content"]["application/json"]["schema"]
        assert schema == {"$ref": "#/components/schemas/ErrorBody"}


@pytest.mark.parametrize("path", PUBLISH)
def test_documented_publish_bodies_accept_and_refuse_what_the_service_does(
    spec: dict[str, Any], path: str
) -> None:
    # Self-contained (no pydantic "#/$defs" references, which would not resolve inside
    # the OpenAPI document), so a client or fuzzer can generate bodies from it.
    schema = _body_schema(spec, path)
    assert "$defs" not in str(schema)
    validator = jsonschema.Draft202012Validator(schema)
    wrap = PUBLISH[path]

    valid = {
        "topic": "business-facts",
        "type": "order.placed",
        "data": {"n": 1},
        "response_topic": "action-results",
    }
    validator.validate(wrap(valid))
    for bad in (
        {**valid, "topic": "Bad Topic!"},
        {**valid, "response_topic": "-x"},
        {k: v for k, v in valid.items() if k != "type"},
    ):
        assert not validator.is_valid(wrap(bad)), bad

    # snake_case names, as everywhere else in the API (camelCase is accepted too).
    envelope = spec["components"]["schemas"]["EventEnvelope"]
    assert envelope["properties"]["topic"]["pattern"] == TOPIC_PATTERN.pattern
    assert envelope["properties"]["response_topic"]["pattern"] == TOPIC_PATTERN.pattern
