"""Initial gateway schema: a2a-sdk's task/version/event/push tables and task routes.

Revision ID: 0001_initial
Revises:
Create Date: 2026-11-24
"""

from alembic import op

from gateway_a2a.models import A2A_TABLES, metadata, routes

revision = "0001_initial"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    bind = op.get_bind()
    # a2a-sdk owns these tables' shape: create them from its models, as of a2a-sdk 1.3.
    for table in A2A_TABLES:
        table.create(bind, checkfirst=True)
    metadata.create_all(bind, tables=[routes], checkfirst=True)


def downgrade() -> None:
    bind = op.get_bind()
    metadata.drop_all(bind, tables=[routes])
    for table in reversed(A2A_TABLES):
        table.drop(bind, checkfirst=True)
