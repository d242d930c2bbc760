"""Settings for the gateway-a2a (``SOORMA_`` prefix)."""

from __future__ import annotations

import hashlib
import json
import socket
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator
from pydantic_settings import NoDecode, SettingsConfigDict

from servicekit.settings import ServiceSettings

DEFAULT_PORT = 8085
HASH_PREFIX = "sha256:"


def hash_api_key(key: str) -> str:
    """The stored form of an API key: ``sha256:<hex digest>``."""
    return HASH_PREFIX + hashlib.sha256(key.encode("utf-8")).hexdigest()


class Settings(ServiceSettings):
    """Gateway settings.

    ``SOORMA_GATEWAY_API_KEYS`` maps API keys to tenants as JSON. Keys are given as
    ``"sha256:<hex>"`` (preferred: the plain key never sits in the configuration); a
    plain key is hashed when the settings load and only its hash is kept.
    """

    # Compose passes unset options as empty strings: they mean "not set".
    model_config = SettingsConfigDict(env_prefix="SOORMA_", extra="ignore", env_ignore_empty=True)

    gateway_database_url: str | None = None
    # Where the other services are (the same variables agents use).
    event_service_url: str = "http://127.0.0.1:8082"
    registry_url: str = "http://127.0.0.1:8081"
    # Its embeddings rank skills for messages that name none (unset: by words only).
    memory_url: str | None = "http://127.0.0.1:8083"
    # How external clients reach this gateway (the card's interface URLs).
    gateway_url: str = "http://127.0.0.1:8085"
    # Its client of the other services: the SDK's lean transport, or httpx's own.
    http_transport: Literal["lean", "httpx"] = "lean"
    # jwt mode: the gateway's own token, with the claim soorma_role=service (contract C1).
    api_token: str | None = None
    gateway_api_keys: dict[str, str] = Field(default_factory=dict)
    # Stable per replica: it names the replica's durable consumer group, so a restarted
    # replica resumes the events it missed. Two replicas need two different ids.
    gateway_replica_id: str = Field(default_factory=socket.gethostname)
    gateway_name: str = "Soorma A2A gateway"
    gateway_description: str = "The platform's agents, reachable over A2A."
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
    gateway_card_ttl_seconds: float = Field(default=2.0, ge=0)
    gateway_card_max_age_seconds: int = Field(default=5, ge=0)
    gateway_push_enabled: bool = True
    # Push notifications: targets allowed (gateway_a2a.pushpolicy). Unset: "*" (public
    # hosts) and, in dev mode, "loopback" too (see push_allow_list).
    gateway_push_allow: Annotated[list[str] | None, NoDecode] = None
    gateway_push_attempts: int = Field(default=4, ge=1)
    gateway_push_backoff_seconds: float = Field(default=0.5, gt=0)
    gateway_push_timeout_seconds: float = Field(default=5.0, gt=0)
    # A task's push configs are re-read for dispatch at most this often (per replica).
    gateway_push_config_ttl_seconds: float = Field(default=1.0, ge=0)
    # Cross-replica polling of the shared task_events table (resubscribe on B).
    gateway_poll_interval_seconds: float = Field(default=0.2, gt=0)
    # How long a send waits for the answer stream before the event service counts as down.
    gateway_bus_ready_timeout_seconds: float = Field(default=5.0, gt=0)
    # A blocking send's task is written once when it ends or asks for input, or after
    # this many seconds (0: write every change at once, as a2a-sdk's store does).
    gateway_write_delay_seconds: float = Field(default=0.5, ge=0)
    # Accelerator switch (docs/architecture.md): the gateway's own task store (no reads of
    # a task it just created, one transaction per write, the deferred first write above);
    # off, a2a-sdk's VersionedDatabaseTaskStore reads and writes every task as is.
    gateway_fast_task_store: bool = True
    # Takeover: each replica writes a heartbeat this often; a replica silent for the
    # lease has stopped, and a live one takes its unfinished tasks over. A taken-over
    # task whose answer is not known to the taker fails after the grace period.
    gateway_heartbeat_seconds: float = Field(default=5.0, gt=0)
    gateway_replica_lease_seconds: float = Field(default=30.0, gt=0)
    gateway_takeover_grace_seconds: float = Field(default=60.0, ge=0)
    gateway_max_body_bytes: int = Field(default=1024 * 1024, ge=1024)

    @field_validator("gateway_api_keys")
    @classmethod
    def _hash_keys(cls, value: dict[str, str]) -> dict[str, str]:
        hashed: dict[str, Any] = {}
        for key, tenant in value.items():
            stored = key if key.startswith(HASH_PREFIX) else hash_api_key(key)
            hashed[stored.lower()] = tenant
        return hashed

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

    @field_validator("gateway_push_allow", mode="before")
    @classmethod
    def _split_hosts(cls, value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, str):
            value = json.loads(value) if value.lstrip().startswith("[") else value.split(",")
        return [str(h).strip().lower() for h in value if str(h).strip()]
