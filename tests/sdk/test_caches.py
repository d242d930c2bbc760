"""The SDK's bounded caches (cachetools underneath): what is kept, what goes first."""

from __future__ import annotations

import pytest

from soorma.agents._lru import RecentIds
from soorma.planning.cache import PlanCache
from soorma_common.memory import PlanContextRecord


def test_recent_ids_forget_the_oldest_added_and_lookups_do_not_refresh() -> None:
    ids = RecentIds(3)
    for event_id in ("a", "b", "c"):
        ids.add(event_id)
    assert "a" in ids  # a look-up does not make "a" newer...
    ids.add("d")
    assert "a" not in ids and {"b", "c", "d"} <= set(ids)
    ids.add("b")  # ...adding again does
    ids.add("e")
    assert "c" not in ids and "b" in ids
    assert len(ids) == 3 and ids.capacity == 3
    with pytest.raises(ValueError):
        RecentIds(0)


def plan(plan_id: str, *corrs: str, version: int = 1) -> PlanContextRecord:
    return PlanContextRecord(plan_id=plan_id, correlation_ids=list(corrs), version=version)


def test_plan_cache_finds_plans_by_correlation_and_forgets_evicted_ones() -> None:
    cache = PlanCache(capacity=2)
    cache.put(plan("p1", "c1", "c2"))
    cache.put(plan("p2", "c3"))
    assert cache.by_correlation("c2") is not None
    assert cache.by_correlation("c2").plan_id == "p1"  # type: ignore[union-attr]
    cache.put(plan("p1", "c1", "c2", "c4", version=2))  # rewritten: now the newest
    cache.put(plan("p3", "c5"))  # evicts p2, the least recently written
    assert cache.by_correlation("c3") is None
    assert "c3" not in cache._by_correlation
    assert cache.by_correlation("c4").version == 2  # type: ignore[union-attr]
    cache.put(plan("p4"))  # evicts p1: its correlation ids go with it
    assert cache.by_correlation("c1") is None and cache.by_correlation("c4") is None
    assert set(cache._by_correlation) == {"c5"}
    assert len(cache) == 2 and cache.capacity == 2


def test_a_correlation_id_moved_to_another_plan_survives_the_old_plans_eviction() -> None:
    cache = PlanCache(capacity=2)
    cache.put(plan("p1", "shared"))
    cache.put(plan("p2", "shared"))
    cache.put(plan("p3"))  # evicts p1, which no longer owns "shared"
    assert cache.by_correlation("shared").plan_id == "p2"  # type: ignore[union-attr]
