"""The shared service settings come in groups by concern, read from the same variables."""

from __future__ import annotations

import jwt
import pytest
from pydantic import ValidationError

from servicekit.auth import issue_token
from servicekit.server import uvicorn_options
from servicekit.settings import (
    AuthSettings,
    LimitsSettings,
    LoggingSettings,
    MetricsSettings,
    ServiceSettings,
    StorageSettings,
    TracingSettings,
)
from servicekit.tracing import tracing_settings

GROUPS = (
    AuthSettings,
    LimitsSettings,
    LoggingSettings,
    MetricsSettings,
    StorageSettings,
    TracingSettings,
)


def test_every_shared_setting_belongs_to_exactly_one_group() -> None:
    owners: dict[str, list[str]] = {}
    for group in GROUPS:
        for name in group.model_fields:
            owners.setdefault(name, []).append(group.__name__)
    assert set(owners) == set(ServiceSettings.model_fields)
    assert all(len(groups) == 1 for groups in owners.values()), owners


def test_each_group_reads_its_own_soorma_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOORMA_AUTH_MODE", "jwt")
    monkeypatch.setenv("SOORMA_MAX_HEADER_BYTES", "4096")
    monkeypatch.setenv("SOORMA_ACCESS_LOG", "true")
    monkeypatch.setenv("SOORMA_METRICS_ENABLED", "false")
    monkeypatch.setenv("SOORMA_BACKEND_CHECK_SECONDS", "0")
    assert AuthSettings().auth_mode == "jwt"
    assert LimitsSettings().max_header_bytes == 4096
    assert LoggingSettings().access_log is True
    assert MetricsSettings().metrics_enabled is False
    assert StorageSettings().backend_check_seconds == 0
    composed = ServiceSettings()
    assert (composed.auth_mode, composed.max_header_bytes, composed.access_log) == (
        "jwt",
        4096,
        True,
    )


def test_a_group_checks_its_own_rules() -> None:
    with pytest.raises(ValidationError, match="SOORMA_METRICS_TOKEN"):
        MetricsSettings(metrics_tenant_label=True)
    with pytest.raises(ValidationError, match="SOORMA_METRICS_TOKEN"):
        ServiceSettings(metrics_tenant_label=True)


def test_code_needing_one_concern_takes_that_group_alone() -> None:
    token = issue_token(AuthSettings(jwt_secret="s" * 32), tenant_id="acme", user_id="ada")
    assert jwt.decode(token, "s" * 32, algorithms=["HS256"])["tenant_id"] == "acme"
    assert (
        uvicorn_options(LimitsSettings(max_header_bytes=2048))["h11_max_incomplete_event_size"]
        == 2048
    )


def test_tracing_reads_the_otel_variables_under_their_own_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("OTEL_SDK_DISABLED", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SERVICE_NAME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console,none")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "events-eu")
    monkeypatch.setenv("SOORMA_OTEL_RECORD_PROMPTS", "true")
    group = TracingSettings()
    assert group.otel_traces_exporter == "console,none"
    assert ServiceSettings().otel_service_name == "events-eu"
    # One parser for the SDK and the services: the same value the SDK reads.
    read = tracing_settings(group)
    assert (read.exporters, read.protocol, read.service_name, read.record_prompts) == (
        ("console",),
        "grpc",
        "events-eu",
        True,
    )
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert tracing_settings(TracingSettings()).exporters == ()
    # Built by hand, by field name: tracing off unless asked.
    assert tracing_settings(TracingSettings(otel_traces_exporter="none")).exporters == ()
