"""Coalesces a consumer group's acks and nacks into few requests.

An agent settles every delivery. One ``POST /v1/events/ack`` per event was the largest
share of an agent's requests (B3: 11 of 20 event-service calls per plan), so settlements
are queued and sent together: when ``max_batch`` ids are waiting, or ``window`` seconds
after the first one was queued, and always on :meth:`AckBatcher.close`.

At-least-once is unchanged: an id is queued only after its handlers finished, and an id
whose request is lost (crash before the flush, service unreachable) is simply redelivered
after the visibility timeout, where the agent's duplicate guard settles it again.

The batcher is an accelerator (docs/architecture.md, "Accelerators"): its switch is
``PlatformSettings.ack_batching`` (``SOORMA_ACK_BATCHING=false``), and :func:`settlements`
is the one place it is applied. Off, :class:`DirectAcks` sends one request per delivery
at once, the plain path; tests/sdk/test_accelerator_switches.py runs both.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Protocol

from soorma_common.clock import SYSTEM_CLOCK, Clock

if TYPE_CHECKING:
    from soorma.bus import BusClient

logger = logging.getLogger("soorma.agent")

# B3 (docs/benchmarks.md): 5 ms batched little at one plan at a time (7 acks per plan),
# 50 ms sends ~2, which cut the agents' process CPU per plan by a fifth. A crash loses
# at most this much settling work, which the service redelivers.
DEFAULT_ACK_WINDOW = 0.05
DEFAULT_ACK_BATCH = 50
# The event service accepts at most this many ids per ack/nack request.
MAX_IDS_PER_REQUEST = 1000


class Settlements(Protocol):
    """Where an agent settles its deliveries (:class:`AckBatcher` or :class:`DirectAcks`)."""

    @property
    def pending(self) -> int: ...

    def ack(self, delivery_id: str) -> None: ...

    def nack(self, delivery_id: str, reason: str) -> None: ...

    async def close(self) -> None: ...


class AckBatcher:
    """Queues settlements of one consumer group and sends them in batches.

    Args:
        bus: Client the ack/nack requests go through.
        group: The consumer group the deliveries belong to.
        window: Seconds a settlement may wait for others to join its request.
        max_batch: Pending ids that trigger a flush without waiting for the window.
        name: Owner's name, for log messages.
        clock: Times the window.
    """

    def __init__(
        self,
        *,
        bus: BusClient,
        group: str,
        window: float = DEFAULT_ACK_WINDOW,
        max_batch: int = DEFAULT_ACK_BATCH,
        name: str = "",
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        if window < 0:
            raise ValueError("ack window must be 0 or more seconds")
        if not 1 <= max_batch <= MAX_IDS_PER_REQUEST:
            raise ValueError(f"ack batch size must be between 1 and {MAX_IDS_PER_REQUEST}")
        self.bus = bus
        self.group = group
        self.window = window
        self.max_batch = max_batch
        self.name = name or group
        self.clock = clock
        self._acks: list[str] = []
        self._nacks: dict[str, list[str]] = {}
        self._pending = 0
        self._wake = asyncio.Event()
        self._full = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    @property
    def pending(self) -> int:
        """Ids queued and not yet sent."""
        return self._pending

    def ack(self, delivery_id: str) -> None:
        """Queue an ack (the delivery's handlers finished)."""
        self._acks.append(delivery_id)
        self._queued()

    def nack(self, delivery_id: str, reason: str) -> None:
        """Queue a nack: the delivery becomes available again with ``reason``."""
        self._nacks.setdefault(reason[:4096], []).append(delivery_id)
        self._queued()

    def _queued(self) -> None:
        self._pending += 1
        if self._closed:
            # Only during close(): its final flush picks this up.
            return
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"{self.name} acks")
        if self._pending >= self.max_batch:
            self._full.set()
        self._wake.set()

    async def _run(self) -> None:
        while not self._closed:
            await self._wake.wait()
            if not self._closed and self._pending < self.max_batch and self.window > 0:
                with contextlib.suppress(TimeoutError):
                    await self.clock.wait_for(self._full.wait(), self.window)
            self._wake.clear()
            self._full.clear()
            await self.flush()

    async def flush(self) -> None:
        """Send everything queued now (one request per kind and reason)."""
        acks, self._acks = self._acks, []
        nacks, self._nacks = self._nacks, {}
        self._pending = 0
        for start in range(0, len(acks), MAX_IDS_PER_REQUEST):
            await self._send(acks[start : start + MAX_IDS_PER_REQUEST], None)
        for reason, ids in nacks.items():
            for start in range(0, len(ids), MAX_IDS_PER_REQUEST):
                await self._send(ids[start : start + MAX_IDS_PER_REQUEST], reason)

    async def _send(self, ids: list[str], reason: str | None) -> None:
        try:
            if reason is None:
                await self.bus.ack(self.group, ids)
            else:
                await self.bus.nack(self.group, ids, reason)
        except Exception as exc:
            # Unsettled deliveries come back after the visibility timeout; the
            # duplicate guard settles the completed ones again.
            logger.warning(
                "agent %s: could not %s %d deliveries: %s",
                self.name,
                "ack" if reason is None else "nack",
                len(ids),
                exc,
            )

    async def close(self) -> None:
        """Stop the background flusher and send what is still queued."""
        self._closed = True
        task, self._task = self._task, None
        if task is not None:
            # Wake the flusher rather than cancel it: a request in flight is let finish
            # (its ids are already off the queue), then the loop ends.
            self._full.set()
            self._wake.set()
            await task
        await self.flush()


