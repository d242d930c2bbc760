"""A plan as the memory service stores it: merging concurrent changes into a record.

The SDK's own fields (the goal's correlation id and response topic, the caller's
identity, the step ledger, pause and failure reasons, a ChoreographyPlanner's
bookkeeping) are the record's ``bookkeeping``; ``state`` holds only the user's keys.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from soorma_common.bookkeeping import PlanBookkeeping
from soorma_common.memory import PlanContextRecord

if TYPE_CHECKING:
    from soorma.context import PlatformContext
    from soorma.memory import MemoryClient

_MISSING = object()


def initial_correlations(
    plan_id: str, goal_correlation: str | None, parent_plan_id: str | None
) -> list[str]:
    """A new plan's correlation ids: its own id and, for a top-level goal, the goal's.

    The goal's correlation id lets callers find the plan (memory ``by-correlation``).
    A sub-plan's goal correlation id is its parent's pending request, so it must keep
    leading to the parent and is not listed.
    """
    ids = [plan_id]
    if goal_correlation and goal_correlation != plan_id and parent_plan_id is None:
        ids.append(goal_correlation)
    return ids


def merge_records(
    fresh: PlanContextRecord, base: PlanContextRecord, local: PlanContextRecord
) -> PlanContextRecord:
    """``fresh`` with the changes ``local`` made relative to ``base`` applied."""
    merged = fresh.model_copy(deep=True)
    for name in (
        "status",
        "current_state",
        "response_event",
        "session_id",
        "parent_plan_id",
        "goal_event",
        "state_machine",
    ):
        if getattr(local, name) != getattr(base, name):
            setattr(merged, name, getattr(local, name))
    for name in ("results", "state", "goal_data"):
        target = dict(getattr(merged, name))
        before, after = getattr(base, name), getattr(local, name)
        for key in before.keys() - after.keys():
            target.pop(key, None)
        for key, value in after.items():
            if before.get(key, _MISSING) != value:
                target[key] = value
        setattr(merged, name, target)
    merged.bookkeeping = _merge_bookkeeping(merged.bookkeeping, base.bookkeeping, local.bookkeeping)
    added = [c for c in local.correlation_ids if c not in base.correlation_ids]
    removed = set(base.correlation_ids) - set(local.correlation_ids)
    merged.correlation_ids = [c for c in merged.correlation_ids if c not in removed] + [
        c for c in added if c not in merged.correlation_ids
    ]
    return merged


def _merge_bookkeeping(
    fresh: PlanBookkeeping, base: PlanBookkeeping, local: PlanBookkeeping
) -> PlanBookkeeping:
    """``fresh`` with the bookkeeping fields ``local`` changed relative to ``base``."""
    changed = {
        name: getattr(local, name)
        for name in PlanBookkeeping.model_fields
        if getattr(local, name) != getattr(base, name)
    }
    return fresh.model_copy(update=changed) if changed else fresh


def plan_memory(context: PlatformContext) -> MemoryClient:
    """The memory client plans are stored with.

    Raises:
        RuntimeError: the context has no memory client.
    """
    memory = context.memory
    if memory is None:
        raise RuntimeError(
            "plans need context.memory (the memory service); build the context with "
            "PlatformContext.from_env() and set SOORMA_MEMORY_URL"
        )
    return memory
