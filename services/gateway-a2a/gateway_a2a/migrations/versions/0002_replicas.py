"""Replica heartbeats and task takeover: gateway_replicas, routes.taken_over_at.

Revision ID: 0002_replicas
Revises: 0001_initial
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import op

revision = "0002_replicas"
down_revision = "0001_initial"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # 0001 creates the routes table from the current model (which has the column on a
    # fresh database), so both steps look first.
    inspector = sa.inspect(op.get_bind())
    if not inspector.has_table("gateway_replicas"):
        op.create_table(
            "gateway_replicas",
            sa.Column("replica_id", sa.String(256), primary_key=True),
            sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
        )
    columns = {c["name"] for c in inspector.get_columns("gateway_task_routes")}
    if "taken_over_at" not in columns:
        op.add_column(
            "gateway_task_routes",
            sa.Column("taken_over_at", sa.DateTime(timezone=True), nullable=True),
        )


def downgrade() -> None:
    with op.batch_alter_table("gateway_task_routes") as batch:
        batch.drop_column("taken_over_at")
    op.drop_table("gateway_replicas")
