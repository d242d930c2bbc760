"""Stable consumer ids: a restarted agent replica reclaims what its previous life held.

The event service re-delivers at once whatever is still pending on a consumer id when a
stream opens with that id. So a replica's id must be

- the same after a restart (else its events wait out the visibility timeout), and
- different from every other live replica of the same agent (else two replicas would
  share, and re-deliver, each other's work).

Resolution, first match wins:

1. ``consumer_id=`` given to the agent;
2. ``SOORMA_CONSUMER_ID`` (one process = one replica; e.g. the pod name of a StatefulSet);
3. ``SOORMA_REPLICA`` (an index): ``<host>-<index>``;
4. a *replica slot* on this host: the lowest ``n`` whose lock file
   ``<state dir>/consumers/<group>.<n>.lock`` this process can lock exclusively, giving
   ``<host>-<n>``. The operating system drops the lock when the process exits, even on
   SIGKILL, so a restarted replica takes the slot its previous life freed while
   replicas running side by side hold different slots. The state dir is
   ``SOORMA_STATE_DIR``, else ``$XDG_CACHE_HOME/soorma``, else ``~/.cache/soorma``;
5. where no lock can be taken (no writable state dir, no ``fcntl``): ``<host>-<random>``,
   with a warning: events held by a crashed replica then come back after the visibility
   timeout, as with any dead consumer.
"""

from __future__ import annotations

import logging
import re
import socket
import uuid
from typing import IO

from soorma.settings import PlatformSettings

logger = logging.getLogger("soorma.agent")

CONSUMER_ID_ENV = "SOORMA_CONSUMER_ID"
REPLICA_ENV = "SOORMA_REPLICA"
MAX_SLOTS = 1024
_UNSAFE = re.compile(r"[^A-Za-z0-9._:@-]+")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$")


def _host() -> str:
    host = _UNSAFE.sub("-", socket.gethostname()).strip("-._:@") or "host"
    return host[:100]


def check_consumer_id(value: str, source: str = "consumer_id") -> str:
    """``value`` if the event service accepts it as a consumer id, else ValueError."""
    if not _NAME.fullmatch(value):
        raise ValueError(
            f"{source} {value[:64]!r} is not a valid consumer id: use 1-128 letters, "
            "digits or '._:@-', starting with a letter or digit"
        )
    return value


class ConsumerIdentity:
    """This replica's consumer id in one group, holding its slot lock while alive.

    Args:
        group: The consumer group (slots are counted per group).
        explicit: An id given in code; wins over everything else.
        settings: Where ``consumer_id``, ``replica`` and ``state_dir`` come from
            (default: :meth:`PlatformSettings.from_env`, read now).
    """

    def __init__(
        self,
        group: str,
        explicit: str | None = None,
        *,
        settings: PlatformSettings | None = None,
    ) -> None:
        self.group = group
        self._lock: IO[bytes] | None = None
        self.source = "argument"
        if explicit:
            self.consumer_id = check_consumer_id(explicit, "consumer_id")
            return
        settings = settings or PlatformSettings.from_env()
        self.state_dir = settings.replica_state_dir
        if settings.consumer_id:
            self.source = CONSUMER_ID_ENV
            self.consumer_id = check_consumer_id(settings.consumer_id, CONSUMER_ID_ENV)
            return
        replica = settings.replica
        if replica:
            self.source = REPLICA_ENV
            self.consumer_id = check_consumer_id(f"{_host()}-{replica}", REPLICA_ENV)
            return
        slot = self._take_slot()
        if slot is not None:
            self.source = "slot"
            self.consumer_id = f"{_host()}-{slot}"
            return
        self.source = "random"
        self.consumer_id = f"{_host()}-{uuid.uuid4().hex[:12]}"
        logger.warning(
            "group %s: no replica slot could be locked under %s; using consumer id %s, so "
            "events held by this process if it crashes come back only after the "
            "visibility timeout (set %s or %s for a stable id)",
            group,
            self.state_dir,
            self.consumer_id,
            CONSUMER_ID_ENV,
            REPLICA_ENV,
        )

    def _take_slot(self) -> int | None:
        try:
            import fcntl
        except ImportError:  # not on POSIX
            return None
        safe_group = _UNSAFE.sub("_", self.group)
        try:
            folder = self.state_dir / "consumers"
            folder.mkdir(parents=True, exist_ok=True)
            for slot in range(MAX_SLOTS):
                handle = open(folder / f"{safe_group}.{slot}.lock", "ab")
                try:
                    fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    handle.close()
                    continue
                except BaseException:
                    handle.close()
                    raise
                self._lock = handle
                return slot
        except OSError as exc:
            logger.debug("group %s: replica slots unavailable: %s", self.group, exc)
        return None

    def release(self) -> None:
        """Free the replica slot (at stop), so the next start on this host reuses it."""
        lock, self._lock = self._lock, None
        if lock is not None:
            lock.close()
