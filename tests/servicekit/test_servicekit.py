"""Identity modes, the common error shape, health and readiness."""

from __future__ import annotations

import httpx
import pytest
from asgi_lifespan import LifespanManager
from fastapi import APIRouter

from servicekit import CurrentIdentity, ServiceSettings, create_service_app
from servicekit.auth import issue_token
from soorma_common.base import BaseDTO
from soorma_common.errors import PlanNotFound

pytestmark = pytest.mark.asyncio

router = APIRouter()


@router.get("/whoami")
async def whoami(identity: CurrentIdentity) -> dict[str, str]:
    return {"tenant_id": identity.tenant_id, "user_id": identity.user_id}


@router.get("/missing/{plan_id}")
async def missing(plan_id: str) -> None:
    raise PlanNotFound(f"plan {plan_id!r} not found", details={"plan_id": plan_id})


class _Envelope(BaseDTO):
    task_id: str
    count: int = 0


@router.post("/dto")
async def dto(body: _Envelope) -> dict[str, str]:
    return {"task_id": body.task_id}


@router.post("/echo")
async def echo(body: dict[str, int]) -> dict[str, int]:
    return body


def _client(settings: ServiceSettings) -> tuple[LifespanManager, httpx.AsyncClient]:
    app = create_service_app(name="test-svc", settings=settings, routers=[router])
    manager = LifespanManager(app)
    client = httpx.AsyncClient(transport=httpx.ASGITransport(manager.app), base_url="http://t")
    return manager, client


async def test_dev_mode_takes_identity_from_headers_with_defaults() -> None:
    manager, client = _client(ServiceSettings(auth_mode="dev"))
    async with manager, client:
        r = await client.get("/whoami")
        assert r.json() == {"tenant_id": "default", "user_id": "anonymous"}
        r = await client.get("/whoami", headers={"X-Tenant-ID": "acme", "X-User-ID": "u1"})
        assert r.json() == {"tenant_id": "acme", "user_id": "u1"}
        r = await client.get("/whoami", headers={"X-Tenant-ID": "a{b}"})
        assert r.status_code == 422
        assert "tenant_id" in r.json()["error"]["message"]


async def test_jwt_mode_requires_a_valid_token() -> None:
    settings = ServiceSettings(auth_mode="jwt", jwt_secret="s3cret-for-tests-only-0123456789")
    manager, client = _client(settings)
    async with manager, client:
        r = await client.get("/whoami")
        assert r.status_code == 401
        assert r.json()["error"]["code"] == "unauthenticated"
        r = await client.get("/whoami", headers={"Authorization": "Bearer not-a-jwt"})
        assert r.status_code == 401
        forged = issue_token(
            ServiceSettings(jwt_secret="another-secret-entirely-0123456789"),
            tenant_id="acme",
            user_id="u1",
        )
        r = await client.get("/whoami", headers={"Authorization": f"Bearer {forged}"})
        assert r.status_code == 401

        token = issue_token(settings, tenant_id="acme", user_id="u1")
        auth = {"Authorization": f"Bearer {token}"}
        r = await client.get("/whoami", headers=auth)
        assert r.json() == {"tenant_id": "acme", "user_id": "u1"}
        r = await client.get("/whoami", headers={**auth, "X-Tenant-ID": "other"})
        assert r.status_code == 403
        assert r.json()["error"]["code"] == "permission_denied"
        r = await client.get("/whoami", headers={**auth, "X-Tenant-ID": "acme"})
        assert r.status_code == 200


async def test_domain_errors_render_in_the_common_shape() -> None:
    manager, client = _client(ServiceSettings())
    async with manager, client:
        r = await client.get("/missing/p-1")
        assert r.status_code == 404
        assert r.json() == {
            "error": {
                "code": "plan_not_found",
                "message": "plan 'p-1' not found",
                "details": {"plan_id": "p-1"},
            }
        }
        r = await client.get("/nowhere")
        assert r.status_code == 404
        assert r.json()["error"]["code"] == "not_found"


async def test_validation_errors_name_the_field() -> None:
    manager, client = _client(ServiceSettings())
    async with manager, client:
        r = await client.post("/echo", json={"count": "many"})
        assert r.status_code == 422
        body = r.json()["error"]
        assert body["code"] == "validation_error"
        assert "count" in body["message"]
        assert body["details"][0]["field"] == "count"
        r = await client.post("/dto", json={"count": 1})
        assert r.status_code == 422
        assert r.json()["error"]["details"][0]["field"] == "task_id"
        assert "task_id" in r.json()["error"]["message"]


async def test_oversized_body_is_rejected_with_413() -> None:
    manager, client = _client(ServiceSettings(max_payload_bytes=100))
    async with manager, client:
        r = await client.post(
            "/echo", content=b"{" + b" " * 1000 + b"}", headers={"content-type": "application/json"}
        )
        assert r.status_code == 413
        assert r.json()["error"]["code"] == "payload_too_large"


@pytest.mark.parametrize("path", ["/health", "/ready"])
async def test_health_and_ready(path: str) -> None:
    manager, client = _client(ServiceSettings())
    async with manager, client:
        r = await client.get(path)
        assert r.status_code == 200
        assert r.headers["x-request-id"]


async def test_apps_of_one_service_share_built_routes_but_not_state() -> None:
    """Routes are built once per process; each app still answers with its own settings."""
    dev = create_service_app(name="s", settings=ServiceSettings(auth_mode="dev"), routers=[router])
    jwt = create_service_app(
        name="s", settings=ServiceSettings(auth_mode="jwt", jwt_secret="x" * 32), routers=[router]
    )
    included = [route for route in dev.router.routes if not hasattr(route, "endpoint")]
    assert included and all(any(r is i for r in jwt.router.routes) for i in included)
    for app, expected in ((dev, 200), (jwt, 401)):
        async with (
            LifespanManager(app) as manager,
            httpx.AsyncClient(
                transport=httpx.ASGITransport(manager.app), base_url="http://t"
            ) as client,
        ):
            assert (await client.get("/whoami")).status_code == expected
    # The app-wide guard reaches the shared routes: NUL in a path parameter is a 422.
    manager, client = _client(ServiceSettings(auth_mode="dev"))
    async with manager, client:
        assert (await client.get("/missing/a%00b")).status_code == 422
