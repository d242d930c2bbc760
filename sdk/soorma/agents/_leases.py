"""Lease renewal: deliveries a replica holds stay its own while their handlers run."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from soorma.agents._acks import MAX_IDS_PER_REQUEST

if TYPE_CHECKING:
    from soorma.bus import BusClient

logger = logging.getLogger("soorma.agent")

# The service's own default, for a lease interval when visibility_timeout=None.
SERVICE_VISIBILITY_TIMEOUT = 30.0


class LeaseRenewer:
    """Renews the leases of the held deliveries every third of the visibility timeout.

    A handler running longer than ``visibility_timeout`` is thus not redelivered to
    another replica; if the process dies, renewals stop and its events expire.

    Args:
        name: Agent name (for task names and log lines).
        group: Consumer group the deliveries belong to.
        visibility_timeout: The subscription's timeout (``None``: the service's default).
    """

    def __init__(self, *, name: str, group: str, visibility_timeout: float | None) -> None:
        self.name = name
        self.group = group
        self.interval = max((visibility_timeout or SERVICE_VISIBILITY_TIMEOUT) / 3, 0.05)
        # Delivery ids received and not yet handled.
        self.held: set[str] = set()
        self._task: asyncio.Task[None] | None = None

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
        while True:
            await asyncio.sleep(self.interval)
            held = list(self.held)
            for start in range(0, len(held), MAX_IDS_PER_REQUEST):
                chunk = held[start : start + MAX_IDS_PER_REQUEST]
                try:
                    await bus.extend(self.group, chunk)
                except Exception as exc:
                    logger.warning(
                        "agent %s: could not renew the lease of %d deliveries: %s",
                        self.name,
                        len(chunk),
                        exc,
                    )
