"""Settings for the gateway-a2a (``SOORMA_`` prefix), grouped by concern: task storage,
the other services, API keys, the agent card, routing, push notifications and replicas."""

from __future__ import annotations

import hashlib
import json
import socket
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from servicekit.settings import ServiceSettings

DEFAULT_PORT = 8085
HASH_PREFIX = "sha256:"


def hash_api_key(key: str) -> str:
    """The stored form of an API key: ``sha256:<hex digest>``."""
    return HASH_PREFIX + hashlib.sha256(key.encode("utf-8")).hexdigest()


# Compose passes unset options as empty strings: they mean "not set".
_CONFIG = SettingsConfigDict(env_prefix="SOORMA_", extra="ignore", env_ignore_empty=True)


class GatewayStorageSettings(BaseSettings):
    """Where tasks are kept and how they are written."""

    model_config = _CONFIG

    gateway_database_url: str | None = None
    # A blocking send's task is written once when it ends or asks for input, or after
    # this many seconds (0: write every change at once, as a2a-sdk's store does).
    gateway_write_delay_seconds: float = Field(default=0.5, ge=0)
    # Accelerator switch (docs/architecture.md): the gateway's own task store (no reads of
    # a task it just created, one transaction per write, the deferred first write above);
    # off, a2a-sdk's VersionedDatabaseTaskStore reads and writes every task as is.
    gateway_fast_task_store: bool = True


class PlatformClientSettings(BaseSettings):
    """Where the other services are (the same variables agents use), and who the gateway
    is to them."""

    model_config = _CONFIG

    event_service_url: str = "http://127.0.0.1:8082"
    registry_url: str = "http://127.0.0.1:8081"
    # Its embeddings rank skills for messages that name none (unset: by words only).
    memory_url: str | None = "http://127.0.0.1:8083"
    # Its client of the other services: the SDK's lean transport, or httpx's own.
    http_transport: Literal["lean", "httpx"] = "lean"
    # jwt mode: the gateway's own token, with the claim soorma_role=service (contract C1).
    api_token: str | None = None


class ApiKeySettings(BaseSettings):
    """Which API keys external clients use, and the tenant each one acts as.

    ``SOORMA_GATEWAY_API_KEYS`` maps API keys to tenants as JSON. Keys are given as
    ``"sha256:<hex>"`` (preferred: the plain key never sits in the configuration); a
    plain key is hashed when the settings load and only its hash is kept.
    """

    model_config = _CONFIG

    gateway_api_keys: dict[str, str] = Field(default_factory=dict)

    @field_validator("gateway_api_keys")
    @classmethod
    def _hash_keys(cls, value: dict[str, str]) -> dict[str, str]:
        hashed: dict[str, Any] = {}
        for key, tenant in value.items():
            stored = key if key.startswith(HASH_PREFIX) else hash_api_key(key)
            hashed[stored.lower()] = tenant
        return hashed


class CardSettings(BaseSettings):
    """The gateway's agent card: its name, where clients reach it, how long it is cached."""

    model_config = _CONFIG

    # How external clients reach this gateway (the card's interface URLs).
    gateway_url: str = "http://127.0.0.1:8085"
    gateway_name: str = "Soorma A2A gateway"
    gateway_description: str = "The platform's agents, reachable over A2A."
    gateway_card_ttl_seconds: float = Field(default=2.0, ge=0)
    gateway_card_max_age_seconds: int = Field(default=5, ge=0)


class RoutingSettings(BaseSettings):
    """How a message becomes an event, and how its answer and cancellation come back."""

    model_config = _CONFIG

    # The skill a message without metadata.skill goes to (e.g. a planner's goal event).
    gateway_default_skill: str | None = None
    # Routing a skill-less message by meaning: the closest skill's cosine similarity must
    # reach this and lead the next one by the margin (else: by words, else an error).
    gateway_route_min_similarity: float = Field(default=0.25, ge=-1, le=1)
    gateway_route_min_margin: float = Field(default=0.05, ge=0, le=2)
    # Event type agents answer a gateway task with (on action-results).
    gateway_response_event: str = "a2a.task.result"
    # Published on system-events (correlation_id = task id) when a client cancels.
    gateway_cancel_event: str = "a2a.task.cancel"
    # How long a send waits for the answer stream before the event service counts as down.
    gateway_bus_ready_timeout_seconds: float = Field(default=5.0, gt=0)
    gateway_max_body_bytes: int = Field(default=1024 * 1024, ge=1024)


class PushSettings(BaseSettings):
    """Push notifications (gateway_a2a.push, gateway_a2a.pushpolicy)."""

    model_config = _CONFIG

    gateway_push_enabled: bool = True
    # Targets allowed. Unset: "*" (public hosts) and, in dev mode, "loopback" too (see
    # Settings.push_allow_list).
    gateway_push_allow: Annotated[list[str] | None, NoDecode] = None
    gateway_push_attempts: int = Field(default=4, ge=1)
    gateway_push_backoff_seconds: float = Field(default=0.5, gt=0)
    gateway_push_timeout_seconds: float = Field(default=5.0, gt=0)
    # A task's push configs are re-read for dispatch at most this often (per replica).
    gateway_push_config_ttl_seconds: float = Field(default=1.0, ge=0)

    @field_validator("gateway_push_allow", mode="before")
    @classmethod
    def _split_hosts(cls, value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, str):
            value = json.loads(value) if value.lstrip().startswith("[") else value.split(",")
        return [str(h).strip().lower() for h in value if str(h).strip()]


class ReplicaSettings(BaseSettings):
    """Running several gateways: each replica's id, heartbeats, takeover and polling."""

    model_config = _CONFIG

    # Stable per replica: it names the replica's durable consumer group, so a restarted
    # replica resumes the events it missed. Two replicas need two different ids.
    gateway_replica_id: str = Field(default_factory=socket.gethostname)
    # Cross-replica polling of the shared task_events table (resubscribe on B).
    gateway_poll_interval_seconds: float = Field(default=0.2, gt=0)
    # Takeover: each replica writes a heartbeat this often; a replica silent for the
    # lease has stopped, and a live one takes its unfinished tasks over. A taken-over
    # task whose answer is not known to the taker fails after the grace period.
    gateway_heartbeat_seconds: float = Field(default=5.0, gt=0)
    gateway_replica_lease_seconds: float = Field(default=30.0, gt=0)
    gateway_takeover_grace_seconds: float = Field(default=60.0, ge=0)


class Settings(
    ServiceSettings,
    GatewayStorageSettings,
    PlatformClientSettings,
    ApiKeySettings,
    CardSettings,
    RoutingSettings,
    PushSettings,
    ReplicaSettings,
):
    """Gateway settings: servicekit's shared groups and the gateway's own (:data:`GROUPS`),
    each read from its flat ``SOORMA_*`` variables (empty ones count as unset)."""

    model_config = _CONFIG

    @property
    def push_allow_list(self) -> list[str]:
        """The push allow-list in force: the setting, or the default for the auth mode.

        By default any public host is a target, and in dev mode (a developer's machine,
        receivers on it) loopback addresses too; private and link-local addresses only
        when listed.
        """
        if self.gateway_push_allow is not None:
            return self.gateway_push_allow
        return ["*", "loopback"] if self.auth_mode == "dev" else ["*"]


GROUPS = (
    GatewayStorageSettings,
    PlatformClientSettings,
    ApiKeySettings,
    CardSettings,
    RoutingSettings,
    PushSettings,
    ReplicaSettings,
)
