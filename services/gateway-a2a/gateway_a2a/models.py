"""SQL tables: a2a-sdk's task, version, event and push-config tables, and the routes.

The a2a-sdk tables (``tasks``, ``task_versions``, ``task_events``,
``push_notification_configs``) are created from a2a-sdk's own models. ``gateway_task_routes``
is ours: which tenant and skill a task belongs to, which replica waits for its events,
and what a task in ``input-required`` waits for.
"""

from __future__ import annotations

import sqlalchemy as sa
from a2a.server.models import (
    PushNotificationConfigModel,
    TaskEventModel,
    TaskModel,
    TaskVersionModel,
)

# a2a-sdk's own module-level models and table names: building the stores on other names
# would declare a second model class per store instance (two replicas in one process).
A2A_TABLES = [
    model.__table__
    for model in (TaskModel, TaskVersionModel, TaskEventModel, PushNotificationConfigModel)
]

metadata = sa.MetaData()

routes = sa.Table(
    "gateway_task_routes",
    metadata,
    sa.Column("task_id", sa.String(128), primary_key=True),
    sa.Column("tenant_id", sa.String(128), nullable=False),
    sa.Column("user_id", sa.String(128), nullable=False),
    sa.Column("context_id", sa.String(128), nullable=False),
    sa.Column("skill", sa.String(256), nullable=False),
    sa.Column("request_event", sa.String(256), nullable=False),
    # The replica whose executor waits for this task's events.
    sa.Column("replica", sa.String(256), nullable=False),
    # Set while the task is input-required: the answer's event, topic and correlation.
    sa.Column("awaiting_event", sa.String(256), nullable=True),
    sa.Column("awaiting_topic", sa.String(128), nullable=True),
    sa.Column("awaiting_correlation", sa.String(128), nullable=True),
    sa.Column("finished", sa.Boolean, nullable=False, default=False),
    sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    # Set when a live replica took the task over from one that stopped (0002).
    sa.Column("taken_over_at", sa.DateTime(timezone=True), nullable=True),
)
sa.Index("ix_gateway_routes_awaiting", routes.c.awaiting_correlation)
sa.Index("ix_gateway_routes_open", routes.c.finished, routes.c.tenant_id)

# Each replica's heartbeat: a replica silent for the lease has stopped (0002).
replicas = sa.Table(
    "gateway_replicas",
    metadata,
    sa.Column("replica_id", sa.String(256), primary_key=True),
    sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
)

# A client's message id within its context → the task it started (a retry gets it back).
message_ids = sa.Table(
    "gateway_message_ids",
    metadata,
    sa.Column("tenant_id", sa.String(128), primary_key=True),
    sa.Column("context_id", sa.String(256), primary_key=True),
    sa.Column("message_id", sa.String(256), primary_key=True),
    sa.Column("task_id", sa.String(128), nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
)
