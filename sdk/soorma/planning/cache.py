"""The last stored version of recently written plans (see :class:`PlanCache`)."""

from __future__ import annotations

from cachetools import FIFOCache

from soorma_common.memory import PlanContextRecord

DEFAULT_CACHE_PLANS = 2048


class PlanCache(FIFOCache[str, PlanContextRecord]):
    """The last stored version of recently written plans, by plan id and correlation id.

    Lets a planner skip the by-correlation read when it wrote the plan itself. A cached
    copy is only a guess: every write is still guarded by its version, and a decision
    to do nothing taken on a cached copy is re-checked on a fresh read (another replica
    may have moved the plan on).

    Args:
        capacity: Plans kept (least recently written dropped first; reads do not count).
    """

    def __init__(self, *, capacity: int = DEFAULT_CACHE_PLANS) -> None:
        super().__init__(maxsize=capacity)
        self._by_correlation: dict[str, str] = {}

    @property
    def capacity(self) -> int:
        return int(self.maxsize)

    def put(self, record: PlanContextRecord) -> None:
        """Remember ``record`` (the version just stored)."""
        self[record.plan_id] = record
        for corr in record.correlation_ids:
            self._by_correlation[corr] = record.plan_id

    def popitem(self) -> tuple[str, PlanContextRecord]:
        # Called by the cache when it is full: forget the dropped plan's correlation ids.
        plan_id, old = super().popitem()
        for corr in old.correlation_ids:
            if self._by_correlation.get(corr) == plan_id:
                del self._by_correlation[corr]
        return plan_id, old

    def by_correlation(self, correlation_id: str) -> PlanContextRecord | None:
        """The cached plan ``correlation_id`` leads to, if any."""
        plan_id = self._by_correlation.get(correlation_id)
        return self.get(plan_id) if plan_id else None


__all__ = ["DEFAULT_CACHE_PLANS", "PlanCache"]
