"""Every ``SOORMA_*`` variable the platform knows is read by something: no setting is
declared, documented and then ignored."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from pydantic import AliasChoices
from pydantic_settings import BaseSettings

from soorma._config import KNOWN_VARIABLES

ROOT = Path(__file__).resolve().parents[2]
NAME = re.compile(r"\bSOORMA_[A-Z0-9_]*[A-Z0-9]\b")
SETTINGS_MODULES = (
    "servicekit.settings",
    "event_service.settings",
    "memory_service.settings",
    "registry_service.settings",
    "tracker_service.settings",
    "gateway_a2a.settings",
)


def service_fields() -> dict[str, str]:
    """Each service setting's variable -> its field name (pydantic-settings, ``SOORMA_``)."""
    fields: dict[str, str] = {}
    for module_name in SETTINGS_MODULES:
        module = importlib.import_module(module_name)
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, BaseSettings):
                for name, field in value.model_fields.items():
                    alias = field.validation_alias
                    if isinstance(alias, AliasChoices):
                        # Read under another name (OpenTelemetry's OTEL_* variables).
                        fields[str(alias.choices[0])] = name
                    else:
                        fields[f"SOORMA_{name.upper()}"] = name
    return fields


def named_outside_settings() -> set[str]:
    """Variables named by code that reads them directly: the SDK's settings module,
    soorma_common, the services, the scripts, the packaging and the tests."""
    sources = [
        ROOT / "sdk" / "soorma" / "settings.py",
        *(ROOT / "common").rglob("*.py"),
        *(ROOT / "services").rglob("*.py"),
        *(ROOT / "scripts").glob("*.sh"),
        *(ROOT / "tests").rglob("*.py"),
        ROOT / "compose.yaml",
        ROOT / "Dockerfile",
        ROOT / ".ci" / "run",
    ]
    this = Path(__file__).resolve()
    return {
        name
        for path in sources
        if path.resolve() != this
        for name in NAME.findall(path.read_text(encoding="utf-8"))
    }


def test_every_known_variable_is_read() -> None:
    read = set(service_fields()) | named_outside_settings()
    assert sorted(KNOWN_VARIABLES - read) == [], "remove these from soorma._config and docs"


def test_every_service_setting_is_used_by_its_service() -> None:
    code = "\n".join(
        path.read_text(encoding="utf-8")
        for path in (ROOT / "services").rglob("*.py")
        if path.name != "settings.py"
    )
    unused = sorted(
        variable
        for variable, name in service_fields().items()
        if not re.search(rf"\.{name}\b", code)
    )
    assert unused == [], "a setting no service code reads: remove it (and its docs)"
