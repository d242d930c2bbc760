"""A plan as the memory service stores it: reading records, merging concurrent changes.

Fields the memory record has no column for (the goal's correlation id and response
topic, the caller's identity, the step ledger) are kept under ``state["_plan"]``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from soorma_common.memory import PlanContextRecord

if TYPE_CHECKING:
    from soorma.context import PlatformContext
    from soorma.memory import MemoryClient

META_KEY = "_plan"
_MISSING = object()


def split_state(record: PlanContextRecord) -> tuple[dict[str, Any], dict[str, Any]]:
    """The record's user state and the SDK's bookkeeping kept beside it."""
    state = dict(record.state)
    meta = dict(state.pop(META_KEY, {}) or {})
    return state, meta


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
    added = [c for c in local.correlation_ids if c not in base.correlation_ids]
    removed = set(base.correlation_ids) - set(local.correlation_ids)
    merged.correlation_ids = [c for c in merged.correlation_ids if c not in removed] + [
        c for c in added if c not in merged.correlation_ids
    ]
    return merged


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
