"""Decisions taken but not yet recorded: the model's answer survives a memory outage.

A step asks the model, then records the decision in the plan (memory service) before it
publishes anything. When the memory service is unreachable at that moment the handler
fails and the trigger is handled again: in this process first (the agent runs a handler
again while a platform service is unavailable), then by a redelivery after the nack.
Without this memo each retry would ask the model again. The decision and the audit
records not yet kept wait here, keyed by (plan id, step key), until the step is
recorded; then the entry is dropped. The memo is bounded (oldest first) and its entries
expire, so an abandoned plan costs nothing for long. It is per process: a process that
dies loses it (the model call's idempotency key covers that case where the provider
honours it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cachetools import TTLCache

from soorma_common.decisions import PlannerDecision

# Steps decided and not yet recorded, per process; a step is normally recorded within
# milliseconds, so only an outage fills this.
DECIDED_MEMORY = 4096
# How long an unrecorded decision is kept: longer than the agent's retries while a
# service is unavailable (60 s) plus a few redeliveries.
DECIDED_TTL_SECONDS = 600.0


@dataclass(slots=True)
class Decided:
    """A step's decision, and its audit records that the plan has not kept yet."""

    decision: PlannerDecision
    audit: list[dict[str, Any]] = field(default_factory=list)


class DecidedSteps:
    """Unrecorded decisions by (plan id, step key), bounded and expiring."""

    def __init__(
        self, maxsize: int = DECIDED_MEMORY, ttl_seconds: float = DECIDED_TTL_SECONDS
    ) -> None:
        self._entries: TTLCache[tuple[str, str], Decided] = TTLCache(
            maxsize=max(maxsize, 1), ttl=ttl_seconds
        )

    def get(self, plan_id: str, key: str | None) -> Decided | None:
        """The unrecorded decision of ``key``'s step in ``plan_id``, if any."""
        if key is None:
            return None
        return self._entries.get((plan_id, key))

    def put(self, plan_id: str, key: str | None, decided: Decided) -> None:
        """Keep ``decided`` until the step is recorded (nothing without a key)."""
        if key is not None:
            self._entries[(plan_id, key)] = decided

    def drop(self, plan_id: str, key: str | None) -> None:
        """Forget the step's decision (it is recorded, or the plan ended)."""
        if key is not None:
            self._entries.pop((plan_id, key), None)

    def __len__(self) -> int:
        return len(self._entries)


__all__ = ["DECIDED_MEMORY", "DECIDED_TTL_SECONDS", "Decided", "DecidedSteps"]
