"""``soorma dev``: all five services in one process, embedded backends by default.

Service packages (found through their ``soorma.services`` entry points) and uvicorn are
loaded when the command runs, so the SDK itself never needs them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TextIO

import pydantic

from soorma._platform_router import DISCOVERY_PATH, Mounted, PlatformRouter
from soorma._services import load_service
from soorma.settings import SERVICE_PREFIXES, tracing_settings, warn_unknown_variables
from soorma_common import tracing as otel


@dataclass(frozen=True, slots=True)
class DevService:
    """One service ``soorma dev`` can run."""

    name: str
    port: int
    url_env: str
    # Its database's name under ``data_dir`` and the settings field overriding it.
    database: str | None = None


SERVICES: tuple[DevService, ...] = (
    DevService("registry", 8081, "SOORMA_REGISTRY_URL", "registry"),
    DevService("events", 8082, "SOORMA_EVENT_SERVICE_URL"),
    DevService("memory", 8083, "SOORMA_MEMORY_URL", "memory"),
    DevService("tracker", 8084, "SOORMA_TRACKER_URL", "tracker"),
    DevService("gateway", 8085, "SOORMA_GATEWAY_URL", "gateway"),
)
LOG_FORMATS = ("text", "json")
# What requests in progress get when soorma dev stops, before their connections close,
# and how long the closed connections' tasks get to end.
DEV_STOP_GRACE_SECONDS = 0.1
DEV_STOP_TASKS_SECONDS = 0.5
SERVICE_NAMES = tuple(s.name for s in SERVICES)
# The one address serving every service under its prefix (``--port platform=PORT``).
PLATFORM = "platform"
PLATFORM_PORT = 8080


class DevError(Exception):
    """A problem the user can fix (port taken, unknown service...)."""


def select_services(only: str | None, ports: Sequence[str]) -> list[DevService]:
    """The services to run, with ``--port name=PORT`` overrides applied."""
    chosen = list(SERVICES)
    if only:
        names = [n.strip() for n in only.split(",") if n.strip()]
        unknown = sorted(set(names) - set(SERVICE_NAMES))
        if unknown:
            raise DevError(
                f"unknown service(s) {', '.join(unknown)} in --only; "
                f"choose from {', '.join(SERVICE_NAMES)}"
            )
        chosen = [s for s in SERVICES if s.name in names]
    overrides: dict[str, int] = {}
    for item in ports:
        name, sep, value = item.partition("=")
        if not sep or name not in (*SERVICE_NAMES, PLATFORM) or not value.isdigit():
            raise DevError(
                f"--port expects NAME=PORT with NAME in {', '.join(SERVICE_NAMES)} or "
                f"{PLATFORM}, got {item!r}"
            )
        overrides[name] = int(value)
    return [
        DevService(s.name, overrides.get(s.name, s.port), s.url_env, s.database) for s in chosen
    ]


def select_platform_port(ports: Sequence[str]) -> int:
    """The one address's port: ``--port platform=PORT`` or :data:`PLATFORM_PORT`."""
    port = PLATFORM_PORT
    for item in ports:
        name, _, value = item.partition("=")
        if name == PLATFORM and value.isdigit():
            port = int(value)
    return port


def check_ports_free(host: str, named_ports: Sequence[tuple[str, int]]) -> None:
    """Fail early, naming the service, when a port is already taken."""
    for name, port in named_ports:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((host, port))
            except OSError as exc:
                raise DevError(
                    f"port {port} for {name} on {host} is not available "
                    f"({exc.strerror}); stop whatever uses it or pass "
                    f"--port {name}=<free port>"
                ) from None


def _url_host(host: str) -> str:
    return "127.0.0.1" if host in {"0.0.0.0", "", "::"} else host


