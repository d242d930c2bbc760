"""Each service's own settings come in groups by concern, read from the same flat variables.

For the event service, the memory service, the registry, the tracker and the gateway:
every field of a service's ``Settings`` belongs to exactly one group (its own, or
servicekit's shared ones), and each group, built alone, reads its ``SOORMA_*`` variable
into the field the composed ``Settings`` has too.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from servicekit.settings import (
    AuthSettings,
    LimitsSettings,
    LoggingSettings,
    MetricsSettings,
    StorageSettings,
    TracingSettings,
)

SHARED = (
    AuthSettings,
    LimitsSettings,
    LoggingSettings,
    MetricsSettings,
    StorageSettings,
    TracingSettings,
)
SERVICES = ("event_service", "memory_service", "registry_service", "tracker_service", "gateway_a2a")

# service -> (group, variable, value set, value read) for one field of each of its groups.
SAMPLES: dict[str, list[tuple[str, str, str, Any]]] = {
    "event_service": [
        ("BackendSettings", "SOORMA_REDIS_PREFIX", "eu1", "eu1"),
        ("AcceleratorSettings", "SOORMA_REDIS_DIRECT", "false", False),
        ("StreamSettings", "SOORMA_CLAIM_INTERVAL_SECONDS", "0.5", 0.5),
        ("DeliverySettings", "SOORMA_DEFAULT_PREFETCH", "8", 8),
        ("EventLimitsSettings", "SOORMA_MAX_REQUEST_BYTES", "4096", 4096),
        (
            "TapSettings",
            "SOORMA_TAP_TOPICS",
            "plan-events, task-events",
            ["plan-events", "task-events"],
        ),
    ],
    "memory_service": [
        ("MemoryStorageSettings", "SOORMA_MEMORY_DATABASE_URL", "sqlite:///m.db", "sqlite:///m.db"),
        ("RetentionSettings", "SOORMA_MEMORY_RETENTION_EPISODIC_DAYS", "7", 7.0),
        ("EmbeddingSettings", "SOORMA_EMBEDDING_RETRIES", "5", 5),
        ("VectorIndexSettings", "SOORMA_MEMORY_VECTOR_SEAL_ROWS", "123", 123),
        ("AcceleratorSettings", "SOORMA_SEMANTIC_SEARCH_FAST_PATH", "false", False),
    ],
    "registry_service": [
        ("RegistryStorageSettings", "SOORMA_REGISTRY_PURGE_INTERVAL_SECONDS", "5", 5.0),
        ("CardSettings", "SOORMA_A2A_GATEWAY_URL", "https://a2a.example", "https://a2a.example"),
    ],
    "tracker_service": [
        (
            "TrackerStorageSettings",
            "SOORMA_TRACKER_DATABASE_URL",
            "sqlite:///t.db",
            "sqlite:///t.db",
        ),
        ("PlatformClientSettings", "SOORMA_MEMORY_URL", "http://memory:1", "http://memory:1"),
        ("ProjectorSettings", "SOORMA_TRACKER_BATCH", "50", 50),
        ("ReplicaSettings", "SOORMA_REPLICA", "3", "3"),
        ("PlanStreamSettings", "SOORMA_TRACKER_STREAM_POLL_SECONDS", "1.5", 1.5),
        ("TimeoutSettings", "SOORMA_TRACKER_TIMEOUTS", "false", False),
    ],
    "gateway_a2a": [
        ("GatewayStorageSettings", "SOORMA_GATEWAY_FAST_TASK_STORE", "false", False),
        ("PlatformClientSettings", "SOORMA_HTTP_TRANSPORT", "httpx", "httpx"),
        (
            "ApiKeySettings",
            "SOORMA_GATEWAY_API_KEYS",
            '{"sha256:AB": "acme"}',
            {"sha256:ab": "acme"},
        ),
        ("CardSettings", "SOORMA_GATEWAY_NAME", "Acme agents", "Acme agents"),
        ("RoutingSettings", "SOORMA_GATEWAY_ROUTE_MIN_MARGIN", "0.2", 0.2),
        ("PushSettings", "SOORMA_GATEWAY_PUSH_ALLOW", "Hooks.example, *", ["hooks.example", "*"]),
        ("ReplicaSettings", "SOORMA_GATEWAY_REPLICA_ID", "gw-2", "gw-2"),
    ],
}


def settings_module(service: str) -> Any:
    return importlib.import_module(f"{service}.settings")


@pytest.mark.parametrize("service", SERVICES)
def test_every_setting_of_a_service_belongs_to_exactly_one_group(service: str) -> None:
    module = settings_module(service)
    owners: dict[str, list[str]] = {}
    for group in (*SHARED, *module.GROUPS):
        for name in group.model_fields:
            owners.setdefault(name, []).append(group.__name__)
    assert set(owners) == set(module.Settings.model_fields)
    assert all(len(groups) == 1 for groups in owners.values()), owners
    assert sorted(g.__name__ for g in module.GROUPS) == sorted(s[0] for s in SAMPLES[service])


@pytest.mark.parametrize(
    ("service", "group", "variable", "raw", "expected"),
    [(service, *sample) for service, samples in SAMPLES.items() for sample in samples],
)
def test_each_group_reads_its_variable_into_its_field(
    monkeypatch: pytest.MonkeyPatch,
    service: str,
    group: str,
    variable: str,
    raw: str,
    expected: Any,
) -> None:
    module = settings_module(service)
    field = variable.removeprefix("SOORMA_").lower()
    monkeypatch.setenv(variable, raw)
    alone = getattr(module, group)()
    assert getattr(alone, field) == expected
    assert getattr(module.Settings(), field) == expected
    monkeypatch.delenv(variable)
    default = module.Settings.model_fields[field].get_default(call_default_factory=True)
    assert getattr(getattr(module, group)(), field) == default != expected


def test_the_gateway_groups_keep_empty_variables_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    from gateway_a2a.settings import PushSettings, Settings

    monkeypatch.setenv("SOORMA_GATEWAY_PUSH_ALLOW", "")
    monkeypatch.setenv("SOORMA_GATEWAY_PUSH_ATTEMPTS", "")
    assert PushSettings().gateway_push_allow is None
    assert Settings().gateway_push_attempts == 4
    assert Settings(auth_mode="jwt").push_allow_list == ["*"]
