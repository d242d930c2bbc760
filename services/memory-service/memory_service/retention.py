"""Retention: finished plans (and their data) are pruned by age so tables stay bounded."""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta

from memory_service.sql.base import utcnow
from memory_service.store import MemoryStore

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
