"""Long-term memory: semantic, episodic and procedural records with their vectors.

On PostgreSQL the tables need pgvector; where the extension is not available this
revision creates nothing (the other stores keep working) and the service creates the
tables at start-up once it is (``memory_service.longterm.schema``).

Revision ID: 0006_long_term_memory
Revises: 0005_answer_claims
Create Date: 2026-11-25
"""

from alembic import op

from memory_service.longterm.schema import create_schema, drop_schema

revision = "0006_long_term_memory"
down_revision = "0005_answer_claims"
branch_labels = None
depends_on = None


def upgrade() -> None:
    create_schema(op.get_bind())


def downgrade() -> None:
    drop_schema(op.get_bind())