def _make_server(
    app: Any, host: str, port: int, log_level: str, *, lifespan: Literal["on", "off"] = "on"
) -> Any:
    import uvicorn

    class _Server(uvicorn.Server):
        # One process runs five servers: signals are handled once, by ``run_dev``,
        # instead of each server capturing (and re-raising) them.
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

        async def shutdown(self, sockets: Any = None) -> None:
            # A local platform stops at once: requests get a moment to finish, then
            # open streams end as if their clients had left (no graceful drain).
            for server in self.servers:
                server.close()
            for connection in list(self.server_state.connections):
                connection.shutdown()
            if self.server_state.connections:
                await asyncio.sleep(DEV_STOP_GRACE_SECONDS)
            for connection in list(self.server_state.connections):
                transport = getattr(connection, "transport", None)
                if transport is not None:
                    transport.close()
            if self.server_state.tasks:
                await asyncio.wait(list(self.server_state.tasks), timeout=DEV_STOP_TASKS_SECONDS)
            if not self.force_exit:
                await self.lifespan.shutdown()

    # Request heads bounded in size and reading time, as the service's settings say
    # (SOORMA_MAX_HEADER_BYTES, SOORMA_HEADER_TIMEOUT_SECONDS): the app carries them.
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        # uvicorn's records go to the root handler the services set up (one format).
        log_config=None,
        lifespan=lifespan,
        timeout_graceful_shutdown=3,
        ws="none",
        **(app.state.uvicorn_options() if hasattr(app, "state") else {}),
    )
    return _Server(config)


async def run_dev(
    services: Sequence[DevService],
    *,
    host: str,
    log_level: str,
    out: TextIO,
    log_format: str = "text",
    platform_port: int = PLATFORM_PORT,
) -> int:
    """Start ``services`` in this process and serve until SIGINT/SIGTERM.

    Each service listens on its own port and, under its prefix (``/events``,
    ``/memory``...), on ``platform_port``: the one address agents need.

    ``log_format``: ``text`` (one readable line per record) or ``json`` (one object a
    line, as the containers write); the services' and uvicorn's records alike.
    """
    if log_format not in LOG_FORMATS:
        raise DevError(f"--log-format must be one of {', '.join(LOG_FORMATS)}")
    check_ports_free(host, [*((s.name, s.port) for s in services), (PLATFORM, platform_port)])
    warn_unknown_variables()
    os.environ["SOORMA_LOG_FORMAT"] = log_format
    # Migrations log every step at INFO (the banner says where the data lives), httpx
    # every request the services make to each other.
    for noisy in ("alembic", "httpx", "httpcore"):
        if logging.getLogger(noisy).level == logging.NOTSET:
            logging.getLogger(noisy).setLevel(logging.WARNING)
    # The services find each other through the same variables agents use.
    for service in services:
        os.environ[service.url_env] = f"http://{_url_host(host)}:{service.port}"
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    # One process: one service.name for all its services.
    otel.configure("soorma-dev", tracing_settings())

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)

    running: list[tuple[str, Any, asyncio.Task[Any]]] = []
    where: dict[str, str] = {}
    mounts: list[Mounted] = []

    async def start(name: str, server: Any) -> bool:
        task = asyncio.create_task(server.serve(), name=f"soorma dev {name}")
        running.append((name, server, task))
        while not server.started:
            if task.done():
                exc = task.exception()
                raise DevError(f"{name} failed to start: {exc or 'exited'}")
            if stop.is_set():
                return False
            await asyncio.sleep(0.02)
        return True

    try:
        # Started one by one, in dependency order (the event service before the
        # tracker and gateway that subscribe to it).
        for service in services:
            app = _create_app(service)
            where[service.name] = describe_backend(service, app.state.settings)
            server = _make_server(app, host, service.port, log_level)
            if not await start(service.name, server):
                break
            prefix = SERVICE_PREFIXES[service.name]
            mounts.append(Mounted(service.name, prefix, app, server.lifespan.state))
        else:
            router = PlatformRouter(mounts)
            server = _make_server(router, host, platform_port, log_level, lifespan="off")
            if await start(PLATFORM, server) and await wait_for_backends(
                services, host, out=out, stop=stop
            ):
                print_banner(services, host, where, out, platform_port=platform_port)
                await stop.wait()
                print("\nsoorma dev: stopping...", file=out, flush=True)
    finally:
        for _, server, _ in reversed(running):
            server.should_exit = True
        results = await asyncio.gather(*(t for _, _, t in running), return_exceptions=True)
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    failed = [
        (name, r)
        for (name, _, _), r in zip(running, results, strict=True)
        if isinstance(r, BaseException) and not isinstance(r, asyncio.CancelledError)
    ]
    for name, error in failed:
        print(f"soorma dev: {name} stopped with an error: {error}", file=sys.stderr)
    return 1 if failed else 0


# How often ``soorma dev`` asks a service whose backends do not answer yet.
BACKEND_POLL_SECONDS = 0.5


