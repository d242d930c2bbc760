"""Settings for the event-service (environment prefix ``SOORMA_``), grouped by concern.

:class:`Settings` composes servicekit's shared groups with the service's own
(:data:`GROUPS`): where the log lives, the accelerator switches, how streams are read,
delivery defaults, request limits and the tap. Each group reads the same flat variables
and can be built alone.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from servicekit.settings import ServiceSettings

DEFAULT_PORT = 8082
DEFAULT_TAP_TOPICS = (
    "system-events",
    "action-requests",
    "action-results",
    "plan-events",
    "task-events",
    "notification-events",
)
# The tap's pseudo-tenant: real tenant ids start with a letter or digit, so never collide.
TAP_TENANT = "*"


_CONFIG = SettingsConfigDict(env_prefix="SOORMA_", extra="ignore")


class BackendSettings(BaseSettings):
    """Where the event log lives: process memory or Redis Streams, and how Redis is used.

    ``SOORMA_EVENT_BACKEND=redis`` with ``SOORMA_REDIS_URL`` selects Redis Streams;
    the default keeps the log in process memory (single process, lost on restart).
    """

    model_config = _CONFIG

    event_backend: Literal["memory", "redis"] = "memory"
    redis_url: str = "redis://127.0.0.1:6379/0"
    # ``SOORMA_REDIS_CLUSTER=true``: ``redis_url`` names any node of a Redis Cluster
    # (keys are hash-tagged per tenant: one tenant's streams live on one shard).
    redis_cluster: bool = False
    # Connections for short commands (publishes, acks, reads); requests beyond this
    # wait for a free one instead of failing. Blocking reads have their own pool.
    redis_max_connections: int = Field(default=64, ge=2, le=10_000)
    # Bound on one short Redis command; blocking reads are bounded by ``block_seconds``.
    redis_command_timeout: float = Field(default=5.0, gt=0)
    redis_prefix: str = Field(default="soorma", pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$")
    # Approximate cap on entries kept per topic (Redis ``XADD MAXLEN ~``).
    stream_max_length: int = Field(default=100_000, ge=100)


class AcceleratorSettings(BaseSettings):
    """The event service's accelerator switches (docs/architecture.md, "Accelerators").

    Each off falls back to the plain path. ``SOORMA_PUBLISH_FAST_PATH``: the publish
    routes in pure ASGI (fastpath.py) instead of FastAPI. ``SOORMA_REDIS_DIRECT``: appends
    and live reads as hand-packed RESP on raw connections, single appends group-committed
    (redis_direct.py, redis_appends.py), instead of redis-py's commands (always off on a
    Redis Cluster).
    """

    model_config = _CONFIG

    publish_fast_path: bool = True
    redis_direct: bool = True


class StreamSettings(BaseSettings):
    """How the service reads its log and feeds the SSE streams."""

    model_config = _CONFIG

    heartbeat_seconds: float = Field(default=15.0, ge=0.5)
    # How many entries one backend read returns (also the SSE write batch size).
    read_batch: int = Field(default=500, ge=1, le=10_000)
    # How long a blocking backend read waits before looping (bounds shutdown latency).
    block_seconds: float = Field(default=2.0, gt=0)
    # Entries a slow SSE subscriber may have queued before it falls back to re-reading.
    subscriber_buffer: int = Field(default=10_000, ge=100)
    # How often group streams look for expired or nacked deliveries to take over;
    # this bounds nack latency across processes (local nacks wake streams at once).
    claim_interval_seconds: float = Field(default=0.25, gt=0)
    # How often a group stream on Redis checks that no newer stream of its consumer id
    # opened in another event-service process (then it ends and hands over). One GET per
    # stream per check: 200 idle streams at 0.25 s cost ~8 % of a core, at 1 s ~2 %.
    supersede_check_seconds: float = Field(default=1.0, gt=0)


class DeliverySettings(BaseSettings):
    """A consumer group's delivery defaults, used when the client does not say."""

    model_config = _CONFIG

    default_visibility_timeout: float = Field(default=30.0, ge=0.1)
    default_max_deliveries: int = Field(default=5, ge=1)
    # Streams opened with ``count_deliveries=started`` (the SDK's agents) count only the
    # deliveries whose handler started towards ``max_deliveries``; one that never
    # reached a handler (buffered in a process that died) is still dead-lettered after
    # ``max_deliveries`` times this many deliveries in all.
    delivery_cap_factor: int = Field(default=4, ge=1, le=100)
    # Unacked deliveries one group stream may hold when the client does not say
    # (``prefetch``): few enough that a handler working one event at a time finishes
    # them well inside the visibility timeout (32 events in 30 s: ~1 s each).
    default_prefetch: int = Field(default=32, ge=1, le=1000)


class EventLimitsSettings(BaseSettings):
    """What one publish request may weigh, and how far scrape-time metrics look."""

    model_config = _CONFIG

    # Whole-request limit; single events are held to ``max_payload_bytes`` of ``data``.
    max_request_bytes: int = Field(default=16 * 1024 * 1024, ge=1024)
    # Scrape-time metrics look at no more than this many topic logs (event_service.metrics).
    metrics_max_streams: int = Field(default=1000, ge=1)


class TapSettings(BaseSettings):
    """The platform-wide tap (pseudo-tenant ``*``) that platform services (tracker,
    gateway) alone may read, with ``tenant=*``."""

    model_config = _CONFIG

    # Topics copied to the tap. ``SOORMA_TAP_TOPICS=a,b`` (comma-separated; empty: no tap).
    tap_topics: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: list(DEFAULT_TAP_TOPICS)
    )

    @field_validator("tap_topics", mode="before")
    @classmethod
    def _split_topics(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [t.strip() for t in value.split(",") if t.strip()]
        return value


class Settings(
    ServiceSettings,
    BackendSettings,
    AcceleratorSettings,
    StreamSettings,
    DeliverySettings,
    EventLimitsSettings,
    TapSettings,
):
    """Event-service settings: servicekit's shared groups and the service's own, each
    read from its flat ``SOORMA_*`` variables (``settings.redis_url``...)."""

    model_config = _CONFIG


GROUPS = (
    BackendSettings,
    AcceleratorSettings,
    StreamSettings,
    DeliverySettings,
    EventLimitsSettings,
    TapSettings,
)
