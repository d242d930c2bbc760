"""Who the SDK acts as: dev-mode headers and jwt-mode bearer tokens, end to end."""

from __future__ import annotations

import asyncio

import pytest

from event_service import create_app
from event_service.settings import Settings
from servicekit.auth import issue_token
from soorma import Agent, PlatformContext, PlatformSettings
from soorma_common.errors import PermissionDenied, Unauthenticated
from testsupport.server import serve

pytestmark = pytest.mark.asyncio

SECRET = "test-secret-not-a-real-one-0123456789"


async def test_jwt_mode_sends_the_api_token_and_the_tenant_comes_from_it():
    settings = Settings(event_backend="memory", auth_mode="jwt", jwt_secret=SECRET)
    token = issue_token(settings, tenant_id="acme", user_id="svc-bot")
    async with serve(create_app(settings)) as server:
        ok = PlatformSettings(event_service_url=server.url, api_token=token)
        async with PlatformContext.from_env(settings=ok) as context:
            async with context.bus.subscribe("business-facts") as sub:
                await sub.wait_ready(10)
                await context.bus.announce("order.placed", {"id": 1})
                event = await anext(sub)
        assert (event.tenant_id, event.user_id) == ("acme", "svc-bot")

        anonymous = PlatformSettings(event_service_url=server.url)
        async with PlatformContext.from_env(settings=anonymous) as context:
            with pytest.raises(Unauthenticated):
                await context.bus.announce("order.placed", {"id": 2})


async def test_dev_mode_agent_works_in_its_configured_tenant():
    async with serve(create_app(Settings(event_backend="memory"))) as server:
        tenant = PlatformSettings(event_service_url=server.url, tenant_id="t-blue", user_id="u1")
        other = PlatformSettings(event_service_url=server.url, tenant_id="t-red")
        async with (
            PlatformContext.from_env(settings=tenant) as blue,
            PlatformContext.from_env(settings=other) as red,
        ):
            agent = Agent(name="echo", context=blue)
            seen: list[str | None] = []
            got = asyncio.Event()

            @agent.on_event(topic="business-facts", event_type="ping")
            async def on_ping(event, ctx):
                seen.append(event.data["from"])
                await ctx.bus.announce("pong", {})
                got.set()

            await agent.start()
            try:
                async with blue.bus.subscribe("business-facts", event_types=["pong"]) as pongs:
                    await pongs.wait_ready(10)
                    await red.bus.announce("ping", {"from": "red"})  # other tenant: unseen
                    await blue.bus.announce("ping", {"from": "blue"})
                    async with asyncio.timeout(10):
                        await got.wait()
                        pong = await anext(pongs)
            finally:
                await agent.stop()
    assert seen == ["blue"]
    assert (pong.tenant_id, pong.user_id) == ("t-blue", "u1")


async def test_service_role_from_env_reads_the_tap_and_acts_as_a_tenant_per_call():
    async with serve(create_app(Settings(event_backend="memory"))) as server:
        env = {"SOORMA_EVENT_SERVICE_URL": server.url, "SOORMA_SERVICE_ROLE": "service"}
        plain = PlatformSettings(event_service_url=server.url, tenant_id="acme")
        async with (
            PlatformContext.from_env(environ=env) as service,
            PlatformContext.from_env(settings=plain) as user,
        ):
            async with service.bus.subscribe(
                "system-events", tenant_id="*", group="tracker", consumer="c1"
            ) as tap:
                await tap.wait_ready(10)
                await user.bus.publish("system-events", "plan.started", {"n": 1})
                await service.bus.publish("system-events", "task.timeout", {}, tenant_id="globex")
                first, second = await anext(tap), await anext(tap)
                assert [first.tenant_id, second.tenant_id] == ["acme", "globex"]
                assert (
                    await service.bus.ack(
                        "tracker", [first.delivery_id, second.delivery_id], tenant_id="*"
                    )
                    == 2
                )
            # Without the role, the tap is refused.
            with pytest.raises(PermissionDenied):
                await user.bus.ack("tracker", ["system-events=1-0"], tenant_id="*")
