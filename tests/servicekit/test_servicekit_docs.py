"""Every service's API description is served to identified callers only (jwt mode)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from servicekit.auth import issue_token
from servicekit.settings import ServiceSettings
from testsupport.services import event_settings, in_process, memory_settings, registry_settings

pytestmark = pytest.mark.asyncio

SECRET = "docs-identity-secret-for-tests-0123456789"
JWT = {"auth_mode": "jwt", "jwt_secret": SECRET}
DOCS = ["/openapi.json", "/docs", "/redoc"]


def _event(_: Path, **extra: Any) -> Any:
    from event_service import create_app

    return create_app(event_settings(**extra))


def _memory(tmp: Path, **extra: Any) -> Any:
    from memory_service import create_app

    return create_app(memory_settings(f"sqlite+aiosqlite:///{tmp}/m.db", tmp, **extra))


def _registry(tmp: Path, **extra: Any) -> Any:
    from registry_service import create_app

    return create_app(registry_settings(f"sqlite+aiosqlite:///{tmp}/r.db", tmp, **extra))


def _tracker(_: Path, **extra: Any) -> Any:
    from tracker_service import create_app
    from tracker_service.settings import Settings

    return create_app(Settings(**extra))


def _gateway(_: Path, **extra: Any) -> Any:
    from gateway_a2a import create_app
    from gateway_a2a.settings import Settings

    return create_app(Settings(**extra))


SERVICES = [
    pytest.param(f, id=f.__name__.strip("_"))
    for f in (_event, _memory, _registry, _tracker, _gateway)
]


@pytest.mark.parametrize("make_app", SERVICES)
async def test_api_docs_need_an_identity_in_jwt_mode(
    make_app: Callable[..., Any], tmp_path: Path
) -> None:
    token = issue_token(ServiceSettings(jwt_secret=SECRET), tenant_id="acme", user_id="u1")
    async with in_process(make_app(tmp_path, **JWT)) as client:
        for path in DOCS:
            r = await client.get(path)
            assert r.status_code == 401, (path, r.status_code)
            assert r.json()["error"]["code"] == "unauthenticated"
            r = await client.get(path, headers={"Authorization": "Bearer not-a-token"})
            assert r.status_code == 401, path
            r = await client.get(path, headers={"Authorization": f"Bearer {token}"})
            assert r.status_code == 200, (path, r.text[:200])
        spec = (
            await client.get("/openapi.json", headers={"Authorization": f"Bearer {token}"})
        ).json()
        assert "/health" in spec["paths"]
        assert not {"/openapi.json", "/docs", "/redoc"} & set(spec["paths"])
        # Liveness stays open: load balancers probe it without a token.
        assert (await client.get("/health")).status_code == 200
    # (dev mode: every caller has an identity; the fuzz tests read /openapi.json so)
