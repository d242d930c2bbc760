"""The SDK's two retry loops: versioned writes that conflict, and calls that meet an outage.

:func:`retry_while_unavailable` is the other loop: a call that fails with
``ServiceUnavailable`` (a platform service down for a restart) runs again with doubling
pauses until a time budget is spent. Agents use it to run a handler again while a
service is down, and to hold an answer until the memory service can record it.

Optimistic concurrency: the one retry loop behind every versioned write the SDK makes.

Plans and task contexts in the memory service carry a version. A write names the version
its copy was read at (``If-Match``) and fails with ``VersionConflict`` when another writer
stored a newer one first. :func:`retry_on_conflict` then waits a short random time,
re-reads, lets the caller apply its change again to the fresh copy and writes again.
Plans and task contexts reach it through :func:`soorma._versioned.apply_change`, which
adds the record store and the change applied to it.

The budget is the same everywhere: :data:`CONFLICT_RETRIES` re-reads, so at most
``CONFLICT_RETRIES + 1`` writes, before ``VersionConflict`` reaches the caller. The wait
before the n-th retry is uniform in ``[0, min(BACKOFF_CAP, BACKOFF_BASE * 2**(n-1))]``
("full jitter"): writers that collided spread out instead of colliding again in lockstep,
and a first retry waits about a millisecond. Spending the whole budget waits at most
about 1.5 s in all (0.75 s on average).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

from soorma_common.clock import SYSTEM_CLOCK, Clock
from soorma_common.errors import ServiceUnavailable, VersionConflict

logger = logging.getLogger("soorma.concurrency")

CONFLICT_RETRIES = 20
"""Re-reads after a version conflict before ``VersionConflict`` reaches the caller."""

BACKOFF_BASE = 0.002
"""Upper bound, in seconds, of the random wait before the first retry (doubling after)."""

BACKOFF_CAP = 0.1
"""No wait between two attempts is longer than this many seconds."""

T = TypeVar("T")


def backoff(conflicts: int) -> float:
    """The random wait before the retry that follows the ``conflicts``-th conflict.

    Args:
        conflicts: Conflicts so far (1 for the first).

    Returns:
        Seconds, uniform in ``[0, min(BACKOFF_CAP, BACKOFF_BASE * 2**(conflicts-1))]``.
    """
    bound = min(BACKOFF_CAP, BACKOFF_BASE * 2 ** min(max(conflicts - 1, 0), 32))
    return random.uniform(0.0, bound)


async def _nothing() -> None:
    return None


async def retry_on_conflict(
    write: Callable[[], Awaitable[T]],
    reread: Callable[[], Awaitable[object]] = _nothing,
    *,
    retries: int = CONFLICT_RETRIES,
    delay: Callable[[int], float] = backoff,
    clock: Clock = SYSTEM_CLOCK,
) -> T:
    """Run ``write`` until it does not conflict; re-read between attempts.

    Args:
        write: Applies the change to the current copy and writes it with the version
            the copy was read at (raising ``VersionConflict`` when it is stale). It runs
            again after each conflict, so it must only change the copy (no publishing).
        reread: Refreshes the copy after a conflict (a ``write`` that reads first needs
            none). It may raise to stop retrying (e.g. the record was deleted).
        retries: Re-reads after a conflict before giving up.
        delay: Seconds to wait before the retry after the n-th conflict.
        clock: What the waits between attempts are slept on.

    Returns:
        What the successful ``write`` returned.

    Raises:
        VersionConflict: the last conflict, when ``retries`` re-reads did not help.
    """
    conflicts = 0
    while True:
        try:
            return await write()
        except VersionConflict:
            conflicts += 1
            if conflicts > retries:
                raise
            logger.debug("version conflict %d of at most %d; re-reading", conflicts, retries)
        pause = delay(conflicts)
        if pause > 0:
            await clock.sleep(pause)
        await reread()


async def retry_while_unavailable(
    call: Callable[[], Awaitable[T]],
    *,
    wait: float,
    first_pause: float,
    max_pause: float,
    on_retry: Callable[[ServiceUnavailable, float, float], None] | None = None,
    clock: Clock = SYSTEM_CLOCK,
) -> T:
    """``call()``'s result; while it raises ``ServiceUnavailable``, call it again.

    The pauses double from ``first_pause`` up to ``max_pause``; once they add up to
    ``wait`` seconds the next ``ServiceUnavailable`` reaches the caller.

    Args:
        call: The attempt (runs again after each outage, so it must be safe to repeat).
        wait: Seconds of pauses before giving up.
        first_pause: The first pause, in seconds.
        max_pause: No pause is longer than this many seconds.
        on_retry: Told ``(error, next pause, seconds waited so far)`` before each pause.
        clock: What the pauses are slept on.
    """
    waited, pause = 0.0, first_pause
    while True:
        try:
            return await call()
        except ServiceUnavailable as exc:
            if waited >= wait:
                raise
            if on_retry is not None:
                on_retry(exc, pause, waited)
            await clock.sleep(pause)
            waited += pause
            pause = min(pause * 2, max_pause)


__all__ = [
    "BACKOFF_BASE",
    "BACKOFF_CAP",
    "CONFLICT_RETRIES",
    "backoff",
    "retry_on_conflict",
    "retry_while_unavailable",
]
