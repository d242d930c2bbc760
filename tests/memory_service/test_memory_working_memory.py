"""Working memory: plan-scoped key/value with JSON values."""

from __future__ import annotations

import httpx
import pytest

pytestmark = pytest.mark.asyncio

WM = "/v1/working-memory"


async def test_store_and_retrieve_any_json_value(client: httpx.AsyncClient) -> None:
    values = {
        "obj": {"parts": ["brake_pads"], "n": 2},
        "list": [1, "a"],
        "num": 3.5,
        "text": "hi",
        "null": None,
        "flag": False,
    }
    for key, value in values.items():
        r = await client.post(f"{WM}/p1", json={"key": key, "value": value})
        assert r.status_code == 200, r.text
        assert r.json()["value"] == value
    for key, value in values.items():
        got = (await client.get(f"{WM}/p1/{key}")).json()
        assert (got["plan_id"], got["key"], got["value"]) == ("p1", key, value)
        assert got["updated_at"]


async def test_store_replaces_the_previous_value(client: httpx.AsyncClient) -> None:
    await client.post(f"{WM}/p1", json={"key": "k", "value": 1})
    await client.post(f"{WM}/p1", json={"key": "k", "value": 2})
    assert (await client.get(f"{WM}/p1/k")).json()["value"] == 2


async def test_keys_may_contain_slashes_and_colons(client: httpx.AsyncClient) -> None:
    await client.post(f"{WM}/p1", json={"key": "plan:p1/vehicle:7", "value": {"id": 7}})
    assert (await client.get(f"{WM}/p1/plan:p1/vehicle:7")).json()["value"] == {"id": 7}


async def test_list_and_clear_are_scoped_to_the_plan(client: httpx.AsyncClient) -> None:
    for key in ("b", "a"):
        await client.post(f"{WM}/p1", json={"key": key, "value": key})
    await client.post(f"{WM}/p2", json={"key": "a", "value": "other"})
    items = (await client.get(f"{WM}/p1")).json()["items"]
    assert [(i["key"], i["value"]) for i in items] == [("a", "a"), ("b", "b")]
    assert (await client.delete(f"{WM}/p1")).json() == {"deleted": 2}
    assert (await client.get(f"{WM}/p1")).json() == {"items": []}
    assert (await client.get(f"{WM}/p2/a")).json()["value"] == "other"


async def test_delete_one_key_and_404_for_missing_keys(client: httpx.AsyncClient) -> None:
    await client.post(f"{WM}/p1", json={"key": "k", "value": 1})
    assert (await client.delete(f"{WM}/p1/k")).status_code == 204
    r = await client.get(f"{WM}/p1/k")
    assert r.status_code == 404
    assert r.json()["error"]["code"] == "memory_key_not_found"
    assert r.json()["error"]["details"] == {"plan_id": "p1", "key": "k"}
    assert (await client.delete(f"{WM}/p1/k")).status_code == 404


async def test_missing_key_or_value_field_is_422_naming_it(client: httpx.AsyncClient) -> None:
    r = await client.post(f"{WM}/p1", json={"value": 1})
    assert r.status_code == 422
    assert r.json()["error"]["details"][0]["field"] == "key"
    r = await client.post(f"{WM}/p1", json={"key": "k"})
    assert r.status_code == 422
    assert r.json()["error"]["details"][0]["field"] == "value"


TRICKY_VALUES = [
    0,
    -1,
    2**53 + 1,
    2**63 - 1,
    -(2**63),
    0.1,
    1e308,
    -2.5e-300,
    1.0,
    "",
    "1",
    "true",
    "null",
    "[]",
    "ünïcødé ✓ 🚀",
    'line\nbreak\t"quoted"',
    True,
    None,
    [],
    {},
    [[[]]],
    {"": {"nested": [1, {"x": None}]}},
]


async def test_values_round_trip_exactly(client: httpx.AsyncClient) -> None:
    """JSON fidelity on both backends: numbers stay numbers, strings stay strings."""
    for i, value in enumerate(TRICKY_VALUES):
        r = await client.post(f"{WM}/p1", json={"key": f"k{i}", "value": value})
        assert r.status_code == 200, (value, r.text)
    items = (await client.get(f"{WM}/p1")).json()["items"]
    got = {item["key"]: item["value"] for item in items}
    for i, value in enumerate(TRICKY_VALUES):
        assert got[f"k{i}"] == value and type(got[f"k{i}"]) is type(value), (i, value)
