"""Background sweep that deletes expired agents and releases the events they owned."""

from __future__ import annotations

import asyncio
import logging

from registry_service.store import RegistryStore

log = logging.getLogger("registry_service.purge")


async def purge_forever(store: RegistryStore, *, interval_seconds: float) -> None:
    """Call ``store.purge_expired()`` every ``interval_seconds`` until cancelled.

    Reads already hide expired agents; the sweep keeps tables small and applies the
    event-ownership rule to agents that vanished without deregistering.
    """
    while True:
        await asyncio.sleep(interval_seconds)
        try:
            purged = await store.purge_expired()
        except Exception:
            # A database hiccup must not kill the sweep; the next round retries.
            log.exception("purging expired agents failed")
            continue
        if purged:
            log.info("purged expired agents", extra={"count": purged})
