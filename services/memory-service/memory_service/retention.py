"""Retention: finished plans (and their data) are pruned by age so tables stay bounded."""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from memory_service.sql.base import utcnow
from memory_service.store import MemoryStore

if TYPE_CHECKING:
    from memory_service.longterm.service import LongTermMemory
    from memory_service.settings import RetentionSettings

log = logging.getLogger("memory_service.retention")


async def prune_finished_plans(
    store: MemoryStore, *, retention_days: float, now: datetime | None = None
) -> int:
    """Delete completed/failed/cancelled plans not updated for ``retention_days``.

    Their correlation ids, working memory and task contexts go with them. Plans that are
    pending, running or paused are never pruned, however old.

    Args:
        store: The memory store.
        retention_days: Age (since the plan's last update) after which it is pruned.
        now: The current time (tests pass a later one instead of waiting).

    Returns:
        How many plans were pruned.
    """
    cutoff = (now or utcnow()) - timedelta(days=retention_days)
    return await store.prune_finished_plans(updated_before=cutoff)


async def run_pruner(store: MemoryStore, *, retention_days: float, interval: float) -> None:
    """Prune forever, every ``interval`` seconds (a task of the app's lifespan)."""
    while True:
        try:
            pruned = await prune_finished_plans(store, retention_days=retention_days)
            if pruned:
                log.info("pruned finished plans", extra={"plans": pruned})
        except Exception:
            # A failed run (database briefly away) must not end the pruner for good.
            log.exception("pruning finished plans failed; retrying next interval")
        await asyncio.sleep(interval)


def long_term_retention(settings: RetentionSettings) -> dict[str, float]:
    """Retention days per long-term table, for the types that have one (``> 0``)."""
    days = {
        "memory_semantic": settings.memory_retention_semantic_days,
        "memory_episodes": settings.memory_retention_episodic_days,
        "memory_procedures": settings.memory_retention_procedural_days,
    }
    return {table: value for table, value in days.items() if value > 0}


async def prune_long_term(
    memory: LongTermMemory, retention: dict[str, float], *, now: datetime | None = None
) -> dict[str, int]:
    """Delete long-term records older than their type's retention (all tenants).

    Semantic and procedural records age from their last update, episodes from when they
    happened. ``now``: tests pass a later time instead of waiting.
    """
    current = now or utcnow()
    pruned = {}
    for table, days in retention.items():
        pruned[table] = await memory.store.prune(table, older_than=current - timedelta(days=days))
    return pruned


async def run_long_term_pruner(
    memory: LongTermMemory, retention: dict[str, float], *, interval: float
) -> None:
    """Prune long-term memory forever, every ``interval`` seconds."""
    while True:
        try:
            pruned = await prune_long_term(memory, retention)
            if any(pruned.values()):
                log.info("pruned long-term memory", extra={"records": pruned})
        except Exception:
            log.exception("pruning long-term memory failed; retrying next interval")
        await asyncio.sleep(interval)
