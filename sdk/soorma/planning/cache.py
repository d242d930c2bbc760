"""The last stored version of recently written plans (see :class:`PlanCache`)."""

from __future__ import annotations

from collections import OrderedDict

from soorma_common.memory import PlanContextRecord

DEFAULT_CACHE_PLANS = 2048


class PlanCache:
    """The last stored version of recently written plans, found by correlation id.

    Lets a planner skip the by-correlation read when it wrote the plan itself. A cached
    copy is only a guess: every write is still guarded by its version, and a decision
    to do nothing taken on a cached copy is re-checked on a fresh read (another replica
    may have moved the plan on).

    Args:
        capacity: Plans kept (least recently written dropped first).
    """

    def __init__(self, *, capacity: int = DEFAULT_CACHE_PLANS) -> None:
        self.capacity = capacity
        self._records: OrderedDict[str, PlanContextRecord] = OrderedDict()
        self._by_correlation: dict[str, str] = {}

    def put(self, record: PlanContextRecord) -> None:
        """Remember ``record`` (the version just stored)."""
        self._records[record.plan_id] = record
        self._records.move_to_end(record.plan_id)
        for corr in record.correlation_ids:
            self._by_correlation[corr] = record.plan_id
        while len(self._records) > self.capacity:
            _, old = self._records.popitem(last=False)
            for corr in old.correlation_ids:
                if self._by_correlation.get(corr) == old.plan_id:
                    del self._by_correlation[corr]

    def by_correlation(self, correlation_id: str) -> PlanContextRecord | None:
        """The cached plan ``correlation_id`` leads to, if any."""
        plan_id = self._by_correlation.get(correlation_id)
        return self._records.get(plan_id) if plan_id else None

    def __len__(self) -> int:
        return len(self._records)


__all__ = ["DEFAULT_CACHE_PLANS", "PlanCache"]
