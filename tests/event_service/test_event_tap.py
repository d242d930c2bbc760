"""Contract C1: the cross-tenant tap (``tenant=*``) for platform services only."""

from __future__ import annotations

import asyncio
import time

import httpx
import jwt
import pytest
from event_sse_client import SSEStream
from event_stack import Service, make_settings

from event_service import create_app
from soorma.client import verified_tls
from testsupport.server import serve

pytestmark = pytest.mark.asyncio

SERVICE = {"X-Soorma-Role": "service"}


async def test_tenant_events_on_tap_topics_reach_a_service_on_the_tap(service: Service) -> None:
    async with SSEStream(
        service.client, topics="system-events,action-requests", tenant="*", headers=SERVICE
    ) as tap:
        await service.publish("system-events", "plan.started", {"n": 1}, tenant="acme")
        await service.publish_batch(
            [
                {"topic": "action-requests", "type": "job", "data": {"n": 2}},
                {"topic": "business-facts", "type": "fact", "data": {"n": 3}},
            ],
            tenant="globex",
        )
        first, second = await tap.messages(2)
        assert (first.json()["tenant_id"], first.json()["data"]) == ("acme", {"n": 1})
        assert (second.json()["tenant_id"], second.json()["data"]) == ("globex", {"n": 2})
        # business-facts is not a tap topic: nothing more arrives.
        with pytest.raises(TimeoutError):
            await tap.next(within=0.5)


async def test_tap_group_stream_acks_and_nacks_with_tenant_star(service: Service) -> None:
    params = {"topics": "task-events", "group": "tracker", "tenant": "*", "headers": SERVICE}
    async with SSEStream(service.client, consumer="t1", **params) as tap:
        await service.publish("task-events", "task.started", {"n": 1}, tenant="acme")
        (frame,) = await tap.messages(1)
        assert frame.json()["tenant_id"] == "acme"
        r = await service.client.post(
            "/v1/events/nack",
            headers=SERVICE,
            json={"group": "tracker", "ids": [frame.id], "reason": "retry", "tenant": "*"},
        )
        assert r.json() == {"count": 1}
        (again,) = await tap.messages(1)
        assert again.id == frame.id
        r = await service.client.post(
            "/v1/events/ack",
            headers=SERVICE,
            json={"group": "tracker", "ids": [frame.id], "tenant": "*"},
        )
        assert r.json() == {"count": 1}
        # The tenant's own group of the same name is untouched by the tap's.
        r = await service.client.post(
            "/v1/events/ack",
            headers={"X-Tenant-ID": "acme"},
            json={"group": "tracker", "ids": [frame.id]},
        )
        assert r.json() == {"count": 0}


async def test_non_service_callers_get_403_on_the_tap(service: Service) -> None:
    r = await service.client.get(
        "/v1/events/stream", params={"topics": "system-events", "tenant": "*"}
    )
    assert r.status_code == 403
    assert "tenant=*" in r.json()["error"]["message"]
    for path in ("/v1/events/ack", "/v1/events/nack"):
        r = await service.client.post(path, json={"group": "g", "ids": ["a=1-0"], "tenant": "*"})
        assert r.status_code == 403, path
    # Naming another real tenant is not how to act as one: 422 naming the field.
    r = await service.client.get(
        "/v1/events/stream", params={"topics": "system-events", "tenant": "other"}, headers=SERVICE
    )
    assert r.status_code == 422
    assert r.json()["error"]["details"]["field"] == "tenant"


async def test_tenant_b_still_cannot_stream_tenant_a_events(service: Service) -> None:
    async with SSEStream(
        service.client, topics="system-events", headers={"X-Tenant-ID": "globex"}
    ) as b:
        await service.publish("system-events", "secret", {"n": 1}, tenant="acme")
        await service.publish("system-events", "mine", {"n": 2}, tenant="globex")
        (frame,) = await b.messages(1)
        assert frame.json()["type"] == "mine"
        with pytest.raises(TimeoutError):
            await b.next(within=0.3)


async def test_tap_topics_setting_limits_the_copy(
    request: pytest.FixtureRequest, settings: object
) -> None:
    custom = make_settings(
        settings.event_backend,
        request,  # type: ignore[attr-defined]
        tap_topics="business-facts",
    )
    async with (
        serve(create_app(custom)) as server,
        httpx.AsyncClient(verify=verified_tls(), base_url=server.url, timeout=15) as client,
    ):
        async with SSEStream(
            client, topics="business-facts,system-events", tenant="*", headers=SERVICE
        ) as tap:
            for topic in ("system-events", "business-facts"):
                r = await client.post(
                    "/v1/events/publish",
                    headers={"X-Tenant-ID": "acme"},
                    json={"event": {"topic": topic, "type": "x"}},
                )
                assert r.status_code == 200
            (frame,) = await tap.messages(1)
            assert frame.json()["topic"] == "business-facts"
            with pytest.raises(TimeoutError):
                await tap.next(within=0.3)


async def test_jwt_service_token_acts_as_any_tenant_and_reads_the_tap(
    request: pytest.FixtureRequest, settings: object
) -> None:
    secret = "s" * 32
    custom = make_settings(
        settings.event_backend,
        request,  # type: ignore[attr-defined]
        auth_mode="jwt",
        jwt_secret=secret,
    )

    def bearer(**claims: object) -> dict[str, str]:
        claims = {"exp": int(time.time()) + 600, **claims}
        return {"Authorization": "Bearer " + jwt.encode(claims, secret, algorithm="HS256")}

    svc = bearer(tenant_id="platform", user_id="tracker", soorma_role="service")
    user = bearer(tenant_id="acme", user_id="u1")
    async with (
        serve(create_app(custom)) as server,
        httpx.AsyncClient(verify=verified_tls(), base_url=server.url, timeout=15) as client,
    ):
        r = await client.get(
            "/v1/events/stream", headers=user, params={"topics": "system-events", "tenant": "*"}
        )
        assert r.status_code == 403
        # A non-service token naming another tenant: still 403, as before.
        r = await client.post(
            "/v1/events/publish",
            headers={**user, "X-Tenant-ID": "globex"},
            json={"event": {"topic": "system-events", "type": "x"}},
        )
        assert r.status_code == 403
        async with SSEStream(client, topics="system-events", tenant="*", headers=svc) as tap:
            r = await client.post(
                "/v1/events/publish",
                headers={**svc, "X-Tenant-ID": "globex"},
                json={"event": {"topic": "system-events", "type": "task.timeout"}},
            )
            assert r.status_code == 200, r.text
            (frame,) = await tap.messages(1)
            assert frame.json()["tenant_id"] == "globex"
        # ... and the event landed in globex's own log, which globex's users read.
        async with SSEStream(
            client,
            topics="system-events",
            from_="earliest",
            headers=bearer(tenant_id="globex", user_id="u2"),
        ) as own:
            (frame,) = await own.messages(1)
            assert frame.json()["type"] == "task.timeout"


async def test_concurrent_single_publishes_on_a_tap_topic_keep_their_own_ids(
    service: Service,
) -> None:
    # Coalesced appends with tap copies: every caller still gets its own stream id.
    results = await asyncio.gather(
        *(service.publish("action-results", "r", {"n": n}, tenant="acme") for n in range(60))
    )
    ids = [r["stream_id"] for r in results]
    assert len(set(ids)) == 60
    async with SSEStream(
        service.client, topics="action-results", tenant="*", from_="earliest", headers=SERVICE
    ) as tap:
        frames = await tap.messages(60)
    assert sorted(f.json()["data"]["n"] for f in frames) == list(range(60))
