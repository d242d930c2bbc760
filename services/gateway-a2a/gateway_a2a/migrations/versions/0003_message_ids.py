"""A client's message id within its context → its task: gateway_message_ids.

Revision ID: 0003_message_ids
Revises: 0002_replicas
Create Date: 2026-11-25
"""

import sqlalchemy as sa
from alembic import op

revision = "0003_message_ids"
down_revision = "0002_replicas"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "gateway_message_ids",
        sa.Column("tenant_id", sa.String(128), primary_key=True),
        sa.Column("context_id", sa.String(256), primary_key=True),
        sa.Column("message_id", sa.String(256), primary_key=True),
        sa.Column("task_id", sa.String(128), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("gateway_message_ids")
