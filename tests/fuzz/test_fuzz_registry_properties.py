"""Registry properties: invalid JSON Schemas are refused with 422 schema_invalid, valid ones
are stored and read back unchanged. Runs on SQLite and, when configured, PostgreSQL.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fuzz_support import (
    HYPOTHESIS_SETTINGS,
    ThreadedServer,
    assert_client_error,
    json_scalars,
    same_json,
    storable_chars,
)
from hypothesis import example, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

names = st.text(alphabet=storable_chars, min_size=1, max_size=30)
TYPES = ["null", "boolean", "object", "array", "number", "string", "integer"]


def _valid_schemas() -> st.SearchStrategy[dict[str, Any]]:
    leaf = st.fixed_dictionaries(
        {"type": st.sampled_from(TYPES)},
        optional={
            "description": st.text(alphabet=storable_chars, max_size=30),
            "enum": st.lists(json_scalars, min_size=1, max_size=4),
            "minimum": st.integers(-1000, 1000) | st.floats(-1e6, 1e6),
            "minLength": st.integers(0, 100),
            "pattern": st.sampled_from(["^a", "[0-9]+", "^x.*y$", ".*"]),
            "format": st.sampled_from(["date-time", "email", "uuid"]),
        },
    )
    return st.recursive(
        leaf,
        lambda inner: (
            st.fixed_dictionaries(
                {
                    "type": st.just("object"),
                    "properties": st.dictionaries(names, inner, max_size=4),
                },
                optional={
                    "required": st.lists(names, max_size=3, unique=True),
                    "additionalProperties": st.booleans() | inner,
                },
            )
            | st.fixed_dictionaries(
                {"type": st.just("array"), "items": inner}, optional={"minItems": st.integers(0, 5)}
            )
        ),
        max_leaves=8,
    )


# One keyword given a value of the wrong kind: each is invalid under the draft 2020-12
# metaschema, wherever in the schema it sits.
_BROKEN_KEYWORDS: list[tuple[str, st.SearchStrategy[Any]]] = [
    (
        "type",
        st.integers()
        | st.sampled_from(["str", "int", "float", "dict", ""])
        | st.lists(st.integers(), min_size=1, max_size=2),
    ),
    ("minimum", st.text(max_size=5) | st.lists(st.integers(), max_size=2) | st.booleans()),
    (
        "minLength",
        st.integers(max_value=-1)
        | st.floats(0.5, 9.5).filter(lambda f: f % 1)
        | st.text(max_size=3),
    ),
    (
        "required",
        st.integers() | st.text(max_size=3) | st.lists(st.integers(), min_size=1, max_size=3),
    ),
    ("properties", st.integers() | st.text(max_size=3) | st.lists(st.integers(), max_size=2)),
    ("enum", st.integers() | st.text(max_size=3) | st.booleans()),
    ("pattern", st.sampled_from(["(", "[a-", "*", "a{2,1}", "(?P<x"])),
    ("items", st.integers() | st.text(max_size=3)),
]


@st.composite
def invalid_schemas(draw: st.DrawFn) -> dict[str, Any]:
    keyword, values = draw(st.sampled_from(_BROKEN_KEYWORDS))
    broken: dict[str, Any] = {keyword: draw(values)}
    # Bury it at a random place inside an otherwise valid schema.
    for _ in range(draw(st.integers(0, 3))):
        broken = draw(
            st.sampled_from(
                [
                    {"type": "object", "properties": {draw(names): broken}},
                    {"type": "array", "items": broken},
                    {"allOf": [{"type": "object"}, broken]},
                ]
            )
        )
    try:  # the strategy must only produce schemas the metaschema really rejects
        Draft202012Validator.check_schema(broken)
    except SchemaError:
        return broken
    raise AssertionError(f"strategy produced a valid schema: {broken!r}")


@pytest.fixture
def client(registry_server: ThreadedServer) -> Iterator[httpx.Client]:
    with registry_server.client() as c:
        yield c


def test_invalid_json_schemas_are_refused_with_schema_invalid(client: httpx.Client) -> None:
    @settings(max_examples=40, **HYPOTHESIS_SETTINGS)
    @given(
        schema=invalid_schemas(),
        field=st.sampled_from(["payload_schema", "response_schema"]),
        in_agent=st.booleans(),
    )
    @example(
        schema={"type": "object", "properties": {"x": {"minimum": "1"}}},
        field="payload_schema",
        in_agent=False,
    )
    def refused(schema: dict[str, Any], field: str, in_agent: bool) -> None:
        event = {"event_name": "fuzz.bad", "topic": "action-requests", field: schema}
        if in_agent:
            r = client.post(
                "/v1/agents",
                json={
                    "agent_id": "fuzz-bad-agent",
                    "name": "bad",
                    "capabilities": [{"task_name": "t", "consumed_event": event}],
                },
            )
        else:
            r = client.post("/v1/events", json=event)
        error = assert_client_error(r, 422)
        assert error["code"] == "schema_invalid", error
        assert error["details"]["field"] == field and error["details"]["event_name"] == "fuzz.bad"
        # Nothing was stored, and the registry still answers.
        assert client.get("/v1/events/fuzz.bad").status_code == 404
        assert client.get("/v1/agents/fuzz-bad-agent").status_code == 404

    refused()


def test_valid_json_schemas_are_stored_and_read_back_unchanged(client: httpx.Client) -> None:
    @settings(max_examples=30, **HYPOTHESIS_SETTINGS)
    @given(payload=_valid_schemas(), response=st.none() | _valid_schemas())
    def accepted(payload: dict[str, Any], response: dict[str, Any] | None) -> None:
        Draft202012Validator.check_schema(payload)  # the strategy's own promise
        event = {
            "event_name": "fuzz.good",
            "topic": "business-facts",
            "payload_schema": payload,
            "response_schema": response,
        }
        r = client.post(
            "/v1/events", content=json.dumps(event), headers={"Content-Type": "application/json"}
        )
        assert r.status_code == 201, r.text
        got = client.get("/v1/events/fuzz.good").json()
        assert same_json(got["payload_schema"], payload)
        assert same_json(got["response_schema"], response)

    accepted()


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"type": "object", "minimum": 123456789012345678901234567890}', "64-bit"),
        ('{"minimum": NaN}', "NaN"),
        ('{"maximum": Infinity}', "NaN/Infinity"),
        ("{" + '"items": {' * 200 + "}" * 200 + "}", "deeper than"),
    ],
)
def test_schemas_no_store_can_keep_are_refused_with_schema_invalid(
    client: httpx.Client, raw: str, expected: str
) -> None:
    body = '{"event_name": "fuzz.odd", "topic": "a", "payload_schema": ' + raw + "}"
    r = client.post("/v1/events", content=body, headers={"Content-Type": "application/json"})
    error = assert_client_error(r, 422)
    assert error["code"] == "schema_invalid" and expected in error["message"], error
    listing = client.get("/v1/events")
    assert listing.status_code == 200, listing.text
    assert all(e["event_name"] != "fuzz.odd" for e in listing.json())
