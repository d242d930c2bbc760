"""Publishing: ids, identity stamping, validation, size limit, atomic batches."""

from __future__ import annotations

import httpx
import pytest
from event_sse_client import SSEStream
from event_stack import Service, make_settings

from event_service import create_app
from servicekit.auth import issue_token
from soorma.client import verified_tls
from testsupport.server import serve

pytestmark = pytest.mark.asyncio


async def test_publish_returns_ids_and_stamps_the_callers_identity(service: Service) -> None:
    async with SSEStream(
        service.client, topics="business-facts", headers={"X-Tenant-ID": "acme"}
    ) as stream:
        r = await service.client.post(
            "/v1/events/publish",
            headers={"X-Tenant-ID": "acme", "X-User-ID": "alice"},
            json={
                "event": {
                    "id": "evt-1",
                    "topic": "business-facts",
                    "type": "order.placed",
                    "tenantId": "someone-else",
                    "user_id": "mallory",
                    "correlationId": "c-1",
                    "data": {"n": 1},
                }
            },
        )
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["event_id"] == "evt-1"
        ms, _, seq = body["stream_id"].partition("-")
        assert ms.isdigit() and seq.isdigit()

        frame = await stream.next()
        event = frame.json()
        assert event["tenant_id"] == "acme"
        assert event["user_id"] == "alice"
        assert event["correlation_id"] == "c-1"
        assert event["data"] == {"n": 1}
        assert frame.id == f"business-facts={body['stream_id']}"

        generated = await service.publish("business-facts", "order.placed", tenant="acme")
        assert generated["event_id"]
        assert (await stream.next()).json()["id"] == generated["event_id"]


async def test_batch_returns_ids_in_order_and_events_arrive_in_that_order(
    service: Service,
) -> None:
    async with SSEStream(service.client, topics="task-events") as stream:
        results = await service.publish_batch(
            [{"topic": "task-events", "type": "t.step", "data": {"n": n}} for n in range(20)]
        )
        assert len(results) == 20
        frames = await stream.messages(20)
    assert [f.json()["data"]["n"] for f in frames] == list(range(20))
    assert [f.json()["id"] for f in frames] == [r["event_id"] for r in results]
    assert [f.id for f in frames] == [f"task-events={r['stream_id']}" for r in results]


