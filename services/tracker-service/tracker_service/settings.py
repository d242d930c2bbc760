"""Settings for the tracker-service (environment prefix ``SOORMA_``), grouped by concern:
storage, the other services, the projector, the replica's identity, plan streams and the
timeouts."""

from __future__ import annotations

from pydantic import AliasChoices, Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from servicekit.settings import ServiceSettings

DEFAULT_PORT = 8084


_CONFIG = SettingsConfigDict(env_prefix="SOORMA_", extra="ignore")


class TrackerStorageSettings(BaseSettings):
    """Where the tracker keeps its projections.

    Attributes:
        tracker_database_url: Per-service override of ``SOORMA_DATABASE_URL``
            (``SOORMA_TRACKER_DATABASE_URL``). Unset: SQLite ``tracker.db`` under ``data_dir``.
    """

    model_config = _CONFIG

    tracker_database_url: str | None = None


class PlatformClientSettings(BaseSettings):
    """Where the other services are, and who the tracker is to them.

    Attributes:
        event_service_url: Where the tap is read and timeouts are published.
        memory_url: Where plan contexts (state machine, LLM audit) are read.
        registry_url: Where the connected-agents view reads agents and heartbeats, and
            the plan page's answer form reads the schema of an awaited answer.
        api_token: Bearer token with ``soorma_role=service`` (jwt mode).
    """

    model_config = _CONFIG

    event_service_url: str = "http://127.0.0.1:8082"
    memory_url: str = "http://127.0.0.1:8083"
    registry_url: str = "http://127.0.0.1:8081"
    api_token: str | None = None


class ProjectorSettings(BaseSettings):
    """How the tracker consumes the tap and projects it.

    Attributes:
        tracker_consumer: This replica's consumer id in group ``tracker``. Default: a
            stable id per replica, resolved as agents resolve theirs
            (:mod:`soorma.consumer_identity`, from :class:`ReplicaSettings`), so a
            restarted tracker resumes at once.
        tracker_projector: Consume the tap (off: API only).
        tracker_batch: Most events projected in one transaction.
        tracker_batch_wait_seconds: How long a batch waits to fill once it has one event.
        tracker_visibility_timeout: Seconds before an unacked event goes to another replica.
    """

    model_config = _CONFIG

    tracker_consumer: str | None = Field(
        default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$"
    )
    tracker_projector: bool = True
    tracker_batch: int = Field(default=500, ge=1, le=5000)
    tracker_batch_wait_seconds: float = Field(default=0.02, ge=0)
    tracker_visibility_timeout: float = Field(default=30.0, ge=0.1)


class ReplicaSettings(BaseSettings):
    """Who this replica is when ``tracker_consumer`` is unset: the variables an agent's
    consumer id is resolved from (:mod:`soorma.consumer_identity`).

    Kept as the raw text: one parser (``soorma.PlatformSettings.from_env``) reads them for
    the agents and the tracker alike, so an empty value means the same in both.

    Attributes:
        consumer_id: ``SOORMA_CONSUMER_ID``: this process's consumer id.
        replica: ``SOORMA_REPLICA``: this process's replica index (``<host>-<index>``).
        state_dir: ``SOORMA_STATE_DIR``: where replica slot locks live.
        xdg_cache_home: ``XDG_CACHE_HOME`` (no prefix): the slot locks' folder's parent
            when ``state_dir`` is unset.
    """

    model_config = SettingsConfigDict(env_prefix="SOORMA_", extra="ignore", populate_by_name=True)

    consumer_id: str | None = None
    replica: str | None = None
    state_dir: str | None = None
    xdg_cache_home: str | None = Field(
        default=None, validation_alias=AliasChoices("XDG_CACHE_HOME", "xdg_cache_home")
    )

    @field_validator("consumer_id", "replica", "state_dir", "xdg_cache_home", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        if isinstance(value, str) and not value.strip():
            return None
        return value


class PlanStreamSettings(BaseSettings):
    """The tracker's own live streams of a plan (its page and ``GET .../stream``).

    Attributes:
        tracker_stream_poll_seconds: How often a plan's stream looks for new entries.
        tracker_stream_settle_seconds: Once the plan has ended, how long its stream waits
            for late entries (events of other topics projected after the terminal one)
            before ``end``: until nothing new came for this long, or the terminal event is
            this old. 0: ``end`` as soon as the plan is seen ended.
    """

    model_config = _CONFIG

    tracker_stream_poll_seconds: float = Field(default=0.25, gt=0)
    tracker_stream_settle_seconds: float = Field(default=1.0, ge=0)


class TimeoutSettings(BaseSettings):
    """Firing due timeouts (``task.timeout``, ``plan.wait_timeout``).

    Attributes:
        tracker_timeouts: Fire due timeouts from this replica.
        tracker_timeout_interval_seconds: How often due timeouts are looked for.
        tracker_timeout_lease_seconds: A claimed timeout whose replica died is fired by
            another one after this long.
    """

    model_config = _CONFIG

    tracker_timeouts: bool = True
    tracker_timeout_interval_seconds: float = Field(default=0.25, gt=0)
    tracker_timeout_lease_seconds: float = Field(default=30.0, gt=0)


class Settings(
    ServiceSettings,
    TrackerStorageSettings,
    PlatformClientSettings,
    ProjectorSettings,
    ReplicaSettings,
    PlanStreamSettings,
    TimeoutSettings,
):
    """Tracker-service settings: servicekit's shared groups and the tracker's own
    (:data:`GROUPS`), each read from its flat ``SOORMA_*`` variables."""

    model_config = _CONFIG


GROUPS = (
    TrackerStorageSettings,
    PlatformClientSettings,
    ProjectorSettings,
    ReplicaSettings,
    PlanStreamSettings,
    TimeoutSettings,
)
