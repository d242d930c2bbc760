"""MemoryClient working-memory methods against the real memory service."""

from __future__ import annotations

import pytest

from soorma.memory import MemoryClient
from soorma_common.errors import PayloadTooLarge
from soorma_common.memory import WorkingMemoryItem

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_store_and_retrieve_any_json_value(memory: MemoryClient):
    item = await memory.store("vehicle:42", {"parts": ["brake_pads"], "km": 120_000}, "plan-1")
    assert isinstance(item, WorkingMemoryItem) and item.key == "vehicle:42"
    assert await memory.retrieve("vehicle:42", "plan-1") == {
        "parts": ["brake_pads"],
        "km": 120_000,
    }
    await memory.store("count", 3, "plan-1")
    assert await memory.retrieve("count", "plan-1") == 3
    await memory.store("count", [1, 2], "plan-1")
    assert await memory.retrieve("count", "plan-1") == [1, 2]


async def test_retrieve_missing_key_gives_the_default(memory: MemoryClient):
    assert await memory.retrieve("nothing", "plan-1") is None
    assert await memory.retrieve("nothing", "plan-1", default="fallback") == "fallback"
    assert await memory.retrieve_item("nothing", "plan-1") is None


async def test_keys_with_slashes_colons_and_spaces_round_trip(memory: MemoryClient):
    key = "plan:p1/vehicle data:42"
    await memory.store(key, "v", "plan 1")
    assert await memory.retrieve(key, "plan 1") == "v"
    assert await memory.list_keys("plan 1") == [key]
    assert await memory.delete_item(key, "plan 1") is True


async def test_an_id_with_a_slash_is_refused_before_sending(memory: MemoryClient):
    with pytest.raises(ValueError, match="without '/'"):
        await memory.store("k", 1, "plan/1")


async def test_delete_list_and_clear(memory: MemoryClient):
    for key in ("b", "a", "c"):
        await memory.store(key, key.upper(), "plan-1")
    await memory.store("other", 1, "plan-2")
    assert await memory.list_keys("plan-1") == ["a", "b", "c"]
    assert [i.value for i in await memory.list_items("plan-1")] == ["A", "B", "C"]
    assert await memory.delete_item("b", "plan-1") is True
    assert await memory.delete_item("b", "plan-1") is False
    assert await memory.clear("plan-1") == 2
    assert await memory.list_keys("plan-1") == []
    assert await memory.list_keys("plan-2") == ["other"]


async def test_oversized_value_raises_payload_too_large(memory: MemoryClient):
    with pytest.raises(PayloadTooLarge) as info:
        await memory.store("big", "x" * 300_000, "plan-1")
    assert "working-memory" in str(info.value)
