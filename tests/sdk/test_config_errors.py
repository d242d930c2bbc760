"""Configuration the user got wrong fails at once, naming the variable and the fix."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest
from sdk_helpers import subprocess_env

from soorma import PlatformSettings
from soorma._config import KNOWN_VARIABLES, unknown_variables
from soorma._services import load_service
from soorma_common.errors import ConfigurationError
from testsupport import forkserver

SOORMA = str(Path(sys.executable).with_name("soorma"))


@pytest.mark.parametrize(
    ("variable", "value", "hint"),
    [
        ("SOORMA_URL", "127.0.0.1:8080", "did you mean http://127.0.0.1:8080?"),
        ("SOORMA_MEMORY_URL", "localhost:8083", "did you mean http://localhost:8083?"),
        ("SOORMA_EVENT_SERVICE_URL", "ftp://host:1", "expected http:// or https://"),
    ],
)
def test_a_url_without_an_http_scheme_fails_at_once_naming_the_variable(
    variable: str, value: str, hint: str
) -> None:
    with pytest.raises(ConfigurationError) as caught:
        PlatformSettings.from_env({variable: value})
    assert variable in str(caught.value)
    assert hint in str(caught.value)


def test_an_unknown_soorma_variable_is_logged_with_the_closest_known_name(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="soorma.config"):
        PlatformSettings.from_env({"SOORMA_EVENTS_URLL": "http://x:1"})
    assert "SOORMA_EVENTS_URLL is set but no Soorma setting has that name" in caplog.text
    assert "did you mean SOORMA_EVENT_SERVICE_URL?" in caplog.text


def test_every_service_setting_is_a_known_variable() -> None:
    names = set()
    for service in ("registry", "events", "memory", "tracker", "gateway"):
        settings = load_service(service).Settings
        prefix = settings.model_config.get("env_prefix", "")
        names.update(
            f"{prefix}{name}".upper()
            for name, field in settings.model_fields.items()
            # OpenTelemetry's own variables (OTEL_*, read under their own names).
            if field.validation_alias is None
        )
    assert names <= KNOWN_VARIABLES, sorted(names - KNOWN_VARIABLES)
    assert unknown_variables({"SOORMA_REDIS_URL": "redis://x", "PATH": "/bin"}) == {}


def test_soorma_dev_names_the_variable_and_the_allowed_values_of_a_bad_setting(
    tmp_path: Path,
) -> None:
    env = subprocess_env(SOORMA_EVENT_BACKEND="redsi", SOORMA_DATA_DIR=str(tmp_path))
    done = forkserver.run(
        [SOORMA, "dev", "--only", "events", "--port", "events=0", "--port", "platform=0"],
        env=env,
        timeout=120,
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "SOORMA_EVENT_BACKEND='redsi' is not allowed" in done.stderr
    assert "'memory' or 'redis'" in done.stderr


def test_the_cli_reports_a_bad_url_in_one_line(tmp_path: Path) -> None:
    env = subprocess_env(SOORMA_URL="localhost:8080")
    done = forkserver.run(
        [SOORMA, "events", "publish", "--topic", "custom.x", "--type", "x.happened"],
        env=env,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "soorma: SOORMA_URL='localhost:8080' is not an http(s) URL; "
        "did you mean http://localhost:8080?"
    ]
