"""Answers recorded by request id, so a repeated request is answered, not run again.

A Tool (and a Worker finishing a task) records the answer envelope it sends in the
memory service (``/v1/memory/answers``) *before* publishing it, keyed by agent name and
request id. When the same request arrives again within the retention window (the bus
redelivered it, or a planner re-sent it after a crash) the recorded envelope is
published again, under its original event id, and the handler does not run.

The memory service is optional here: without one (or while it is unreachable) requests
are simply handled, as before; the failure is logged and the memory service is not
asked again for :data:`RETRY_AFTER` seconds.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import TYPE_CHECKING, Any

from soorma_common.events import EventEnvelope

if TYPE_CHECKING:
    from soorma.context import PlatformContext

logger = logging.getLogger("soorma.agent")

# Default window: answers are kept a day (``Tool(answer_retention=...)``).
DEFAULT_ANSWER_RETENTION = 86_400.0
# Seconds the memory service is left alone after a failed call.
RETRY_AFTER = 30.0
_NAMESPACE = uuid.UUID("2c9d0a8e-7b41-4f0e-8c55-6a1e3d9b2f70")


def answer_event_id(agent: str, request_id: str) -> str:
    """The id of ``agent``'s answer to ``request_id`` (the same every time)."""
    return str(uuid.uuid5(_NAMESPACE, f"{agent}/{request_id}"))


class AnswerLog:
    """Recorded answers of one agent.

    Args:
        agent: The agent's name (answers are kept per agent and request id).
        retention: Seconds an answer is kept; ``0`` turns recording off.
    """

    def __init__(self, agent: str, retention: float = DEFAULT_ANSWER_RETENTION) -> None:
        if retention < 0:
            raise ValueError("answer_retention must be 0 (off) or a number of seconds")
        self.agent = agent
        self.retention = retention
        self._down_until = 0.0

    def _key(self, request_id: str) -> str:
        return f"{self.agent}:{request_id}"

    def _usable(self, context: PlatformContext) -> bool:
        return (
            self.retention > 0
            and context.memory is not None
            and time.monotonic() >= self._down_until
        )

    def _failed(self, what: str, exc: Exception) -> None:
        self._down_until = time.monotonic() + RETRY_AFTER
        logger.warning(
            "agent %s: could not %s recorded answers in the memory service (%s); "
            "requests are handled without them for %.0f s",
            self.agent,
            what,
            exc,
            RETRY_AFTER,
        )

    async def recorded(self, context: PlatformContext, request_id: str) -> EventEnvelope | None:
        """The answer recorded for ``request_id``, if any (and the service is reachable)."""
        if not self._usable(context):
            return None
        assert context.memory is not None
        try:
            found = await context.memory.without_retries().recorded_answer(self._key(request_id))
        except Exception as exc:
            self._failed("read", exc)
            return None
        return None if found is None else _envelope(found)

    async def record(
        self, context: PlatformContext, request_id: str, answer: EventEnvelope
    ) -> EventEnvelope:
        """Record ``answer`` unless an answer is recorded already; the one to send."""
        if not self._usable(context):
            return answer
        assert context.memory is not None
        try:
            kept = await context.memory.record_answer(
                self._key(request_id),
                {"event": answer.model_dump(mode="json")},
                retention_seconds=min(max(self.retention, 1.0), 30 * 86_400.0),
            )
        except Exception as exc:
            self._failed("write", exc)
            return answer
        return _envelope(kept) or answer


def _envelope(stored: dict[str, Any]) -> EventEnvelope | None:
    raw = stored.get("event")
    return EventEnvelope.model_validate(raw) if isinstance(raw, dict) else None


__all__ = ["DEFAULT_ANSWER_RETENTION", "AnswerLog", "answer_event_id"]
