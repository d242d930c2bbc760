"""``soorma dev``'s one address: every service behind one port, found from ``SOORMA_URL``."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import httpx
import pytest
from sdk_helpers import Proc, subprocess_env

from event_service import create_app as create_event_app
from event_service.settings import Settings
from soorma import PlatformContext, PlatformSettings
from soorma._platform_router import Mounted, PlatformRouter
from soorma.client import verified_tls
from testsupport.server import closed_port, free_port, serve

SOORMA = str(Path(sys.executable).with_name("soorma"))
SERVICES = ("registry", "events", "memory", "tracker", "gateway")


def test_soorma_url_finds_every_service_and_a_service_variable_overrides_it() -> None:
    settings = PlatformSettings.from_env(
        {"SOORMA_URL": "http://example:9000/", "SOORMA_MEMORY_URL": "http://mem:1"}
    )
    assert settings.event_service_url == "http://example:9000/events"
    assert settings.registry_url == "http://example:9000/registry"
    assert settings.tracker_url == "http://example:9000/tracker"
    assert settings.gateway_url == "http://example:9000/gateway"
    assert settings.memory_url == "http://mem:1"


@pytest.mark.asyncio
async def test_one_address_serves_every_service_and_a_client_needs_only_soorma_url(
    tmp_path: Path,
) -> None:
    ports = {name: free_port() for name in SERVICES}
    platform_port = free_port()
    args = [f"--port={name}={port}" for name, port in ports.items()]
    env = subprocess_env(SOORMA_DATA_DIR=str(tmp_path / ".soorma"))
    proc = await Proc.start(
        SOORMA, "dev", *args, f"--port=platform={platform_port}", env=env, cwd=str(tmp_path)
    )
    url = f"http://127.0.0.1:{platform_port}"
    try:
        await proc.wait_for("soorma dev: ready", within=60)
        async with httpx.AsyncClient(
            verify=verified_tls(),
        ) as http:
            found = (await http.get(f"{url}/.well-known/soorma.json")).json()
            assert found["services"] == {name: f"{url}/{name}" for name in SERVICES}
            for name in SERVICES:
                health = await http.get(f"{url}/{name}/health")
                assert health.status_code == 200, name
            lost = await http.get(f"{url}/v1/events")
            assert lost.status_code == 404
            assert "/events/ (events)" in lost.json()["error"]["message"]

        # A client with SOORMA_URL only: publish and receive through the one port (SSE
        # included), and reach the registry and memory services there.
        settings = PlatformSettings.from_env({"SOORMA_URL": url})
        async with PlatformContext.from_env(settings=settings) as context:
            async with context.bus.subscribe(["custom.one"]) as sub:
                await sub.wait_ready(10)
                await context.bus.publish("custom.one", "hello.sent", {"n": 1})
                async with asyncio.timeout(10):
                    event = await anext(aiter(sub))
            assert event.data == {"n": 1}
            assert isinstance(await context.registry.list_events(), list)
        assert await proc.stop(signal.SIGINT) == 0, proc.output
    finally:
        await proc.kill()


@pytest.mark.asyncio
async def test_soorma_dev_is_not_ready_while_its_redis_does_not_answer(tmp_path: Path) -> None:
    nowhere = f"redis://127.0.0.1:{closed_port()}/0"
    env = subprocess_env(
        SOORMA_DATA_DIR=str(tmp_path / ".soorma"),
        SOORMA_EVENT_BACKEND="redis",
        SOORMA_REDIS_URL=nowhere,
    )
    args = ["--only", "events", f"--port=events={free_port()}", f"--port=platform={free_port()}"]
    proc = await Proc.start(SOORMA, "dev", *args, env=env, cwd=str(tmp_path))
    try:
        line = await proc.wait_for("is waiting for its backends", within=60)
        assert line.startswith("soorma dev: events is waiting for its backends (event_log error")
        await asyncio.sleep(1.0)
        assert "soorma dev: ready" not in proc.output
        assert await proc.stop(signal.SIGINT) == 0, proc.output
    finally:
        await proc.kill()
    assert "Traceback" not in proc.output


async def _nothing(scope: dict, receive: object, send: object) -> None:
    raise AssertionError("discovery must not reach a service")


@pytest.mark.asyncio
async def test_the_cli_finds_the_services_from_the_platforms_discovery_document() -> None:
    router = PlatformRouter(
        [Mounted("events", "/bus", _nothing, {}), Mounted("memory", "/mem", _nothing, {})]
    )
    async with (
        serve(router) as platform,
        httpx.AsyncClient(
            verify=verified_tls(),
        ) as http,
    ):
        env = {"SOORMA_URL": platform.url, "SOORMA_MEMORY_URL": "http://mine:1"}
        settings = await PlatformSettings.discover(http, env)
    assert settings.event_service_url == f"{platform.url}/bus"  # as the platform says
    assert settings.memory_url == "http://mine:1"  # the service's own variable wins
    assert settings.registry_url == f"{platform.url}/registry"  # not listed: the convention


@pytest.mark.asyncio
async def test_soorma_url_at_something_else_is_named_in_one_line() -> None:
    async with serve(create_event_app(Settings(event_backend="memory"))) as events:
        call = await Proc.start(
            SOORMA, "call", "greet.requested", env=subprocess_env(SOORMA_URL=events.url)
        )
        assert await call.wait(within=60) == 1, call.output
    assert call.lines == [
        f"soorma: SOORMA_URL={events.url} is not a Soorma platform address (GET "
        f"{events.url}/.well-known/soorma.json answered HTTP 404); use the address "
        "`soorma dev` prints"
    ]
