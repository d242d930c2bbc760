"""Answers recorded by request id, with an expiry (tools and workers answer a repeated
request from them instead of running again).

Revision ID: 0003_recorded_answers
Revises: 0002_plan_correlation_ids
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import op

revision = "0003_recorded_answers"
down_revision = "0002_plan_correlation_ids"
branch_labels = None
depends_on = None

ID = sa.String(256)
TENANT = sa.String(128)
TS = sa.DateTime(timezone=True)
JSON = sa.JSON().with_variant(sa.Text(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "memory_recorded_answers",
        sa.Column("tenant_id", TENANT, primary_key=True),
        sa.Column("request_id", ID, primary_key=True),
        sa.Column("answer", JSON, nullable=False),
        sa.Column("recorded_at", TS, nullable=False),
        sa.Column("expires_at", TS, nullable=False),
    )
    op.create_index("ix_memory_recorded_answers_expiry", "memory_recorded_answers", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_memory_recorded_answers_expiry", "memory_recorded_answers")
    op.drop_table("memory_recorded_answers")
