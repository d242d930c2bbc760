"""Running a request once: one delivery runs it at a time, and a repeat is answered from
its record (:class:`Once`).

Two deliveries of one request can be in flight at once (a lease ran out while the event
service was down and another replica took the delivery; a restarted planner re-sent the
request). Looking up the recorded answer first does not keep both from running: neither
has recorded it yet. So before its handler runs, a delivery claims the request in the
memory service (``PUT /v1/memory/answers/{key}/claim``), keyed like its answer, for a
lease it renews while the handler runs (:class:`HeldClaim`). Recording the answer ends
the claim; a handler that ends without an answer (it failed, or a Worker's task
delegated) gives it back, so a redelivery runs at once.

A delivery that finds the claim held waits: it asks again (backoff, never past the
holder's lease) until the answer is recorded (it sends that) or the claim lapses (the
holder died or gave it back: it claims it and runs). Only that handler waits.

The limit: a holder that stalls past its lease without renewing (a process frozen for
longer than the lease, not killed) loses the claim, and the request may run twice.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, TypeVar

from soorma._concurrency import retry_while_unavailable
from soorma_common.clock import SYSTEM_CLOCK, Clock
from soorma_common.errors import ServiceUnavailable
from soorma_common.events import EventEnvelope

if TYPE_CHECKING:
    from soorma.bus import BusClient
    from soorma.memory import MemoryClient

logger = logging.getLogger("soorma.agent")

# Seconds a claim holds unless renewed; renewed every third of it while the handler runs.
DEFAULT_CLAIM_LEASE = 10.0
# The memory service keeps a recorded answer at most this long.
MAX_RETENTION = 30 * 86_400.0
# First and longest pause between attempts to record while the memory service is down.
_FIRST_DELAY, _MAX_DELAY = 0.25, 4.0

T = TypeVar("T")
# First and longest pause between looks at a claim another delivery holds.
_FIRST_POLL, _MAX_POLL = 0.05, 1.0
_PROCESS = f"{socket.gethostname()}:{os.getpid()}"


def new_owner() -> str:
    """A token for one delivery in this process (the claim's owner)."""
    return f"{_PROCESS}:{uuid.uuid4().hex[:16]}"[-128:]


class HeldClaim:
    """A granted claim, renewed in the background until it is given back."""

    def __init__(
        self,
        memory: MemoryClient,
        key: str,
        owner: str,
        lease: float,
        *,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.memory = memory
        self.key = key
        self.owner = owner
        self.lease = lease
        self.clock = clock
        self._ended = False  # the recorded answer ended it in the memory service
        self._renewing: asyncio.Task[None] | None = None

    def start(self) -> HeldClaim:
        """Renew the claim every third of its lease from now on."""
        self._renewing = asyncio.create_task(self._renew(), name=f"claim {self.key}")
        return self

    async def _renew(self) -> None:
        while True:
            await self.clock.sleep(self.lease / 3)
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


async def hold_until_written(
    write: Callable[[], Awaitable[T]], *, wait: float, what: str, who: str = "agent"
) -> T:
    """``write()``'s result; while it raises ``ServiceUnavailable``, try again (backoff)
    for up to ``wait`` seconds, then raise it.

    The caller holds what it is writing meanwhile (not published, its request not
    acked): a crash now runs the request again, which is safe as nothing was sent.
    """

    def say(exc: ServiceUnavailable, _pause: float, waited: float) -> None:
        if waited == 0:
            logger.warning(
                "%s: cannot record %s (%s); holding it until the memory service "
                "is back (up to %.0f s)",
                who,
                what,
                exc,
                wait,
            )

    return await retry_while_unavailable(
        write, wait=wait, first_pause=_FIRST_DELAY, max_pause=_MAX_DELAY, on_retry=say
    )


class Once:
    """One delivery's turn at a request that must run at most once.

    :meth:`begin` claims the request's key in the memory service, waiting while another
    delivery holds it. Then either :attr:`recorded` is the answer an earlier run recorded
    (send that again, :meth:`resend`; do not run), or this delivery holds the claim,
    renewed in the background, and runs the request: :meth:`record` records its answer
    (which ends the claim), :meth:`release` gives the claim back when no answer was
    recorded. ``async with`` releases on the way out, whatever happened.

    A turn built with ``memory=None`` records nothing and claims nothing (an agent with
    ``answer_retention=0``): the request simply runs.
    """

    def __init__(
        self,
        memory: MemoryClient | None,
        key: str,
        *,
        retention: float,
        record_wait: float,
        who: str,
        recorded: dict[str, Any] | None = None,
        claim: HeldClaim | None = None,
    ) -> None:
        self.memory = memory
        self.key = key
        self.retention = retention
        self.record_wait = record_wait
        self.who = who
        #: The answer recorded by an earlier run (``None``: run the request).
        self.recorded = recorded
        self._claim = claim
        self._on_release: list[Callable[[Once], object]] = []

    @classmethod
    async def begin(
        cls,
        memory: MemoryClient | None,
        key: str,
        *,
        retention: float,
        record_wait: float,
        who: str,
        lease: float = DEFAULT_CLAIM_LEASE,
        clock: Clock = SYSTEM_CLOCK,
    ) -> Once:
        """Claim ``key`` (or find its recorded answer); wait while another delivery runs it.

        ``clock`` times the looks at a claim held elsewhere and the renewals of our own.

        Raises:
            ServiceUnavailable: the memory service cannot be reached: the request must
                not run now (it may have been answered, or be running elsewhere).
        """
        kwargs: dict[str, Any] = {"retention": retention, "record_wait": record_wait, "who": who}
        if memory is None:
            return cls(None, key, **kwargs)
        owner = new_owner()
        pause = _FIRST_POLL
        waited = False
        while True:
            got = await memory.claim_request(key, owner, lease_seconds=lease)
            if got.status == "granted":
                claim = HeldClaim(memory, key, owner, lease, clock=clock).start()
                return cls(memory, key, claim=claim, **kwargs)
            if got.status == "answered":
                return cls(memory, key, recorded=dict(got.answer or {}), **kwargs)
            if not waited:
                waited = True
                logger.info(
                    "%s: %s is being handled by %s; waiting for its answer", who, key, got.owner
                )
            await clock.sleep(min(pause, _until(got.expires_at, clock.now())))
            pause = min(pause * 2, _MAX_POLL)

    def on_release(self, callback: Callable[[Once], object]) -> None:
        """Call ``callback(self)`` once the turn is over (released or answered)."""
        self._on_release.append(callback)

    async def resend(self, bus: BusClient) -> bool:
        """When an earlier run recorded an answer event: publish it again (under its
        original event id, so consumers drop a copy) and say so."""
        event = (self.recorded or {}).get("event")
        if not isinstance(event, dict):
            return False
        logger.info("%s: %s was answered before; sending that answer", self.who, self.key)
        await bus.publish_event(EventEnvelope.model_validate(event))
        return True

    async def record(self, answer: dict[str, Any]) -> dict[str, Any]:
        """Record ``answer`` before it is sent; the answer to send (if another delivery
        recorded one first, that one). An outage is waited out for ``record_wait``.

        Raises:
            ServiceUnavailable: still unreachable after ``record_wait`` seconds (the
                answer is not sent; the request is given back and may run again).
        """
        memory = self.memory
        if memory is None:
            return answer
        retention = min(max(self.retention, 1.0), MAX_RETENTION)

        async def write() -> dict[str, Any]:
            return await memory.record_answer(self.key, answer, retention_seconds=retention)

        kept = await hold_until_written(
            write, wait=self.record_wait, what=f"the answer to {self.key}", who=self.who
        )
        if self._claim is not None:
            self._claim.answered()  # the memory service ended the claim with the answer
        return kept

    async def release(self) -> None:
        """The turn is over: stop renewing, and give the claim back unless an answer
        ended it, so a redelivery (or a copy waiting for the answer) goes on at once."""
        if self._claim is not None:
            await self._claim.release()
            self._claim = None
        callbacks, self._on_release = self._on_release, []
        for callback in callbacks:
            callback(self)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.release()


def _until(expires_at: datetime | None, now: datetime) -> float:
    if expires_at is None:
        return _FIRST_POLL
    left = (expires_at - now).total_seconds()
    return max(left + 0.01, _FIRST_POLL)


__all__ = [
    "DEFAULT_CLAIM_LEASE",
    "MAX_RETENTION",
    "HeldClaim",
    "Once",
    "hold_until_written",
    "new_owner",
]
