"""A cancelled task's mark in its stored context.

A worker that ends a task on a ``task.cancel_requested`` keeps the task's context and
marks it with a finish claim of status ``cancelled`` (``bookkeeping.finish``). The claim
is what a task's answer needs first (see :meth:`~soorma.tasking.stored.StoredTask._claim`),
so a cancelled task can never be answered afterwards; the kept context is what tells a
redelivered request, a late sub-task result or a human-input timeout that the task is over.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from soorma_common.memory import TaskContextRecord

CANCELLED = "cancelled"


def cancel_marker(request_id: str, reason: str, by: str | None) -> dict[str, Any]:
    """The finish claim that marks a task cancelled by the request ``request_id``."""
    return {
        "by": f"cancel:{request_id}",
        "at": datetime.now(UTC).isoformat(),
        "status": CANCELLED,
        "reason": reason,
        "cancelled_by": by,
    }


def cancellation(record: TaskContextRecord | None) -> dict[str, Any] | None:
    """The cancel mark of a stored task context (``None``: not cancelled)."""
    if record is None:
        return None
    finish = record.bookkeeping.finish
    return finish if finish is not None and finish.get("status") == CANCELLED else None


def is_cancelled(record: TaskContextRecord | None) -> bool:
    """Whether the stored task context says the task was cancelled."""
    return cancellation(record) is not None


__all__ = ["CANCELLED", "cancel_marker", "cancellation", "is_cancelled"]
