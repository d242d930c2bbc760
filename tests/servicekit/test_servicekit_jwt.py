"""jwt mode: a token whose content is not a usable identity is an authentication failure."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx
import jwt
import pytest
from test_servicekit_docs import SERVICES

from event_service import create_app as create_event_app
from memory_service import create_app as create_memory_app
from servicekit.auth import issue_token
from servicekit.settings import ServiceSettings
from testsupport.services import event_settings, in_process, memory_settings

pytestmark = pytest.mark.asyncio

SECRET = "jwt-hardening-secret-for-tests-0123456789"
SIGNER = ServiceSettings(jwt_secret=SECRET)

# (method, path, json body): reads and writes, including both services' fast paths.
REQUESTS: list[tuple[str, str, Any]] = [
    ("GET", "/v1/events/dlq?topic=action-requests", None),
    ("POST", "/v1/events/publish", {"event": {"topic": "business-facts", "type": "t"}}),
]
MEMORY_REQUESTS: list[tuple[str, str, Any]] = [
    ("GET", "/v1/memory/plan-context/p1", None),  # fast path
    ("GET", "/v1/memory/sessions", None),
]

BAD_CLAIMS = [
    pytest.param({"tenant_id": False}, id="tenant-false"),
    pytest.param({"tenant_id": 0}, id="tenant-int"),
    pytest.param({"tenant_id": {"x": 1}}, id="tenant-object"),
    pytest.param({"tenant_id": ["acme"]}, id="tenant-list"),
    pytest.param({"tenant_id": ""}, id="tenant-empty"),
    pytest.param({"tenant_id": "a/b"}, id="tenant-slash"),
    pytest.param({"user_id": False}, id="user-false"),
    pytest.param({"user_id": {"x": 1}}, id="user-object"),
    pytest.param({"user_id": ""}, id="user-empty"),
    pytest.param({"user_id": "a/b"}, id="user-slash"),
]


def _token(ttl_seconds: float | None = 3600, **claims: Any) -> str:
    values = {"tenant_id": "acme", "user_id": "u1", **claims}
    return issue_token(SIGNER, ttl_seconds=ttl_seconds, **values)


async def _statuses(
    client: httpx.AsyncClient, token: str, requests: list[tuple[str, str, Any]]
) -> list[tuple[str, int, str]]:
    out = []
    for method, path, body in requests:
        r = await client.request(
            method, path, json=body, headers={"Authorization": f"Bearer {token}"}
        )
        out.append((path, r.status_code, r.json()["error"]["code"] if r.status_code >= 400 else ""))
    return out


@pytest.mark.parametrize("claims", BAD_CLAIMS)
async def test_non_string_or_malformed_id_claims_are_401(
    claims: dict[str, Any], tmp_path: Any
) -> None:
    token = _token(**claims)
    events = create_event_app(event_settings(auth_mode="jwt", jwt_secret=SECRET))
    async with in_process(events) as client:
        for path, status, code in await _statuses(client, token, REQUESTS):
            assert (status, code) == (401, "unauthenticated"), (claims, path, status)
    memory = create_memory_app(
        memory_settings(
            f"sqlite+aiosqlite:///{tmp_path}/m.db", tmp_path, auth_mode="jwt", jwt_secret=SECRET
        )
    )
    async with in_process(memory) as client:
        for path, status, code in await _statuses(client, token, MEMORY_REQUESTS):
            assert (status, code) == (401, "unauthenticated"), (claims, path, status)


async def test_a_token_without_exp_is_401_unless_configured() -> None:
    token = _token(ttl_seconds=None)
    assert "exp" not in jwt.decode(token, options={"verify_signature": False})
    async with in_process(
        create_event_app(event_settings(auth_mode="jwt", jwt_secret=SECRET))
    ) as client:
        [(_, status, code)] = await _statuses(client, token, REQUESTS[:1])
        assert (status, code) == (401, "unauthenticated")
        r = await client.get("/v1/events/dlq?topic=x", headers={"Authorization": f"Bearer {token}"})
        assert "exp" in r.json()["error"]["message"]
        # A token that carries exp is fine; an expired one is not.
        assert (await _statuses(client, _token(), REQUESTS[:1]))[0][1] == 200
        expired = _token(exp=int(time.time()) - 60)
        assert (await _statuses(client, expired, REQUESTS[:1]))[0][1] == 401
    async with in_process(
        create_event_app(event_settings(auth_mode="jwt", jwt_secret=SECRET, jwt_require_exp=False))
    ) as client:
        assert (await _statuses(client, token, REQUESTS[:1]))[0][1] == 200


async def test_a_valid_token_still_identifies_tenant_and_user() -> None:
    async with in_process(
        create_event_app(event_settings(auth_mode="jwt", jwt_secret=SECRET))
    ) as client:
        token = _token(tenant_id="acme", user_id="bob")
        r = await client.post(
            "/v1/events/publish",
            headers={"Authorization": f"Bearer {token}"},
            json={"event": {"topic": "business-facts", "type": "t"}},
        )
        assert r.status_code == 200, r.text


# One route behind the identity check per service (the gateway's is an A2A route).
PROTECTED = {
    "event": "/v1/events/dlq?topic=action-requests",
    "memory": "/v1/memory/sessions",
    "registry": "/v1/agents",
    "tracker": "/v1/tracker/plans",
    "gateway": "/tasks",
}
BAD_TIME_CLAIMS = [
    pytest.param({"exp": str(int(time.time()) + 3600)}, id="exp-numeric-string"),
    pytest.param({"exp": True}, id="exp-true"),
    pytest.param({"exp": 10**20}, id="exp-1e20-int"),
    pytest.param({"exp": 1e20}, id="exp-1e20-float"),
    pytest.param({"exp": 253402300800}, id="exp-after-9999"),
    pytest.param({"exp": [int(time.time()) + 3600]}, id="exp-list"),
    pytest.param({"nbf": "0"}, id="nbf-string"),
    pytest.param({"iat": False}, id="iat-false"),
    pytest.param({"iat": -1}, id="iat-before-1970"),
]


@pytest.mark.parametrize("make_app", SERVICES)
async def test_every_service_refuses_time_claims_that_are_not_numeric_dates(
    make_app: Callable[..., Any], tmp_path: Any
) -> None:
    name = make_app.__name__.strip("_")
    async with in_process(make_app(tmp_path, auth_mode="jwt", jwt_secret=SECRET)) as client:
        headers = {"A2A-Version": "1.0"}
        for param in BAD_TIME_CLAIMS:
            token = _token(**param.values[0])
            r = await client.get(
                PROTECTED[name], headers={**headers, "Authorization": f"Bearer {token}"}
            )
            assert r.status_code == 401, (name, param.id, r.status_code, r.text[:200])
        # A fractional exp is a JSON number too.
        good = _token(exp=time.time() + 3600.5, iat=time.time())
        r = await client.get(
            PROTECTED[name], headers={**headers, "Authorization": f"Bearer {good}"}
        )
        assert r.status_code == 200, (name, r.status_code, r.text[:200])
