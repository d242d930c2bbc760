"""servicekit's ``GET /metrics``: format, route templates, access rule, bounded labels; and
every service answers it, with its storage latency."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import APIRouter
from prometheus_client.parser import text_string_to_metric_families
from pydantic import ValidationError

from memory_service import create_app as create_memory_app
from registry_service import create_app as create_registry_app
from servicekit import ServiceSettings, create_service_app
from testsupport.services import db_url, in_process, memory_settings, registry_settings
from tracker_service import create_app as create_tracker_app
from tracker_service.settings import Settings as TrackerSettings

__all__ = ["db_url"]  # a fixture: pytest finds it by its name in this module

pytestmark = pytest.mark.asyncio

COUNT = "soorma_http_request_duration_seconds_count"
STORAGE = "soorma_storage_operation_duration_seconds_count"
router = APIRouter()


@router.get("/items/{item_id}")
async def item(item_id: str) -> dict[str, str]:
    return {"item_id": item_id}


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


async def scrape(client: httpx.AsyncClient, **kwargs: Any) -> Samples:
    r = await client.get("/metrics", **kwargs)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain; version=")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(r.text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def label_values(samples: Samples, name: str, label: str) -> set[str]:
    return {v for (n, pairs) in samples if n == name for k, v in pairs if k == label}


def _app(**settings: Any) -> Any:
    return create_service_app(
        name="metrics-svc", settings=ServiceSettings(**settings), routers=[router]
    )


async def test_requests_are_counted_by_route_template_method_and_status() -> None:
    async with in_process(_app()) as client:
        for n in range(20):
            assert (await client.get(f"/items/id-{n}")).status_code == 200
        assert (await client.post("/items/x")).status_code == 405
        assert (await client.get("/nowhere/at-all")).status_code == 404
        samples = await scrape(client)
    assert value(samples, COUNT, method="GET", route="/items/{item_id}", status="200") == 20
    assert value(samples, COUNT, method="POST", route="/items/{item_id}", status="405") == 1
    assert value(samples, COUNT, method="GET", route="unmatched", status="404") == 1
    assert value(samples, "soorma_service_info", service="metrics-svc") == 1
    # 20 different ids, one series: no raw path reaches a label.
    assert label_values(samples, COUNT, "route") == {"/items/{item_id}", "unmatched"}
    buckets = [
        v
        for (name, pairs), v in samples.items()
        if name == "soorma_http_request_duration_seconds_bucket"
        and ("route", "/items/{item_id}") in pairs
        and ("status", "200") in pairs
    ]
    assert max(buckets) == 20  # the +Inf bucket holds every observation


async def test_a_metrics_token_guards_the_endpoint() -> None:
    async with in_process(_app(metrics_token="scrape-secret")) as client:
        r = await client.get("/metrics")
        assert r.status_code == 401
        assert r.json()["error"]["code"] == "unauthenticated"
        assert r.headers["www-authenticate"] == "Bearer"
        r = await client.get("/metrics", headers={"Authorization": "Bearer wrong"})
        assert r.status_code == 401
        await scrape(client, headers={"Authorization": "Bearer scrape-secret"})


async def test_tenant_labels_need_a_token() -> None:
    with pytest.raises(ValidationError, match="METRICS_TOKEN"):
        ServiceSettings(metrics_tenant_label=True)
    assert ServiceSettings(metrics_tenant_label=True, metrics_token="t").metrics_tenant_label


async def test_metrics_can_be_switched_off() -> None:
    async with in_process(_app(metrics_enabled=False)) as client:
        assert (await client.get("/metrics")).status_code == 404


async def test_memory_service_counts_fast_path_routes_and_storage_calls(
    db_url: str, tmp_path: Any
) -> None:
    app = create_memory_app(memory_settings(db_url, tmp_path))
    async with in_process(app, headers={"X-Tenant-ID": "tenant-m"}) as client:
        body = {"plan_id": "p1", "goal_event": "g", "correlation_ids": ["c1"]}
        assert (await client.post("/v1/memory/plan-context", json=body)).status_code == 200
        for _ in range(3):
            assert (await client.get("/v1/memory/plan-context/p1")).status_code == 200
        assert (await client.get("/v1/memory/plan-context/by-correlation/c1")).status_code == 200
        assert (await client.get("/v1/memory/plan-context/nope")).status_code == 404
        samples = await scrape(client)
    plan = "/v1/memory/plan-context/{plan_id}"
    # Answered by the fast path, labelled with the route's template like FastAPI's routes.
    assert value(samples, COUNT, method="GET", route=plan, status="200") == 3
    assert value(samples, COUNT, method="GET", route=plan, status="404") == 1
    by_correlation = "/v1/memory/plan-context/by-correlation/{correlation_id}"
    assert value(samples, COUNT, method="GET", route=by_correlation, status="200") == 1
    assert value(samples, STORAGE, operation="get_plan") == 4
    assert value(samples, STORAGE, operation="save_plan") == 1
    assert "tenant-m" not in {v for (_, pairs) in samples for _, v in pairs}


async def test_registry_and_tracker_time_their_storage(db_url: str, tmp_path: Any) -> None:
    registry = create_registry_app(registry_settings(db_url, tmp_path))
    async with in_process(registry) as client:
        assert (await client.get("/v1/agents")).status_code == 200
        samples = await scrape(client)
    assert value(samples, COUNT, method="GET", route="/v1/agents", status="200") == 1
    assert sum(v for (name, _), v in samples.items() if name == STORAGE) >= 1

    tracker = create_tracker_app(
        TrackerSettings(
            tracker_database_url=db_url,
            data_dir=tmp_path,
            tracker_projector=False,
            tracker_timeouts=False,
        )
    )
    async with in_process(tracker) as client:
        assert (await client.get("/v1/tracker/plans")).status_code == 200
        samples = await scrape(client)
    assert value(samples, COUNT, method="GET", route="/v1/tracker/plans", status="200") == 1
    assert value(samples, STORAGE, operation="SELECT") >= 1
    assert label_values(samples, STORAGE, "operation") <= {
        "SELECT",
        "INSERT",
        "UPDATE",
        "DELETE",
        "WITH",
        "BEGIN",
        "COMMIT",
        "OTHER",
    }
