"""Memory service properties: any JSON value round-trips through working memory exactly.

Runs on SQLite and, when configured, PostgreSQL (one database per module).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from fuzz_support import (
    HYPOTHESIS_SETTINGS,
    ThreadedServer,
    assert_client_error,
    json_values,
    named_fields,
    same_json,
    storable_chars,
)
from hypothesis import example, given, settings
from hypothesis import strategies as st

# Keys may hold '/', ':', '%', spaces, any unicode but NUL and "\n" (both 422, tested
# below); "." and ".." segments would be normalised away by URL handling before they
# reach any server, so keep them out.
keys = st.text(alphabet=storable_chars, min_size=1, max_size=60).filter(
    lambda k: "\n" not in k and not any(part in (".", "..") for part in k.split("/"))
)


@pytest.fixture
def client(memory_server: ThreadedServer) -> Iterator[httpx.Client]:
    with memory_server.client() as c:
        yield c


def _key_url(plan: str, key: str) -> str:
    return f"/v1/working-memory/{quote(plan, safe='')}/{quote(key, safe='/')}"


def test_any_json_value_round_trips_through_working_memory(client: httpx.Client) -> None:
    @settings(max_examples=40, **HYPOTHESIS_SETTINGS)
    @given(key=keys, value=json_values())
    @example(key="a/b:c%2F d", value={"f": 1.0, "i": 1, "s": "1", "b": True, "n": None})
    @example(key="big", value=[2**63 - 1, -(2**63), 5e-324, -0.0, 1.7976931348623157e308])
    @example(key="unicode", value='😀 \u2028 é \\ " \x01')
    def roundtrip(key: str, value: Any) -> None:
        body = json.dumps({"key": key, "value": value})
        r = client.post(
            "/v1/working-memory/fuzz-plan",
            content=body,
            headers={"Content-Type": "application/json"},
        )
        assert r.status_code == 200, r.text
        assert same_json(r.json()["value"], value)
        got = client.get(_key_url("fuzz-plan", key))
        assert got.status_code == 200, got.text
        assert got.json()["key"] == key
        assert same_json(got.json()["value"], value), (got.json()["value"], value)

    roundtrip()


@pytest.mark.parametrize(
    ("raw", "what"),
    [
        ("123456789012345678901234567890", "64-bit"),
        ("NaN", "NaN"),
        ("Infinity", "NaN/Infinity"),
        ("-Infinity", "NaN/Infinity"),
        ("1e400", "NaN/Infinity"),
        ('{"a": [1, NaN]}', "value.a.1"),
    ],
)
def test_values_the_store_cannot_keep_exactly_are_422_and_nothing_is_stored(
    client: httpx.Client, raw: str, what: str
) -> None:
    body = '{"key": "unstorable", "value": ' + raw + "}"
    r = client.post(
        "/v1/working-memory/fuzz-plan", content=body, headers={"Content-Type": "application/json"}
    )
    error = assert_client_error(r, 422)
    assert what in named_fields(error), error
    assert client.get(_key_url("fuzz-plan", "unstorable")).status_code == 404


def test_records_with_arbitrary_json_state_round_trip(client: httpx.Client) -> None:
    @settings(max_examples=20, **HYPOTHESIS_SETTINGS)
    @given(
        data=st.dictionaries(
            st.text(alphabet=storable_chars, max_size=10), json_values(), max_size=4
        ),
        state=st.dictionaries(
            st.text(alphabet=storable_chars, max_size=10), json_values(), max_size=4
        ),
    )
    def roundtrip(data: dict[str, Any], state: dict[str, Any]) -> None:
        body = json.dumps({"task_id": "fuzz-task", "data": data, "state": state})
        r = client.post(
            "/v1/memory/task-context", content=body, headers={"Content-Type": "application/json"}
        )
        assert r.status_code == 200, r.text
        got = client.get("/v1/memory/task-context/fuzz-task").json()
        assert same_json(got["data"], data) and same_json(got["state"], state)

    roundtrip()


@pytest.mark.parametrize("key", ["k\n", "a\nb", "\n"])
def test_keys_with_line_breaks_are_refused_as_they_could_not_be_read_back(
    client: httpx.Client, key: str
) -> None:
    client.post("/v1/working-memory/fuzz-plan", json={"key": "k", "value": "plain k"})
    r = client.post("/v1/working-memory/fuzz-plan", json={"key": key, "value": 1})
    assert "key" in named_fields(assert_client_error(r, 422))
    # Reading such a key never answers another key's value (a trailing "\n" used to
    # be dropped by the route, so GET "k\n" returned "k").
    got = client.get(_key_url("fuzz-plan", key))
    assert_client_error(got, 404, 422)
    assert client.delete(_key_url("fuzz-plan", key)).status_code in (404, 422)
    assert client.get(_key_url("fuzz-plan", "k")).json()["value"] == "plain k"
