"""The gateway's own Prometheus metrics: open tasks by state (on servicekit's ``/metrics``).

``soorma_gateway_open_tasks{state}`` counts the tasks the gateway still routes (not
finished), by A2A task state, over all tenants. It is read at scrape time (at most once
per ``metrics_cache_seconds``) with one query bounded to :data:`MAX_ROWS` rows through
the routes table's ``finished`` index; finished tasks are not scanned.
``soorma_gateway_refused_events_total`` counts the events the bridge dropped because
their tenant was not their task's. Request rates and
latencies of every A2A route come from servicekit's request metrics.
"""

from __future__ import annotations

from collections import Counter as Tally
from typing import Any

import sqlalchemy as sa
from fastapi import FastAPI
from prometheus_client import Gauge

from gateway_a2a.bridge import Bridge
from gateway_a2a.models import routes
from gateway_a2a.store import Stores

MAX_ROWS = 10_000
STATES = frozenset(
    {
        "submitted",
        "working",
        "input_required",
        "auth_required",
        "completed",
        "failed",
        "canceled",
        "rejected",
        "unknown",
    }
)


def state_label(status: Any) -> str:
    """``TASK_STATE_INPUT_REQUIRED`` / ``input-required`` -> ``input_required``."""
    raw = status.get("state") if isinstance(status, dict) else None
    if not isinstance(raw, str):
        return "unknown"
    name = raw.lower().removeprefix("task_state_").replace("-", "_")
    return name if name in STATES else "unknown"


def register(app: FastAPI, stores: Stores, bridge: Bridge) -> None:
    """Add the gateway's gauges to the app's metrics (no-op when metrics are off)."""
    metrics = getattr(app, "metrics", None)
    if metrics is None:
        return
    open_tasks = Gauge(
        "soorma_gateway_open_tasks",
        "Tasks the gateway still routes (not finished), by A2A state, all tenants.",
        ("state",),
        registry=metrics.registry,
    )
    complete = Gauge(
        "soorma_gateway_open_tasks_complete",
        f"1 when the last refresh counted every open task, 0 when it stopped at {MAX_ROWS}.",
        registry=metrics.registry,
    )
    refused = Gauge(
        "soorma_gateway_refused_events_total",
        "Events from the tap dropped because their tenant is not their task's tenant.",
        registry=metrics.registry,
    )
    refused.set_function(lambda: bridge.refused)
    tasks = sa.table("tasks", sa.column("id"), sa.column("status", sa.JSON))
    query = (
        sa.select(tasks.c.status)
        .select_from(routes.join(tasks, tasks.c.id == routes.c.task_id))
        .where(routes.c.finished.is_(False))
        .limit(MAX_ROWS + 1)
    )

    async def refresh() -> None:
        async with stores.engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        counts = Tally(state_label(row[0]) for row in rows[:MAX_ROWS])
        open_tasks.clear()
        for state in STATES:
            open_tasks.labels(state).set(counts.get(state, 0))
        complete.set(0 if len(rows) > MAX_ROWS else 1)

    metrics.on_scrape(refresh)


__all__ = ["register", "state_label"]
