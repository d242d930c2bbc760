"""The SDK's public client layer: who it acts as, the base of its service clients and the
shared HTTP client they use.

Platform services that talk to other services (the tracker reading plan contexts, the
gateway publishing events) build their clients from here, as agents do.

One shared ``httpx.AsyncClient`` per :class:`~soorma.context.PlatformContext`; each client
adds its base URL, identity headers and the mapping of ``{"error": {...}}`` bodies back to
``soorma_common.errors`` classes, so agent authors catch domain errors, never HTTP ones.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import logging
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self

# httpx imports its command-line tool with itself (``httpx._main``: rich, click and
# pygments when installed, ~1 s of a loaded machine's start-up); agents never run it.
# A ``None`` entry makes that import fail, and httpx falls back to a stub ``main``.
# Only when httpx is not imported yet (the application may want its CLI).
if "httpx" not in sys.modules:
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]

import httpx

from soorma._propagation import current_event
from soorma._transport import make_http_client, verified_tls
from soorma_common import tracing as otel
from soorma_common.errors import NotFound, ServiceUnavailable, SoormaError, error_from_payload

logger = logging.getLogger("soorma.http")

DEFAULT_TIMEOUT = 10.0
DEFAULT_CONNECT_RETRIES = 3
DEFAULT_RETRY_BACKOFF = 0.2


@dataclass(frozen=True, slots=True)
class Identity:
    """Who the SDK acts as.

    Attributes:
        tenant_id: Tenant sent as ``X-Tenant-ID`` (dev mode), or ``None`` for the
            service default.
        user_id: User sent as ``X-User-ID`` (dev mode), or ``None``.
        token: Bearer token for jwt mode (``SOORMA_API_TOKEN``); identity then comes
            from its claims.
        role: ``"service"`` for a platform service (``SOORMA_SERVICE_ROLE``), sent as
            ``X-Soorma-Role``: it may act as any tenant and read the cross-tenant tap.
    """

    tenant_id: str | None = None
    user_id: str | None = None
    token: str | None = None
    role: str | None = None


def identity_headers(
    identity: Identity, *, tenant_id: str | None = None, user_id: str | None = None
) -> dict[str, str]:
    """Headers that carry ``identity``, with optional explicit overrides.

    Inside a handler, and without a bearer token, the SDK acts as the tenant/user of
    the event being handled, so an agent serving many tenants answers each one in its
    own tenant. With a token the claims decide; copying the handled event's user into a
    header would contradict them (the service answers 403), so only explicit values
    are sent then.
    """
    headers: dict[str, str] = {}
    if identity.token:
        headers["Authorization"] = f"Bearer {identity.token}"
    if identity.role:
        headers["X-Soorma-Role"] = identity.role
    tenant, user = identity.tenant_id, identity.user_id
    event = current_event()
    if event is not None and not identity.token:
        tenant = event.tenant_id or tenant
        user = event.user_id or user
    tenant = tenant_id or tenant
    user = user_id or user
    if tenant:
        headers["X-Tenant-ID"] = tenant
    if user:
        headers["X-User-ID"] = user
    return headers


def raise_for_error(response: httpx.Response) -> None:
    """Raise the domain error a failed response carries (no-op on 2xx)."""
    if response.is_success:
        return
    try:
        payload: Any = response.json()
    except ValueError:
        payload = response.text[:500]
    error = error_from_payload(
        payload,
        default_message=f"{response.request.method} {response.request.url} "
        f"failed with HTTP {response.status_code}",
    )
    if response.status_code == 404 and _no_such_route(error):
        # Not a record the service could not find: the service has no such path at all.
        error = NotFound(
            f"{response.request.method} {response.request.url}: no such path (HTTP 404); "
            "the address does not serve the service this client needs - check SOORMA_URL "
            "(or the service's own SOORMA_*_URL)",
            details={"url": str(response.request.url)},
        )
    error.status_code = response.status_code  # type: ignore[attr-defined]
    raise error


def _no_such_route(error: SoormaError) -> bool:
    # A framework's own 404 (a path no route serves: the generic "Not Found", or a body
    # that is not a Soorma error at all), as opposed to a domain error naming a record.
    if type(error) is SoormaError:
        return True
    return type(error) is NotFound and error.message == "Not Found"


class ServiceClient:
    """Base of the SDK's HTTP clients (bus, memory, registry, tracker).

    Args:
        base_url: Root URL of the service, e.g. ``http://127.0.0.1:8082``.
        http: Shared client; the caller owns it and closes it.
        identity: Who to act as.
        connect_retries: Attempts after a connection error. Only failures to connect
            are retried: the request never reached the service, so a retry cannot
            duplicate it.
    """

    def __init__(
        self,
        *,
        base_url: str,
        http: httpx.AsyncClient,
        identity: Identity | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        connect_retries: int = DEFAULT_CONNECT_RETRIES,
        retry_backoff: float = DEFAULT_RETRY_BACKOFF,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.http = http
        self.identity = identity or Identity()
        self.timeout = timeout
        self.connect_retries = connect_retries
        self.retry_backoff = retry_backoff

    def acting_as(self, *, tenant_id: str) -> Self:
        """This client acting as ``tenant_id`` (same connection pool, same settings).

        For platform services (``role="service"``) that read other tenants' records on
        their behalf, e.g. the tracker showing one tenant's plan context.
        """
        clone = copy.copy(self)
        clone.identity = dataclasses.replace(self.identity, tenant_id=tenant_id)
        return clone

    def url(self, path: str) -> str:
        """Absolute URL of ``path`` on this service."""
        return f"{self.base_url}/{path.lstrip('/')}"

    def headers(
        self, *, tenant_id: str | None = None, user_id: str | None = None
    ) -> dict[str, str]:
        """Identity headers for one request (see :func:`identity_headers`)."""
        return identity_headers(self.identity, tenant_id=tenant_id, user_id=user_id)

    async def _send(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        tenant_id: str | None = None,
        user_id: str | None = None,
        identity: Mapping[str, str] | None = None,
    ) -> Any:
        """Send a request and return the decoded JSON body (``None`` when empty).

        ``identity``: identity headers resolved earlier (e.g. in the handler that
        published, when the request leaves from another task); resolved now otherwise.

        Raises:
            SoormaError: the domain error the service returned, or
                ``ServiceUnavailable`` when the service cannot be reached or the
                connection is lost before its answer (timeout, reset).
        """
        if identity is not None:
            all_headers = dict(identity)
        else:
            all_headers = self.headers(tenant_id=tenant_id, user_id=user_id)
        if headers:
            all_headers.update(headers)
        if otel.ENABLED:
            otel.inject_headers(all_headers)
        attempt = 0
        while True:
            try:
                response = await self.http.request(
                    method,
                    self.url(path),
                    json=json,
                    params=params,
                    headers=all_headers,
                    timeout=self.timeout,
                )
                break
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                attempt += 1
                if attempt > self.connect_retries:
                    raise ServiceUnavailable(
                        f"cannot reach {self.base_url}: {exc}; is the service running?",
                        details={"url": self.base_url},
                    ) from exc
                await asyncio.sleep(self.retry_backoff * 2 ** (attempt - 1))
            except httpx.TransportError as exc:
                # Connected, then lost: a timeout, a reset, a service killed mid-request.
                # Not retried (the request may have been processed), but reported as the
                # service being unavailable, like a failed connect: callers that carry on
                # without a service (registration, heartbeats) must not crash on it.
                raise ServiceUnavailable(
                    f"{self.base_url} did not answer ({type(exc).__name__}: {exc}); "
                    "the request may or may not have been processed",
                    details={"url": self.base_url},
                ) from exc
        raise_for_error(response)
        if not response.content:
            return None
        return response.json()


__all__ = [
    "Identity",
    "ServiceClient",
    "identity_headers",
    "make_http_client",
    "raise_for_error",
    "verified_tls",
]
