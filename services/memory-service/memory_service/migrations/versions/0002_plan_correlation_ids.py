"""Plans keep their correlation ids in the row (a plan context is read in one statement).

The side table ``memory_plan_correlations`` stays: it is the index by-correlation seeks;
the ``correlation_ids`` column is the ordered list the record returns.

Revision ID: 0002_plan_correlation_ids
Revises: 0001_initial
Create Date: 2026-11-22
"""

import orjson
import sqlalchemy as sa
from alembic import op

revision = "0002_plan_correlation_ids"
down_revision = "0001_initial"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(sa.Text(), "sqlite")


def upgrade() -> None:
    # NOT NULL with a default in one ADD COLUMN: no table rebuild. (SQLite's batch
    # rebuild would drop memory_plans, and ON DELETE CASCADE would empty the side table.)
    op.add_column(
        "memory_plans",
        sa.Column("correlation_ids", JSON, nullable=False, server_default=sa.text("'[]'")),
    )
    conn = op.get_bind()
    rows = conn.execute(
        sa.text(
            "SELECT tenant_id, plan_id, correlation_id FROM memory_plan_correlations "
            "ORDER BY tenant_id, plan_id, position"
        )
    )
    ids: dict[tuple[str, str], list[str]] = {}
    for tenant_id, plan_id, correlation_id in rows:
        ids.setdefault((tenant_id, plan_id), []).append(correlation_id)
    update = sa.text(
        "UPDATE memory_plans SET correlation_ids = :ids "
        "WHERE tenant_id = :tenant_id AND plan_id = :plan_id"
    )
    for (tenant_id, plan_id), values in ids.items():
        conn.execute(
            update,
            {"ids": orjson.dumps(values).decode(), "tenant_id": tenant_id, "plan_id": plan_id},
        )


def downgrade() -> None:
    op.drop_column("memory_plans", "correlation_ids")
