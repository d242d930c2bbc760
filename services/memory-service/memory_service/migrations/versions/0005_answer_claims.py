"""Claims on requests: the delivery that runs a request now holds a lease on it, so a
second delivery in flight at the same time waits for its answer instead of running it.

Revision ID: 0005_answer_claims
Revises: 0004_bookkeeping
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import op

revision = "0005_answer_claims"
down_revision = "0004_bookkeeping"
branch_labels = None
depends_on = None

ID = sa.String(256)
TENANT = sa.String(128)
TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "memory_answer_claims",
        sa.Column("tenant_id", TENANT, primary_key=True),
        sa.Column("request_id", ID, primary_key=True),
        sa.Column("owner", sa.String(128), nullable=False),
        sa.Column("claimed_at", TS, nullable=False),
        sa.Column("expires_at", TS, nullable=False),
    )
    op.create_index("ix_memory_answer_claims_expiry", "memory_answer_claims", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_memory_answer_claims_expiry", "memory_answer_claims")
    op.drop_table("memory_answer_claims")
