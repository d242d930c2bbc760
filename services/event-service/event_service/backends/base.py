"""The event log interface every backend implements."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from event_service.ids import StreamKey


@dataclass(slots=True, frozen=True)
class Entry:
    """One stored event: its topic, stream id and the envelope JSON as published.

    ``deliveries`` is how many times the group has delivered it, this delivery
    included (1 outside consumer groups, and in the in-memory backend).
    """

    topic: str
    id: str
    key: StreamKey
    type: str
    payload: bytes
    deliveries: int = 1

    @property
    def ref(self) -> str:
        """The delivery token ``topic=streamid`` (what group consumers ack)."""
        return f"{self.topic}={self.id}"


@dataclass(slots=True, frozen=True)
class DeadEntry:
    """An entry of a dead-letter topic ``T.dlq`` with why it died."""

    entry: Entry
    reason: str
    deliveries: int
    group: str | None
    dead_at: datetime


@dataclass(slots=True, frozen=True)
class NewEvent:
    """An event to append: the envelope is already serialized once, here."""

    topic: str
    type: str
    payload: bytes


@dataclass(slots=True)
class LogStats:
    """Operational figures summed over every tenant (for metrics; no tenant in them).

    ``dead_letters`` maps a live topic ``T`` to the entries of ``T.dlq``; ``groups`` maps
    a group name to its ``(lag, pending)`` summed over its topics (lag: entries not yet
    delivered to the group; pending: delivered, not yet acked). ``streams`` is how many
    topic logs were looked at; ``complete`` is False when ``max_streams`` cut it short.
    """

    dead_letters: dict[str, int] = field(default_factory=dict)
    groups: dict[str, tuple[int, int]] = field(default_factory=dict)
    streams: int = 0
    complete: bool = True

    def add_group(self, group: str, lag: int, pending: int) -> None:
        old_lag, old_pending = self.groups.get(group, (0, 0))
        self.groups[group] = (old_lag + lag, old_pending + pending)


@dataclass(slots=True, frozen=True)
class GroupStatus:
    """One consumer group on one topic of a tenant.

    ``lag``: entries not yet delivered to the group; ``pending``: delivered and not yet
    acked (nor dead-lettered); ``last_delivered``: the stream id of the newest entry the
    group has taken (``0-0`` before the first).
    """

    topic: str
    group: str
    lag: int
    pending: int
    last_delivered: str


class EventLog(abc.ABC):
    """Append-only per-tenant topic logs with consumer groups and dead letters.

    Every method is scoped to one tenant; a tenant can never name another tenant's
    data. Stream ids are ``<ms>-<seq>`` strings, increasing per topic.
    """

    @abc.abstractmethod
    async def append(self, tenant: str, events: Sequence[NewEvent]) -> list[str]:
        """Append all ``events`` atomically, returning their stream ids in order."""

    @abc.abstractmethod
    async def last_ids(self, tenant: str, topics: Sequence[str]) -> dict[str, str]:
        """The newest stream id of each topic ("now"); ``0-0`` for an empty topic."""

    @abc.abstractmethod
    async def read_range(
        self, tenant: str, topic: str, *, after: str, upto: str, count: int
    ) -> list[Entry]:
        """Up to ``count`` entries with ``after < id <= upto``, oldest first."""

    @abc.abstractmethod
    async def read_live(
        self, tenant: str, topic: str, *, after: str, count: int, block: float
    ) -> list[Entry]:
        """Entries after ``after``; waits up to ``block`` seconds when there are none."""

    @abc.abstractmethod
    async def ensure_group(
        self, tenant: str, topics: Sequence[str], group: str, *, from_earliest: bool
    ) -> None:
        """Create ``group`` on each topic unless it exists (at "now" or the beginning)."""

    @abc.abstractmethod
    async def read_group(
        self,
        tenant: str,
        topics: Sequence[str],
        group: str,
        consumer: str,
        *,
        count: int,
        block: float,
    ) -> list[Entry]:
        """Never-delivered entries for ``group``, now pending on ``consumer``."""

    @abc.abstractmethod
    async def claim_expired(
        self,
        tenant: str,
        topic: str,
        group: str,
        consumer: str,
        *,
        min_idle: float,
        max_deliveries: int,
        count: int,
        hard_cap: int | None = None,
    ) -> list[Entry]:
        """Take over deliveries idle for ``min_idle`` seconds (or nacked) for ``consumer``.

        Entries out of deliveries are not returned: they move to ``topic.dlq`` with the
        last nack reason and are acked in ``topic``. Without ``hard_cap`` that is after
        ``max_deliveries`` deliveries; with it, after ``max_deliveries`` *started* ones
        (see :mod:`event_service.backends.burial`) or ``hard_cap`` deliveries in all.
        """

    @abc.abstractmethod
    async def claim_own(
        self,
        tenant: str,
        topic: str,
        group: str,
        consumer: str,
        *,
        after: str,
        max_deliveries: int,
        count: int,
        hard_cap: int | None = None,
    ) -> tuple[list[Entry], str | None]:
        """Deliver again what is still pending on ``consumer`` itself, oldest first.

        Used when a consumer id opens a stream, so a restarted process resumes what its
        previous life held without waiting for the visibility timeout. Looks only at
        deliveries with ids after ``after`` (``0-0`` first, then the returned cursor).
        Entries out of deliveries go to ``topic.dlq`` as in :meth:`claim_expired`.

        Returns:
            The entries (their delivery count and lease renewed) and the cursor to pass
            as ``after`` next time, or ``None`` when nothing more is pending.
        """

    @abc.abstractmethod
    async def still_pending(
        self, tenant: str, group: str, consumer: str, refs: Sequence[tuple[str, str]]
    ) -> set[tuple[str, str]]:
        """Those of ``refs`` still pending on ``consumer`` (not acked, nacked or claimed)."""

    @abc.abstractmethod
    async def extend(
        self,
        tenant: str,
        group: str,
        refs: Sequence[tuple[str, str]],
        consumer: str | None = None,
        running: Sequence[tuple[str, str]] = (),
    ) -> tuple[int, list[tuple[str, str, str]]]:
        """Renew the lease of pending deliveries (idle time back to 0, same owner).

        Nacked deliveries are not extended. With ``consumer``, only deliveries pending
        on that consumer are; those pending on another are returned as
        ``(topic, stream_id, owner)``. Returns (how many were renewed, held by others).

        ``running``: those of ``refs`` whose handler has started; each renewed one is
        marked started in its current delivery (counted once per delivery).
        """

    @abc.abstractmethod
    async def ack(self, tenant: str, group: str, refs: Sequence[tuple[str, str]]) -> int:
        """Acknowledge ``(topic, stream_id)`` deliveries; returns how many were pending."""

    @abc.abstractmethod
    async def nack(
        self, tenant: str, group: str, refs: Sequence[tuple[str, str]], reason: str
    ) -> int:
        """Make pending deliveries claimable at once, remembering ``reason``.

        A nacked delivery reached a handler: it is marked started, as by :meth:`extend`.
        """

    @abc.abstractmethod
    async def dead_letters(self, tenant: str, topic: str, *, limit: int) -> list[DeadEntry]:
        """The oldest ``limit`` dead letters of ``topic`` (``topic`` is the live topic)."""

    @abc.abstractmethod
    async def replay(self, tenant: str, topic: str, ids: Sequence[str]) -> list[Entry]:
        """Re-append dead letters ``ids`` to ``topic`` and drop them from its DLQ.

        Raises:
            EventNotFound: some ids are not in the DLQ (nothing is replayed).
        """

    async def forget_consumer(
        self, tenant: str, topics: Sequence[str], group: str, consumer: str
    ) -> None:
        """Drop ``consumer`` from ``group`` on each topic where it has nothing pending.

        Called when a group stream closes, so per-connection consumer ids do not pile
        up. A consumer still owning deliveries is kept (they stay claimable). The
        default does nothing: a backend without a consumer registry has nothing to drop.
        """
        return None

    # True when several processes share this log, so a consumer id's newest stream may
    # live in another process (see :meth:`open_session`).
    shared: bool = False

    async def open_session(self, tenant: str, group: str, consumer: str, session: str) -> None:
        """Record ``session`` as the newest stream of ``consumer`` in ``group``.

        Older streams of that consumer id, in any process, see it through
        :meth:`newest_session` and hand over. The default (one process) records nothing:
        the process's own registry of streams is enough.
        """
        return None

    async def newest_session(self, tenant: str, group: str, consumer: str) -> str | None:
        """The session last recorded by :meth:`open_session` (``None``: none known)."""
        return None

    async def close_session(self, tenant: str, group: str, consumer: str, session: str) -> None:
        """Forget ``session`` if it is still the newest of its consumer id."""
        return None

    async def hand_over(
        self, tenant: str, group: str, consumer: str, held: dict[tuple[str, str], int]
    ) -> int:
        """Make deliveries a superseded stream took available to the newer one at once.

        ``held`` maps ``(topic, stream_id)`` to the delivery count the old stream saw.
        A delivery is released (claimable at once, like a nack) only if it is still
        pending on ``consumer`` with that count: one the newer stream already re-delivered
        (its count went up) or that was acked stays as it is. Returns how many were
        released. The default releases nothing.
        """
        return 0

    async def stats(self, *, max_streams: int) -> LogStats:
        """Dead letters and group lag/pending over all tenants, looking at no more than
        ``max_streams`` topic logs (read-only; for the scrape-time metrics). The default
        knows nothing."""
        return LogStats(complete=False)

    @abc.abstractmethod
    async def group_status(
        self,
        tenant: str,
        *,
        group: str | None = None,
        topics: Sequence[str] | None = None,
        max_streams: int,
    ) -> tuple[list[GroupStatus], bool]:
        """Lag and pending counts of the tenant's consumer groups (read-only).

        ``group`` keeps one group; ``topics`` looks only at those topics, else every
        live topic of the tenant (dead-letter topics are never looked at), at most
        ``max_streams`` of them. Returns the groups ordered by (group, topic), and
        whether every topic was looked at.
        """

    @abc.abstractmethod
    async def ping(self) -> None:
        """Raise when the backend is unreachable."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Release connections and wake blocked readers."""
