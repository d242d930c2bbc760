"""AgentOptions: how an agent consumes its events, checked once when it is built.

What an agent *is* (name, events, capabilities) is given to its constructor; how it
consumes (group, concurrency, leases, acks, shutdown) is one :class:`AgentOptions`
value, shared by every agent type, so the same tuning can be handed to a Tool, a
Worker or a Planner::

    from soorma import AgentOptions, Worker

    busy = AgentOptions(max_concurrency=64, visibility_timeout=30)
    worker = Worker(name="resizer", options=busy)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from soorma.agents._acks import DEFAULT_ACK_BATCH, DEFAULT_ACK_WINDOW
from soorma.consumer_identity import check_consumer_id
from soorma_common.registry import DEFAULT_AGENT_TTL_SECONDS

DEFAULT_MAX_CONCURRENCY = 16
DEFAULT_DEDUPE_CAPACITY = 10_000
DEFAULT_SHUTDOWN_TIMEOUT = 30.0
# Short, because running handlers renew their lease every third of it: only the events
# of a replica that died wait this long (when it does not come back).
DEFAULT_VISIBILITY_TIMEOUT = 10.0
MAX_PREFETCH = 1000
MAX_ACK_BATCH = 1000
# The event service's bounds for a stream's lease and delivery count.
MIN_VISIBILITY_TIMEOUT = 0.1
MAX_VISIBILITY_TIMEOUT = 86_400.0
MAX_DELIVERIES = 1000


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentOptions:
    """How an agent consumes its events; every value is checked when it is built.

    Attributes:
        group: Consumer group (``None``: the agent's name, so its replicas share the
            events).
        consumer_id: This replica's consumer id in the group. ``None``:
            ``SOORMA_CONSUMER_ID``, else ``<host>-<SOORMA_REPLICA>``, else
            ``<host>-<n>`` with ``n`` a replica slot locked on this host (see
            docs/sdk.md, "Consumer identity and leases"). A restarted replica with the
            id gets back at once what its previous life left unacked.
        max_concurrency: Most events handled at once.
        prefetch: Most deliveries held unacked at once (``None``: twice
            ``max_concurrency``, at most 1000): the service sends no more until some
            are settled.
        visibility_timeout: Seconds the service waits for an ack before redelivering
            (running handlers renew their lease every third of it; ``None``: the
            service's default).
        max_deliveries: Deliveries before an event is dead-lettered (``None``: the
            service's default).
        start_from: ``"earliest"`` makes a *new* group start at the oldest event;
            ``None`` starts it at events published from now on.
        dedupe_capacity: How many completed event ids are remembered, so that a
            redelivery of a finished event is acked without running its handlers again.
        shutdown_timeout: Seconds ``stop()`` waits for in-flight handlers.
        ack_window: Seconds an ack (or nack) may wait so that others share its request
            (at most a tenth of ``visibility_timeout``); ``0`` sends whatever is
            queued as soon as the loop runs.
        ack_batch_size: Queued acks that are sent at once, without waiting.
        registry_ttl: Seconds the registry keeps the agent without a heartbeat; the
            agent heartbeats every third of it.

    Raises:
        ValueError: a value out of its range, naming the field.
    """

    group: str | None = None
    consumer_id: str | None = None
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY
    prefetch: int | None = None
    visibility_timeout: float | None = DEFAULT_VISIBILITY_TIMEOUT
    max_deliveries: int | None = None
    start_from: Literal["earliest"] | None = None
    dedupe_capacity: int = DEFAULT_DEDUPE_CAPACITY
    shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT
    ack_window: float = DEFAULT_ACK_WINDOW
    ack_batch_size: int = DEFAULT_ACK_BATCH
    registry_ttl: int = DEFAULT_AGENT_TTL_SECONDS

    def __post_init__(self) -> None:
        if self.group is not None and (not isinstance(self.group, str) or not self.group):
            raise ValueError("group must be a non-empty string (or None: the agent's name)")
        if self.consumer_id is not None:
            check_consumer_id(self.consumer_id)
        _count("max_concurrency", self.max_concurrency, 1)
        if self.prefetch is not None:
            _count("prefetch", self.prefetch, 1, MAX_PREFETCH)
        if self.visibility_timeout is not None:
            _seconds(
                "visibility_timeout",
                self.visibility_timeout,
                MIN_VISIBILITY_TIMEOUT,
                MAX_VISIBILITY_TIMEOUT,
            )
        if self.max_deliveries is not None:
            _count("max_deliveries", self.max_deliveries, 1, MAX_DELIVERIES)
        if self.start_from not in (None, "earliest"):
            raise ValueError(f"start_from must be 'earliest' or None, got {self.start_from!r}")
        _count("dedupe_capacity", self.dedupe_capacity, 1)
        _seconds("shutdown_timeout", self.shutdown_timeout, 0.0)
        _seconds("ack_window", self.ack_window, 0.0)
        _count("ack_batch_size", self.ack_batch_size, 1, MAX_ACK_BATCH)
        _count("registry_ttl", self.registry_ttl, 1)

    @property
    def effective_prefetch(self) -> int:
        """``prefetch``, or its default: twice ``max_concurrency``, at most 1000."""
        return self.prefetch or min(2 * self.max_concurrency, MAX_PREFETCH)


def _count(name: str, value: object, low: int, high: int | None = None) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < low or (high is not None and value > high):
        bounds = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise ValueError(f"{name} must be {bounds}, got {value}")


def _seconds(name: str, value: object, low: float, high: float | None = None) -> None:
    if not isinstance(value, int | float) or isinstance(value, bool) or value != value:
        raise ValueError(f"{name} must be a number of seconds, got {value!r}")
    if value < low or (high is not None and value > high):
        bounds = f"between {low:g} and {high:g}" if high is not None else f"at least {low:g}"
        raise ValueError(f"{name} must be {bounds} seconds, got {value:g}")


__all__ = ["DEFAULT_MAX_CONCURRENCY", "AgentOptions"]
