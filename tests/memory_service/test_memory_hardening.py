"""Input found by attacking the service: answered with a 4xx naming the field, never a 500."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from memory_bodies import plan_body, task_body

from soorma_common.jsonvalue import MAX_JSON_DEPTH

pytestmark = pytest.mark.asyncio


def nested(depth: int) -> Any:
    """``depth`` levels of arrays: ``[[...]]``."""
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


def _deep_writes(value: Any) -> list[tuple[str, str, dict[str, Any], str]]:
    """(method, path, body, field) for every write holding a caller's JSON document."""
    return [
        ("POST", "/v1/working-memory/p1", {"key": "k1", "value": value}, "value"),
        ("POST", "/v1/memory/task-context", task_body("t1", data={"x": value}), "data"),
        ("POST", "/v1/memory/plan-context", plan_body("p1", state={"x": value}), "state"),
        # The plan-context PUT is answered by the fast path ahead of FastAPI.
        ("PUT", "/v1/memory/plan-context/p2", plan_body("p2", state={"x": value}), "state"),
        ("POST", "/v1/memory/sessions", {"metadata": {"x": value}}, "metadata"),
    ]


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 300, 900])
async def test_json_nested_beyond_the_platform_limit_is_422_naming_the_field(
    client: httpx.AsyncClient, depth: int
) -> None:
    for method, path, body, field in _deep_writes(nested(depth)):
        r = await client.request(method, path, json=body)
        assert r.status_code == 422, (method, path, depth, r.status_code, r.text[:300])
        error = r.json()["error"]
        assert error["code"] == "validation_error"
        assert f"nests deeper than {MAX_JSON_DEPTH} levels" in error["message"]
        assert error["details"][0]["field"].startswith(f"{field}."), error["details"]
    # And the service keeps answering.
    assert (await client.get("/health")).status_code == 200


async def test_json_nested_up_to_the_limit_is_stored(client: httpx.AsyncClient) -> None:
    r = await client.post("/v1/memory/plan-context", json=plan_body("p2"))  # PUT replaces
    assert r.status_code == 200, r.text
    value = nested(MAX_JSON_DEPTH - 1)  # the "x" object is a level of nested fields
    for method, path, body, _ in _deep_writes(value):
        r = await client.request(method, path, json=body)
        assert r.status_code in (200, 201), (method, path, r.status_code, r.text[:300])


async def test_openapi_declares_if_match_as_the_integer_version(
    client: httpx.AsyncClient,
) -> None:
    spec = (await client.get("/openapi.json")).json()
    declared = [
        (path, method, param["schema"])
        for path, operations in spec["paths"].items()
        for method, operation in operations.items()
        for param in operation.get("parameters", [])
        if param["name"] == "If-Match"
    ]
    assert len(declared) >= 4, declared  # task/plan-context POST and PUT, plans PUT
    for path, method, schema in declared:
        types = {s.get("type") for s in schema.get("anyOf", [schema])}
        assert types <= {"integer", "null"} and "integer" in types, (method, path, schema)
    # ... and the service holds to it: a non-integer is 422 naming If-Match, the ETag
    # forms of an integer are accepted.
    r = await client.post("/v1/memory/plan-context", json=plan_body("p1"))
    for value, status in [("latest", 422), ("1.5", 422), ('"1"', 200), ('W/"2"', 200)]:
        r = await client.put(
            "/v1/memory/plan-context/p1", json=plan_body("p1"), headers={"If-Match": value}
        )
        assert r.status_code == status, (value, r.text)
        if status == 422:
            assert "If-Match" in r.text
