"""Claims: one delivery of a request runs it at a time (issue 9).

Two deliveries of one request can be in flight at once (a lease ran out while the event
service was down and another replica took the delivery; a restarted planner re-sent the
request). Looking up the recorded answer first does not keep both from running: neither
has recorded it yet. So before its handler runs, a delivery claims the request in the
memory service (``PUT /v1/memory/answers/{key}/claim``), keyed like its answer, for a
lease it renews while the handler runs (:class:`HeldClaim`). Recording the answer ends
the claim; a handler that fails gives it back, so a redelivery runs at once.

A delivery that finds the claim held waits: it asks again (backoff, never past the
holder's lease) until the answer is recorded (it sends that) or the claim lapses (the
holder died or gave it back: it claims it and runs). Only that handler waits.

The limit: a holder that stalls past its lease without renewing (a process frozen for
longer than the lease, not killed) loses the claim, and the request may run twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from soorma_common.memory import AnswerClaim

if TYPE_CHECKING:
    from soorma.memory import MemoryClient

logger = logging.getLogger("soorma.agent")

# Seconds a claim holds unless renewed; renewed every third of it while the handler runs.
DEFAULT_CLAIM_LEASE = 10.0
# First and longest pause between looks at a claim another delivery holds.
_FIRST_POLL, _MAX_POLL = 0.05, 1.0
_PROCESS = f"{socket.gethostname()}:{os.getpid()}"


def new_owner() -> str:
    """A token for one delivery in this process (the claim's owner)."""
    return f"{_PROCESS}:{uuid.uuid4().hex[:16]}"[-128:]


class HeldClaim:
    """A granted claim, renewed in the background until it is given back."""

    def __init__(self, memory: MemoryClient, key: str, owner: str, lease: float) -> None:
        self.memory = memory
        self.key = key
        self.owner = owner
        self.lease = lease
        # Called once the claim is done with (stopped or given back).
        self.on_done: Callable[[HeldClaim], object] | None = None
        self._ended = False  # the recorded answer ended it in the memory service
        self._renewing: asyncio.Task[None] | None = None

    def start(self) -> HeldClaim:
        """Renew the claim every third of its lease from now on."""
        self._renewing = asyncio.create_task(self._renew(), name=f"claim {self.key}")
        return self

    async def _renew(self) -> None:
        while True:
            await asyncio.sleep(self.lease / 3)
            try:
                got = await self.memory.claim_request(
                    self.key, self.owner, lease_seconds=self.lease
                )
            except Exception as exc:  # an outage: the next beat tries again
                logger.warning("claim on %s not renewed: %s", self.key, exc)
                continue
            if got.status == "held":
                logger.warning(
                    "claim on %s lost to %s (not renewed within its %.0f s lease); "
                    "the request may run twice",
                    self.key,
                    got.owner,
                    self.lease,
                )
            if got.status != "granted":
                return  # answered (our own answer ended it) or lost

    def answered(self) -> None:
        """The answer is recorded, which ended the claim: nothing left to renew or give
        back."""
        self._ended = True
        if self._renewing is not None:
            self._renewing.cancel()

    async def stop(self) -> None:
        """Stop renewing (the answer, once recorded, has ended the claim)."""
        if self._renewing is not None:
            self._renewing.cancel()
            try:
                await self._renewing
            except asyncio.CancelledError:
                pass
            self._renewing = None
        if self.on_done is not None:
            self.on_done(self)
            self.on_done = None

    async def release(self) -> None:
        """Stop renewing and give the claim back, so a redelivery runs at once (unless
        the recorded answer ended it). Best effort: if the memory service cannot be
        reached, the lease runs out instead."""
        await self.stop()
        if self._ended:
            return
        try:
            await self.memory.without_retries().release_claim(self.key, self.owner)
        except Exception as exc:
            logger.info("claim on %s not given back (%s); it lapses", self.key, exc)


@contextlib.asynccontextmanager
async def settled(claim: object) -> AsyncIterator[None]:
    """Run a request's body under ``claim`` when it is a :class:`HeldClaim` (else, e.g.
    ``None`` with answers not recorded, there is nothing to settle). If the body fails,
    the claim is given back so a redelivery runs at once; if it succeeds, renewing
    stops (recording the answer ended the claim)."""
    held = claim if isinstance(claim, HeldClaim) else None
    try:
        yield
    except BaseException:
        if held is not None:
            await held.release()
        raise
    if held is not None:
        await held.stop()


async def claim_or_wait(
    memory: MemoryClient, key: str, *, lease: float, who: str
) -> AnswerClaim | HeldClaim:
    """Claim ``key``: a :class:`HeldClaim` (run the request), or the ``answered``
    outcome (send its answer). While another delivery holds it, wait.

    Raises:
        ServiceUnavailable: the memory service cannot be reached (the agent runs the
            request again later).
    """
    owner = new_owner()
    pause = _FIRST_POLL
    waited = False
    while True:
        got = await memory.claim_request(key, owner, lease_seconds=lease)
        if got.status == "granted":
            return HeldClaim(memory, key, owner, lease).start()
        if got.status == "answered":
            return got
        if not waited:
            waited = True
            logger.info(
                "%s: %s is being handled by %s; waiting for its answer", who, key, got.owner
            )
        await asyncio.sleep(min(pause, _until(got.expires_at)))
        pause = min(pause * 2, _MAX_POLL)


def _until(expires_at: datetime | None) -> float:
    if expires_at is None:
        return _FIRST_POLL
    left = (expires_at - datetime.now(UTC)).total_seconds()
    return max(left + 0.01, _FIRST_POLL)


__all__ = [
    "DEFAULT_CLAIM_LEASE",
    "HeldClaim",
    "claim_or_wait",
    "new_owner",
    "settled",
]
