"""Caller identity: ``dev`` mode trusts headers, ``jwt`` mode verifies a bearer token."""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass
from typing import Annotated, Any

import jwt
from fastapi import Depends, Request

from servicekit.settings import AuthSettings
from soorma_common.errors import PermissionDenied, Unauthenticated, ValidationFailed

TENANT_HEADER = "x-tenant-id"
# Tenant and user ids end up in storage keys (Redis hash tags, SQL rows): keep them plain.
ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$")
USER_HEADER = "x-user-id"
# Contract C1: platform services (tracker, gateway) may act as any tenant.
ROLE_HEADER = "x-soorma-role"
ROLE_CLAIM = "soorma_role"
SERVICE_ROLE = "service"
DEFAULT_TOKEN_TTL_SECONDS = 3600.0
# RFC 7519 NumericDate claims: a JSON number of seconds since 1970, at most 9999-12-31.
TIME_CLAIMS = ("exp", "nbf", "iat")
MAX_NUMERIC_DATE = 253402300799


@dataclass(frozen=True, slots=True)
class Identity:
    """Who is calling. Every read and write is scoped to ``tenant_id``."""

    tenant_id: str
    user_id: str
    # A platform service: may act as any tenant (``X-Tenant-ID``) and read the tap.
    is_service: bool = False


def _verify_token(token: str, settings: AuthSettings) -> dict[str, Any]:
    key = settings.jwt_public_key or settings.jwt_secret
    if not key:
        raise Unauthenticated("server has no JWT key configured: set SOORMA_JWT_SECRET")
    try:
        claims = jwt.decode(
            token,
            key,
            algorithms=settings.jwt_algorithms,
            audience=settings.jwt_audience,
            options={
                # A token without ``exp`` would never expire: refused unless configured.
                "require": ["tenant_id", "exp"] if settings.jwt_require_exp else ["tenant_id"],
                "verify_aud": settings.jwt_audience is not None,
            },
        )
    except jwt.PyJWTError as exc:
        raise Unauthenticated(f"invalid bearer token: {exc}") from exc
    for name in TIME_CLAIMS:
        if name in claims:
            _check_numeric_date(name, claims[name])
    return claims


def _check_numeric_date(name: str, value: Any) -> None:
    """A time claim is a JSON number (not a string or a boolean) from 1970 to year 9999.

    PyJWT reads it with ``int()``, which also takes ``"1700000000"``, ``true`` and
    ``1e20`` (a token that never expires in practice).
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0 <= value <= MAX_NUMERIC_DATE
    ):
        raise Unauthenticated(
            f"invalid bearer token: claim {name!r} must be a JSON number of seconds since "
            "1970-01-01 (UTC), no later than 9999-12-31",
            details={"claim": name},
        )


def _checked(identity: Identity) -> Identity:
    for field, value in (("tenant_id", identity.tenant_id), ("user_id", identity.user_id)):
        if not ID_PATTERN.fullmatch(value):
            raise ValidationFailed(
                f"invalid {field} {value[:64]!r}: use 1-128 letters, digits or '._:@-'",
                details={"field": field},
            )
    return identity


def resolve_identity(headers: Any, settings: AuthSettings) -> Identity:
    """Identity for a request's headers (any mapping with case-insensitive ``get``)."""
    return _checked(_resolve(headers, settings))


def _resolve(headers: Any, settings: AuthSettings) -> Identity:
    header_tenant = headers.get(TENANT_HEADER)
    header_user = headers.get(USER_HEADER)
    if settings.auth_mode == "dev":
        return Identity(
            tenant_id=header_tenant or settings.default_tenant,
            user_id=header_user or settings.default_user,
            is_service=(headers.get(ROLE_HEADER) or "").lower() == SERVICE_ROLE,
        )
    authorization = headers.get("authorization") or ""
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise Unauthenticated("missing bearer token: send 'Authorization: Bearer <JWT>'")
    claims = _verify_token(token.strip(), settings)
    tenant = _claim(claims, "tenant_id")
    user_claim = "user_id" if "user_id" in claims else "sub" if "sub" in claims else None
    user = _claim(claims, user_claim) if user_claim else settings.default_user
    if claims.get(ROLE_CLAIM) == SERVICE_ROLE:
        # A platform service (role ``service``) acts as the tenant it names in X-Tenant-ID.
        return Identity(
            tenant_id=header_tenant or tenant, user_id=header_user or user, is_service=True
        )
    if header_tenant and header_tenant != tenant:
        raise PermissionDenied(
            f"X-Tenant-ID {header_tenant!r} does not match the token's tenant",
            details={"header": header_tenant},
        )
    if header_user and header_user != user:
        raise PermissionDenied("X-User-ID does not match the token's user")
    return Identity(tenant_id=tenant, user_id=user)


def _claim(claims: dict[str, Any], name: str) -> str:
    """A signed id claim, as is: bad token content is an authentication failure (401)."""
    value = claims[name]
    if not isinstance(value, str) or not ID_PATTERN.fullmatch(value):
        raise Unauthenticated(
            f"invalid bearer token: claim {name!r} must be a string of 1-128 letters, "
            "digits or '._:@-'",
            details={"claim": name},
        )
    return value


async def get_identity(request: Request) -> Identity:
    """FastAPI dependency: the caller's identity.

    Async on purpose: FastAPI runs sync dependencies in a thread pool, which costs more
    than resolving the identity itself.
    """
    return resolve_identity(request.headers, request.app.state.settings)


CurrentIdentity = Annotated[Identity, Depends(get_identity)]


def require_service(identity: Identity, what: str) -> None:
    """Raise ``PermissionDenied`` unless the caller is a platform service (role ``service``)."""
    if not identity.is_service:
        raise PermissionDenied(
            f"{what} is for platform services only: send 'X-Soorma-Role: service' (dev "
            "mode) or a token with the claim soorma_role=service",
            details={"field": what},
        )


def issue_token(
    settings: AuthSettings,
    *,
    tenant_id: Any,
    user_id: Any,
    ttl_seconds: float | None = DEFAULT_TOKEN_TTL_SECONDS,
    **claims: Any,
) -> str:
    """Sign an HS256 token for ``tenant_id``/``user_id`` (dev tooling and tests).

    ``exp`` is ``ttl_seconds`` from now (``None``: no ``exp`` claim); ``claims`` win.
    """
    if not settings.jwt_secret:
        raise ValueError("issue_token needs SOORMA_JWT_SECRET")
    payload: dict[str, Any] = {"tenant_id": tenant_id, "user_id": user_id, "sub": user_id}
    if ttl_seconds is not None:
        payload["exp"] = int(time.time() + ttl_seconds)
    return jwt.encode({**payload, **claims}, settings.jwt_secret, algorithm="HS256")
