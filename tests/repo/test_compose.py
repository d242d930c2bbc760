"""compose.yaml stays production-shaped: healthchecks and health-gated dependencies."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ["registry-service", "event-service", "memory-service", "tracker-service", "gateway-a2a"]


def test_compose_runs_every_service_with_healthchecks() -> None:
    doc = yaml.safe_load((ROOT / "compose.yaml").read_text())
    services = doc["services"]
    for name in [*SERVICES, "postgres", "redis"]:
        assert name in services, name
        assert "healthcheck" in services[name], f"{name} has no healthcheck"
    for name in SERVICES:
        deps = services[name]["depends_on"]
        assert isinstance(deps, dict), f"{name}: bare depends_on list"
        assert all(d["condition"] == "service_healthy" for d in deps.values())
        app_path = services[name]["environment"]["SOORMA_SERVICE_APP"]
        module = app_path.split(":")[0]
        assert (ROOT / "services" / name / module.split(".")[0]).is_dir(), app_path


def test_ci_runs_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "./scripts/test.sh" in readme
    assert "scripts/test.sh" in ci


def test_sdk_installs_without_server_libraries() -> None:
    """`pip install ./sdk` must not pull a web framework, an ORM or Redis server libraries."""
    import tomllib

    project = tomllib.loads((ROOT / "sdk" / "pyproject.toml").read_text())["project"]
    deps = " ".join(project["dependencies"]).lower()
    for forbidden in (
        "fastapi",
        "starlette",
        "uvicorn",
        "sqlmodel",
        "sqlalchemy",
        "redis",
        "asyncpg",
        "litellm",
    ):
        assert forbidden not in deps, f"sdk depends on {forbidden}"
