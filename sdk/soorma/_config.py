"""Checks on the ``SOORMA_*`` environment: fail at once on what no retry can fix.

A URL without a scheme raises :class:`ConfigurationError` naming the variable; a
``SOORMA_*`` variable nobody reads (``SOORMA_EVENTS_URL``) is logged once, with the
closest known name.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Mapping
from urllib.parse import urlsplit

from soorma_common.errors import ConfigurationError

logger = logging.getLogger("soorma.config")

# Every SOORMA_* variable the SDK, the services, the scripts and the tests read
# (tests/repo/test_variables_documented.py: each is documented and each one code names is
# here; tests/repo/test_variables_read.py: each is read by something). The SDK reads its
# own in soorma.settings.
KNOWN_VARIABLES: frozenset[str] = frozenset(
    {
        # memory service: long-term memory embeddings
        "SOORMA_EMBEDDING_API_BASE",
        "SOORMA_EMBEDDING_API_KEY",
        "SOORMA_EMBEDDING_BATCH_SIZE",
        "SOORMA_EMBEDDING_DIMENSIONS",
        "SOORMA_EMBEDDING_MODEL",
        "SOORMA_EMBEDDING_RETRIES",
        "SOORMA_EMBEDDING_TIMEOUT_SECONDS",
        "SOORMA_REEMBED_BATCH_SIZE",
        # memory service: semantic vector index built in bulk (PostgreSQL)
        "SOORMA_MEMORY_VECTOR_SEAL_ROWS",
        "SOORMA_MEMORY_VECTOR_IDLE_SECONDS",
        "SOORMA_MEMORY_VECTOR_BUILD_MEMORY_MB",
        # SDK (soorma.settings) and the soorma command
        "SOORMA_URL",
        "SOORMA_EVENT_SERVICE_URL",
        "SOORMA_MEMORY_URL",
        "SOORMA_REGISTRY_URL",
        "SOORMA_TRACKER_URL",
        "SOORMA_GATEWAY_URL",
        "SOORMA_API_TOKEN",
        "SOORMA_TENANT_ID",
        "SOORMA_USER_ID",
        "SOORMA_SERVICE_ROLE",
        "SOORMA_CONSUMER_ID",
        "SOORMA_REPLICA",
        "SOORMA_STATE_DIR",
        "SOORMA_HTTP_TRANSPORT",
        "SOORMA_PUBLISH_COALESCE",
        "SOORMA_ACK_BATCHING",
        "SOORMA_GATEWAY_API_KEY",
        "SOORMA_OTEL_RECORD_PROMPTS",
        "SOORMA_LOG_FORMAT",
        # services (their pydantic settings, env_prefix SOORMA_)
        "SOORMA_A2A_GATEWAY_URL",
        "SOORMA_ACCESS_LOG",
        "SOORMA_AUTH_MODE",
        "SOORMA_BACKEND_CHECK_SECONDS",
        "SOORMA_BLOCK_SECONDS",
        "SOORMA_CLAIM_INTERVAL_SECONDS",
        "SOORMA_DATABASE_URL",
        "SOORMA_DATA_DIR",
        "SOORMA_DEFAULT_MAX_DELIVERIES",
        "SOORMA_DEFAULT_PREFETCH",
        "SOORMA_DEFAULT_TENANT",
        "SOORMA_DEFAULT_USER",
        "SOORMA_DEFAULT_VISIBILITY_TIMEOUT",
        "SOORMA_DELIVERY_CAP_FACTOR",
        "SOORMA_EVENT_BACKEND",
        "SOORMA_GATEWAY_API_KEYS",
        "SOORMA_GATEWAY_BUS_READY_TIMEOUT_SECONDS",
        "SOORMA_GATEWAY_CANCEL_EVENT",
        "SOORMA_GATEWAY_CARD_MAX_AGE_SECONDS",
        "SOORMA_GATEWAY_CARD_TTL_SECONDS",
        "SOORMA_GATEWAY_DATABASE_URL",
        "SOORMA_GATEWAY_DEFAULT_SKILL",
        "SOORMA_GATEWAY_DESCRIPTION",
        "SOORMA_GATEWAY_HEARTBEAT_SECONDS",
        "SOORMA_GATEWAY_MAX_BODY_BYTES",
        "SOORMA_GATEWAY_NAME",
        "SOORMA_GATEWAY_POLL_INTERVAL_SECONDS",
        "SOORMA_GATEWAY_PUSH_ALLOW",
        "SOORMA_GATEWAY_PUSH_ATTEMPTS",
        "SOORMA_GATEWAY_PUSH_BACKOFF_SECONDS",
        "SOORMA_GATEWAY_PUSH_CONFIG_TTL_SECONDS",
        "SOORMA_GATEWAY_PUSH_ENABLED",
        "SOORMA_GATEWAY_PUSH_TIMEOUT_SECONDS",
        "SOORMA_GATEWAY_REPLICA_ID",
        "SOORMA_GATEWAY_REPLICA_LEASE_SECONDS",
        "SOORMA_GATEWAY_RESPONSE_EVENT",
        "SOORMA_GATEWAY_ROUTE_MIN_MARGIN",
        "SOORMA_GATEWAY_ROUTE_MIN_SIMILARITY",
        "SOORMA_GATEWAY_SERVICE_TOKEN",
        "SOORMA_GATEWAY_TAKEOVER_GRACE_SECONDS",
        "SOORMA_GATEWAY_FAST_TASK_STORE",
        "SOORMA_GATEWAY_WRITE_DELAY_SECONDS",
        "SOORMA_HEADER_TIMEOUT_SECONDS",
        "SOORMA_HEARTBEAT_SECONDS",
        "SOORMA_JWT_ALGORITHMS",
        "SOORMA_JWT_AUDIENCE",
        "SOORMA_JWT_PUBLIC_KEY",
        "SOORMA_JWT_REQUIRE_EXP",
        "SOORMA_JWT_SECRET",
        "SOORMA_LOG_LEVEL",
        "SOORMA_MAX_HEADER_BYTES",
        "SOORMA_MAX_PAYLOAD_BYTES",
        "SOORMA_MAX_REQUEST_BYTES",
        "SOORMA_MEMORY_DATABASE_URL",
        "SOORMA_MEMORY_PRUNE_INTERVAL_SECONDS",
        "SOORMA_MEMORY_RETENTION_DAYS",
        "SOORMA_MEMORY_RETENTION_EPISODIC_DAYS",
        "SOORMA_MEMORY_RETENTION_PROCEDURAL_DAYS",
        "SOORMA_MEMORY_RETENTION_SEMANTIC_DAYS",
        "SOORMA_METRICS_CACHE_SECONDS",
        "SOORMA_METRICS_ENABLED",
        "SOORMA_METRICS_MAX_STREAMS",
        "SOORMA_METRICS_TENANT_LABEL",
        "SOORMA_METRICS_TOKEN",
        "SOORMA_PLAN_CONTEXT_FAST_PATH",
        "SOORMA_SEMANTIC_SEARCH_FAST_PATH",
        "SOORMA_PUBLISH_FAST_PATH",
        "SOORMA_READ_BATCH",
        "SOORMA_REDIS_CLUSTER",
        "SOORMA_REDIS_COMMAND_TIMEOUT",
        "SOORMA_REDIS_DIRECT",
        "SOORMA_REDIS_MAX_CONNECTIONS",
        "SOORMA_REDIS_PREFIX",
        "SOORMA_REDIS_URL",
        "SOORMA_REGISTRY_DATABASE_URL",
        "SOORMA_REGISTRY_PURGE_INTERVAL_SECONDS",
        "SOORMA_SERVICE_APP",
        "SOORMA_STREAM_MAX_LENGTH",
        "SOORMA_SUBSCRIBER_BUFFER",
        "SOORMA_SUPERSEDE_CHECK_SECONDS",
        "SOORMA_TAP_TOPICS",
        "SOORMA_TRACKER_API_TOKEN",
        "SOORMA_TRACKER_BATCH",
        "SOORMA_TRACKER_BATCH_WAIT_SECONDS",
        "SOORMA_TRACKER_CONSUMER",
        "SOORMA_TRACKER_DATABASE_URL",
        "SOORMA_TRACKER_PROJECTOR",
        "SOORMA_TRACKER_STREAM_POLL_SECONDS",
        "SOORMA_TRACKER_STREAM_SETTLE_SECONDS",
        "SOORMA_TRACKER_TIMEOUTS",
        "SOORMA_TRACKER_TIMEOUT_INTERVAL_SECONDS",
        "SOORMA_TRACKER_TIMEOUT_LEASE_SECONDS",
        "SOORMA_TRACKER_VISIBILITY_TIMEOUT",
        # scripts and tests
        "SOORMA_VENV",
        "SOORMA_TEST_DATABASE_URL",
        "SOORMA_TEST_REDIS_URL",
        "SOORMA_TEST_WORKERS",
        "SOORMA_UI_SCREENSHOTS",
    }
)

_warned: set[str] = set()


def closest_variable(name: str) -> str | None:
    """The known variable ``name`` most likely misspells (``None``: nothing close)."""
    found = difflib.get_close_matches(name, sorted(KNOWN_VARIABLES), n=1, cutoff=0.6)
    return found[0] if found else None


def unknown_variables(env: Mapping[str, str]) -> dict[str, str | None]:
    """``SOORMA_*`` variables in ``env`` that nothing reads, each with its closest known name."""
    return {
        name: closest_variable(name)
        for name in sorted(env)
        if name.startswith("SOORMA_") and name not in KNOWN_VARIABLES
    }


def warn_unknown_variables(env: Mapping[str, str]) -> None:
    """Log each unknown ``SOORMA_*`` variable once per process, naming the closest one."""
    for name, closest in unknown_variables(env).items():
        if name in _warned:
            continue
        _warned.add(name)
        hint = f"; did you mean {closest}?" if closest else ""
        logger.warning("%s is set but no Soorma setting has that name%s", name, hint)


def check_url(variable: str, value: str) -> str:
    """``value`` if it is an absolute http(s) URL; :class:`ConfigurationError` otherwise.

    A URL without a scheme (``localhost:8080``) would otherwise fail each request as
    if the service were down, and be retried as such.
    """
    parts = urlsplit(value)
    if parts.scheme in ("http", "https") and parts.netloc:
        return value
    if "://" not in value:
        hint = f"; did you mean http://{value}?"
    else:
        hint = ": expected http:// or https://"
    raise ConfigurationError(
        f"{variable}={value!r} is not an http(s) URL{hint}",
        details={"variable": variable, "value": value},
    )


__all__ = [
    "KNOWN_VARIABLES",
    "check_url",
    "closest_variable",
    "unknown_variables",
    "warn_unknown_variables",
]