async def test_malformed_envelope_is_rejected_naming_the_field(service: Service) -> None:
    r = await service.client.post(
        "/v1/events/publish", json={"event": {"topic": "business-facts", "data": {}}}
    )
    assert r.status_code == 422
    error = r.json()["error"]
    assert error["code"] == "validation_error"
    assert "event.type" in error["message"]

    r = await service.client.post(
        "/v1/events/publish", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert r.status_code == 422
    assert r.json()["error"]["code"] == "validation_error"


async def test_bad_topic_name_is_rejected(service: Service) -> None:
    r = await service.client.post(
        "/v1/events/publish", json={"event": {"topic": "Bad Topic!", "type": "x"}}
    )
    assert r.status_code == 422
    error = r.json()["error"]
    assert "event.topic" in error["message"]
    assert "not a valid topic name" in error["message"]


async def test_oversized_payload_is_rejected_with_advice_to_use_working_memory(
    service: Service,
) -> None:
    big = {"blob": "x" * (service.settings.max_payload_bytes + 10)}
    r = await service.client.post(
        "/v1/events/publish", json={"event": {"topic": "business-facts", "type": "x", "data": big}}
    )
    assert r.status_code == 413
    error = r.json()["error"]
    assert error["code"] == "payload_too_large"
    assert "working memory" in error["message"]
    assert error["details"]["field"] == "event.data"
    # The service is unharmed.
    assert (await service.client.get("/ready")).json()["status"] == "ready"


async def test_batch_is_all_or_nothing(service: Service) -> None:
    good = {"topic": "business-facts", "type": "ok"}
    r = await service.client.post(
        "/v1/events/publish-batch",
        json={"events": [good, {"topic": "NOPE", "type": "x"}, good]},
    )
    assert r.status_code == 422
    assert "events.1.topic" in r.json()["error"]["message"]

    big = {**good, "data": {"blob": "x" * (service.settings.max_payload_bytes + 10)}}
    r = await service.client.post("/v1/events/publish-batch", json={"events": [good, big]})
    assert r.status_code == 413
    assert "events.1.data" in r.json()["error"]["message"]

    # Read the topic from its beginning: the first event is the marker, so nothing of
    # the rejected batches was appended.
    async with SSEStream(service.client, topics="business-facts", from_="earliest") as stream:
        await service.publish("business-facts", "marker")
        assert (await stream.next()).json()["type"] == "marker"


async def test_ready_reports_the_backend(service: Service) -> None:
    r = await service.client.get("/ready")
    assert r.status_code == 200
    assert r.json()["checks"] == {"event_log": "ok"}


async def test_jwt_mode_takes_the_tenant_from_the_token(request: pytest.FixtureRequest) -> None:
    settings = make_settings(
        "memory", request, auth_mode="jwt", jwt_secret="event-service-test-secret-0123456789"
    )
    token = issue_token(settings, tenant_id="acme", user_id="bob")
    auth = {"Authorization": f"Bearer {token}"}
    event = {"event": {"topic": "business-facts", "type": "x", "tenant_id": "other"}}
    async with (
        serve(create_app(settings)) as server,
        httpx.AsyncClient(verify=verified_tls(), base_url=server.url, timeout=15) as client,
    ):
        r = await client.post("/v1/events/publish", json=event)
        assert r.status_code == 401
        r = await client.get("/v1/events/stream", params={"topics": "business-facts"})
        assert r.status_code == 401
        async with SSEStream(client, topics="business-facts", headers=auth) as stream:
            r = await client.post("/v1/events/publish", json=event, headers=auth)
            assert r.status_code == 200, r.text
            delivered = (await stream.next()).json()
    assert (delivered["tenant_id"], delivered["user_id"]) == ("acme", "bob")


async def test_an_unreachable_redis_answers_503_and_not_ready(
    request: pytest.FixtureRequest,
) -> None:
    # Nothing listens on port 1: the app starts (nothing connects at start-up) and
    # reports the outage in the common error shape.
    settings = make_settings(
        "memory", request, event_backend="redis", redis_url="redis://127.0.0.1:1/0"
    )
    async with (
        serve(create_app(settings)) as server,
        httpx.AsyncClient(verify=verified_tls(), base_url=server.url, timeout=15) as client,
    ):
        r = await client.post(
            "/v1/events/publish", json={"event": {"topic": "business-facts", "type": "x"}}
        )
        assert r.status_code == 503
        assert r.json()["error"]["code"] == "service_unavailable"
        r = await client.get("/ready")
        assert r.status_code == 503


async def test_publish_keeps_request_ids_body_limit_and_openapi_docs(
    request: pytest.FixtureRequest,
) -> None:
    # Publishing is served ahead of FastAPI's router; the platform behaviour stays.
    settings = make_settings("memory", request, max_request_bytes=4096)
    async with (
        serve(create_app(settings)) as server,
        httpx.AsyncClient(verify=verified_tls(), base_url=server.url, timeout=15) as client,
    ):
        event = {"event": {"topic": "business-facts", "type": "x"}}
        r = await client.post("/v1/events/publish", json=event, headers={"X-Request-ID": "req-42"})
        assert r.status_code == 200, r.text
        assert r.headers["x-request-id"] == "req-42"
        assert r.headers["content-type"] == "application/json"

        r = await client.post(
            "/v1/events/publish-batch",
            json={
                "events": [{"topic": "business-facts", "type": "x", "data": {"pad": "x" * 5000}}]
            },
        )
        assert r.status_code == 413
        assert r.json()["error"]["code"] == "payload_too_large"
        assert r.headers["x-request-id"]

        r = await client.get("/v1/events/publish")
        assert r.status_code == 405
        assert r.json()["error"]["code"] == "method_not_allowed"

        paths = (await client.get("/openapi.json")).json()["paths"]
        for path, field in (
            ("/v1/events/publish", "event"),
            ("/v1/events/publish-batch", "events"),
        ):
            body = paths[path]["post"]["requestBody"]["content"]["application/json"]
            assert field in body["schema"]["properties"]
