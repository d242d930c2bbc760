"""Every dependency a package declares is used by that package's own code."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PACKAGES = {
    "common": "soorma_common",
    "sdk": "soorma",
    "services/servicekit": "servicekit",
    "services/event-service": "event_service",
    "services/memory-service": "memory_service",
    "services/registry-service": "registry_service",
    "services/tracker-service": "tracker_service",
    "services/gateway-a2a": "gateway_a2a",
}

# Distribution name -> what its use looks like in the source (an import, or for a
# database driver the URL scheme that loads it).
USE = {
    "soorma-common": r"(from|import) soorma_common\b",
    "soorma-servicekit": r"(from|import) servicekit\b",
    "soorma": r"(from|import) soorma\b",
    "pyjwt": r"(from|import) jwt\b",
    "pydantic-settings": r"(from|import) pydantic_settings\b",
    "a2a-sdk": r"(from|import) a2a\b",
    "httpx-sse": r"(from|import) httpx_sse\b",
    "sse-starlette": r"(from|import) sse_starlette\b",
    "opentelemetry-api": r"(from|import) opentelemetry\b",
    "opentelemetry-sdk": r"(from|import) opentelemetry\.sdk\b",
    "aiosqlite": r"sqlite\+aiosqlite",
    "asyncpg": r"postgresql\+asyncpg",
}


def declared(folder: str) -> list[str]:
    project = tomllib.loads((ROOT / folder / "pyproject.toml").read_text())["project"]
    names = []
    for spec in project["dependencies"]:
        name = re.match(r"[A-Za-z0-9_.-]+", spec)
        assert name is not None, spec
        names.append(name.group(0).lower())
    return names


@pytest.mark.parametrize("folder", sorted(PACKAGES))
def test_declared_dependencies_are_used(folder: str) -> None:
    source = "\n".join(
        path.read_text() for path in (ROOT / folder / PACKAGES[folder]).rglob("*.py")
    )
    unused = [
        name
        for name in declared(folder)
        if not re.search(USE.get(name, rf"(from|import) {name.replace('-', '_')}\b"), source)
    ]
    assert unused == [], f"{folder} declares {unused} but its code never uses them"
