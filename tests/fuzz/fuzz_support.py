"""Shared helpers for the fuzz tests: a service in a thread, the error-shape rule, JSON values.

Hypothesis and schemathesis drive synchronous tests, so each service runs under real
uvicorn in its own thread with its own event loop (lifespan, database engine and Redis
client all live there), and the tests talk to it over loopback HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import ssl
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import uvicorn
from hypothesis import HealthCheck
from hypothesis import strategies as st

from testsupport.server import free_port

WAIT = 15.0  # generous bound: failing tests stop here, passing ones never wait this long

# Shared Hypothesis settings: reproducible in CI (derandomize), no example database
# (a fuzz failure is reproduced from its seed, not from a local cache), no per-example
# deadline (the machine is shared; timing is not what we test).
HYPOTHESIS_SETTINGS: dict[str, Any] = {
    "derandomize": True,
    "database": None,
    "deadline": None,
    "suppress_health_check": [
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
    ],
}


class ThreadedServer:
    """``app`` under uvicorn on a free loopback port, in a daemon thread with its own loop."""

    def __init__(self, app: Any) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            app,
            host="127.0.0.1",
            port=self.port,
            log_level="warning",
            lifespan="on",
            timeout_graceful_shutdown=2,
            ws="none",
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._run, name="fuzz-server", daemon=True)
        self._error: BaseException | None = None

    def _run(self) -> None:
        try:
            asyncio.run(self._server.serve())
        except BaseException as exc:  # surfaced by start()
            self._error = exc

    def start(self) -> None:
        self._thread.start()
        started = threading.Event()
        for _ in range(1000):
            if self._server.started:
                return
            if not self._thread.is_alive():
                raise RuntimeError(f"uvicorn exited before starting: {self._error!r}")
            started.wait(0.01)
        raise RuntimeError("uvicorn did not start in 10 s")

    def client(self) -> httpx.Client:
        """A blocking HTTP client on this server (``with server.client() as client``)."""
        return httpx.Client(base_url=self.url, timeout=WAIT, verify=_tls_context())

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        if self._thread.is_alive():
            self._server.force_exit = True
            self._thread.join(timeout=5)


@functools.cache
def _tls_context() -> ssl.SSLContext:
    # Every httpx client would load the CA bundle into a new context (~20 ms): the tests
    # make one client per test, on plain HTTP, so they share one context.
    return ssl.create_default_context()


@contextlib.contextmanager
def serve_in_thread(app: Any) -> Iterator[ThreadedServer]:
    server = ThreadedServer(app)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def assert_error_shape(response: httpx.Response | Any) -> dict[str, Any]:
    """Every 4xx/5xx body is ``{"error": {"code", "message", "details"}}``; return ``error``."""
    body = response.json()
    assert isinstance(body, dict) and set(body) == {"error"}, f"not the error shape: {body!r}"
    error = body["error"]
    assert isinstance(error, dict), f"error is not an object: {body!r}"
    assert set(error) == {"code", "message", "details"}, f"error keys: {sorted(error)}"
    assert isinstance(error["code"], str) and error["code"], f"bad code: {error!r}"
    assert isinstance(error["message"], str) and error["message"], f"bad message: {error!r}"
    return error


def assert_client_error(response: httpx.Response, *statuses: int) -> dict[str, Any]:
    """A 4xx (one of ``statuses`` when given) in the common error shape."""
    allowed = statuses or tuple(range(400, 500))
    assert response.status_code in allowed, (
        f"expected {allowed if statuses else '4xx'}, got {response.status_code}: "
        f"{response.text[:500]}"
    )
    return assert_error_shape(response)


def named_fields(error: dict[str, Any]) -> str:
    """Everything an error says about which field failed, as one string to search."""
    return f"{error['message']} {error['details']!r}"


# --- JSON values -----------------------------------------------------------------------

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

# No NUL (Postgres text cannot hold it: the services answer 422, tested apart) and no lone
# surrogates (not encodable as UTF-8, so not JSON a client can send).
storable_chars = st.characters(exclude_characters="\x00", exclude_categories=("Cs",))
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=INT64_MIN, max_value=INT64_MAX)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=storable_chars, max_size=40)
)
json_keys = st.text(alphabet=storable_chars, max_size=20)


def json_values(max_leaves: int = 25) -> st.SearchStrategy[Any]:
    """Arbitrary JSON: nested arrays/objects of unicode strings, 64-bit ints, finite floats."""
    return st.recursive(
        json_scalars,
        lambda children: (
            st.lists(children, max_size=5) | st.dictionaries(json_keys, children, max_size=5)
        ),
        max_leaves=max_leaves,
    )


def json_objects(max_leaves: int = 25) -> st.SearchStrategy[dict[str, Any]]:
    return st.dictionaries(json_keys, json_values(max_leaves), max_size=6)


def deeply_nested(depth: int) -> bytes:
    """``[[[...]]]`` ``depth`` levels deep, as raw JSON bytes."""
    return b"[" * depth + b"]" * depth


def same_json(a: Any, b: Any) -> bool:
    """Semantic JSON equality that also tells 1 from 1.0 and True from 1 (exact fidelity)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    return bool(a == b)