async def wait_for_backends(
    services: Sequence[DevService], host: str, *, out: TextIO, stop: asyncio.Event
) -> bool:
    """Wait until every service's ``/ready`` answers 200 (its database, Redis...),
    saying once which backend each waits for; ``False`` when stopped first."""
    import httpx

    waiting: set[str] = set()
    async with httpx.AsyncClient(timeout=5.0) as http:
        pending = list(services)
        while pending and not stop.is_set():
            for service in list(pending):
                url = f"http://{_url_host(host)}:{service.port}/ready"
                try:
                    response = await http.get(url)
                    checks = response.json().get("checks", {})
                except (httpx.HTTPError, ValueError) as exc:
                    response, checks = None, {"service": f"error: {exc}"}
                if response is not None and response.status_code == 200:
                    pending.remove(service)
                    if service.name in waiting:
                        print(f"soorma dev: {service.name}: backends answer", file=out)
                    continue
                if service.name not in waiting:
                    waiting.add(service.name)
                    failed = "; ".join(
                        f"{name} {result}" for name, result in checks.items() if result != "ok"
                    )
                    print(
                        f"soorma dev: {service.name} is waiting for its backends ({failed})",
                        file=out,
                        flush=True,
                    )
            if pending:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), BACKEND_POLL_SECONDS)
    return not stop.is_set()


def _create_app(service: DevService) -> Any:
    """The service's app; a setting the environment gets wrong is a :class:`DevError`."""
    package = load_service(service.name)
    try:
        return package.create_app()
    except pydantic.ValidationError as exc:
        raise DevError(describe_settings_error(exc)) from None


def describe_settings_error(exc: pydantic.ValidationError) -> str:
    """``SOORMA_EVENT_BACKEND='redsi' is not allowed: Input should be 'memory' or 'redis'``."""
    problems = []
    for error in exc.errors():
        variable = "SOORMA_" + "_".join(str(part) for part in error["loc"]).upper()
        problems.append(f"{variable}={error.get('input')!r} is not allowed: {error['msg']}")
    return "; ".join(problems)


def _redact(url: str) -> str:
    """``url`` without its password."""
    scheme, sep, rest = url.partition("://")
    creds, at, location = rest.rpartition("@")
    if not sep or not at or ":" not in creds:
        return url
    return f"{scheme}://{creds.split(':', 1)[0]}:***@{location}"


def describe_backend(service: DevService, settings: Any) -> str:
    """Where ``service`` keeps its data, in words (passwords left out)."""
    if service.name == "events":
        if getattr(settings, "event_backend", "memory") == "redis":
            return f"Redis Streams at {_redact(settings.redis_url)}"
        return "in process memory (lost when soorma dev stops)"
    if service.database is None:
        return ""
    override = getattr(settings, f"{service.database}_database_url", None)
    url = override or settings.database_url
    if url:
        return f"PostgreSQL {_redact(url)}" if "postgres" in url else _redact(url)
    path = (Path(settings.data_dir) / f"{service.database}.db").resolve()
    return f"SQLite {path}"


def print_banner(
    services: Sequence[DevService],
    host: str,
    where: dict[str, str],
    out: TextIO,
    *,
    platform_port: int = PLATFORM_PORT,
) -> None:
    """What runs where, where the data lives, and the one line an agent needs."""
    url_host = _url_host(host)
    platform = f"http://{url_host}:{platform_port}"
    rows = [
        (s.name, f"{platform}{SERVICE_PREFIXES[s.name]}", where.get(s.name, "")) for s in services
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(2)]
    print(f"soorma dev: the platform is running at {platform} (Ctrl-C to stop)", file=out)
    for (name, url, backend), service in zip(rows, services, strict=True):
        direct = f"(also :{service.port})"
        print(
            f"  {name:<{widths[0]}}  {url:<{widths[1]}}  {direct:<13} {backend}".rstrip(),
            file=out,
        )
    if any(s.name == "tracker" for s in services):
        print(f"  tracker UI: {platform}{SERVICE_PREFIXES['tracker']}/ui", file=out)
    print(
        f"  services: {platform}{DISCOVERY_PATH}; watch every event: soorma events tail", file=out
    )
    print("agents, clients and the soorma command need one variable:", file=out)
    print(f"  export SOORMA_URL={platform}", file=out)
    print("soorma dev: ready", file=out, flush=True)
