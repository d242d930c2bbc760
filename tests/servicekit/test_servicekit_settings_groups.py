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
)

GROUPS = (AuthSettings, LimitsSettings, LoggingSettings, MetricsSettings, StorageSettings)


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