class DirectAcks:
    """The plain path: each settlement is its own request, sent at once.

    What :class:`AckBatcher` replaces when ``ack_batching`` is off; a failed request is
    logged and its delivery comes back after the visibility timeout, as with the batcher.
    """

    def __init__(self, *, bus: BusClient, group: str, name: str = "") -> None:
        self.bus = bus
        self.group = group
        self.name = name or group
        self._sending: set[asyncio.Task[None]] = set()

    @property
    def pending(self) -> int:
        """Settlements whose request has not returned yet."""
        return len(self._sending)

    def ack(self, delivery_id: str) -> None:
        """Send the delivery's ack now."""
        self._start(delivery_id, None)

    def nack(self, delivery_id: str, reason: str) -> None:
        """Send the delivery's nack now: it becomes available again with ``reason``."""
        self._start(delivery_id, reason[:4096])

    def _start(self, delivery_id: str, reason: str | None) -> None:
        task = asyncio.create_task(self._send(delivery_id, reason), name=f"{self.name} ack")
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _send(self, delivery_id: str, reason: str | None) -> None:
        try:
            if reason is None:
                await self.bus.ack(self.group, [delivery_id])
            else:
                await self.bus.nack(self.group, [delivery_id], reason)
        except Exception as exc:
            logger.warning(
                "agent %s: could not %s delivery %s: %s",
                self.name,
                "ack" if reason is None else "nack",
                delivery_id,
                exc,
            )

    async def close(self) -> None:
        """Wait for the requests in flight."""
        while self._sending:
            await asyncio.wait(set(self._sending))


def settlements(
    *,
    batched: bool,
    bus: BusClient,
    group: str,
    window: float = DEFAULT_ACK_WINDOW,
    max_batch: int = DEFAULT_ACK_BATCH,
    name: str = "",
    clock: Clock = SYSTEM_CLOCK,
) -> Settlements:
    """The agent's settlements: batched (the accelerator) or one request each (plain)."""
    if batched:
        return AckBatcher(
            bus=bus, group=group, window=window, max_batch=max_batch, name=name, clock=clock
        )
    return DirectAcks(bus=bus, group=group, name=name)
