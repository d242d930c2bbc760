"""Lease renewal: deliveries a replica holds stay its own while their handlers run."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from soorma.agents._acks import MAX_IDS_PER_REQUEST
from soorma_common.clock import SYSTEM_CLOCK, Clock

if TYPE_CHECKING:
    from soorma.bus import BusClient

logger = logging.getLogger("soorma.agent")

# The service's own default, for a lease interval when visibility_timeout=None.
SERVICE_VISIBILITY_TIMEOUT = 30.0
# A handler start is reported this long after it happens (starts close together share
# one request), and reports go out at most once per MARK_GAP seconds.
MARK_DELAY = 0.5
MARK_GAP = 1.0


class LeaseRenewer:
    """Renews the leases of the held deliveries every third of the visibility timeout,
    and tells the service which of them have a handler running.

    A handler running longer than ``visibility_timeout`` is thus not redelivered to
    another replica; if the process dies, renewals stop and its events expire.

    Only deliveries reported running count towards ``max_deliveries`` (the agent's
    stream opts in, see ``BusClient.subscribe``'s ``count_started``): one that waited
    in this process's buffer when it died is not held against the event. A start is
    reported within about a second (``MARK_DELAY``, batched, at most one request per
    ``MARK_GAP``) and again with every renewal.

    Args:
        name: Agent name (for task names and log lines).
        group: Consumer group the deliveries belong to.
        visibility_timeout: The subscription's timeout (``None``: the service's default).
        clock: Times the renewals and reports.
    """

    def __init__(
        self,
        *,
        name: str,
        group: str,
        visibility_timeout: float | None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.name = name
        self.clock = clock
        self.group = group
        self.interval = max((visibility_timeout or SERVICE_VISIBILITY_TIMEOUT) / 3, 0.05)
        # Delivery ids received and not yet handled.
        self.held: set[str] = set()
        # Those of them whose handler started, and the starts not reported yet.
        self.running: set[str] = set()
        self._fresh: set[str] = set()
        self._woken = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def started(self, delivery_id: str) -> None:
        """A handler started on ``delivery_id`` (reported to the service shortly)."""
        if delivery_id in self.held:
            self.running.add(delivery_id)
            self._fresh.add(delivery_id)
            self._woken.set()

    def release(self, delivery_id: str) -> None:
        """``delivery_id`` was handled (or given up): no longer leased."""
        self.held.discard(delivery_id)
        self.running.discard(delivery_id)
        self._fresh.discard(delivery_id)

    def start(self, bus: BusClient) -> None:
        """Start renewing in the background."""
        self._task = asyncio.create_task(self._renew(bus), name=f"agent {self.name} leases")

    async def stop(self) -> None:
        """Stop renewing (held deliveries then expire unless settled)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _renew(self, bus: BusClient) -> None:
        clock = self.clock
        due = clock.monotonic() + self.interval
        sent = float("-inf")
        while True:
            with contextlib.suppress(TimeoutError):
                await clock.wait_for(self._woken.wait(), due - clock.monotonic())
            if clock.monotonic() < due:
                # A handler started: report it soon, with whatever starts follow (but
                # never later than the renewal, however short the interval).
                report_at = max(clock.monotonic() + MARK_DELAY, sent + MARK_GAP)
                await clock.sleep(min(report_at, due) - clock.monotonic())
            self._woken.clear()
            if clock.monotonic() >= due - MARK_DELAY:
                # The renewal is (nearly) due: renew everything, reporting all starts.
                due = clock.monotonic() + self.interval
                ids = list(self.held)
            else:
                ids = list(self._fresh)
            self._fresh.clear()
            sent = clock.monotonic()
            await self._send(bus, ids)

    async def _send(self, bus: BusClient, ids: list[str]) -> None:
        for start in range(0, len(ids), MAX_IDS_PER_REQUEST):
            chunk = ids[start : start + MAX_IDS_PER_REQUEST]
            running = [i for i in chunk if i in self.running]
            try:
                await bus.extend(self.group, chunk, running=running)
            except Exception as exc:
                logger.warning(
                    "agent %s: could not renew the lease of %d deliveries: %s",
                    self.name,
                    len(chunk),
                    exc,
                )
