"""Semantic vectors indexed in bulk by segments, and one-statement searches (PostgreSQL).

Adds ``memory_semantic.seq`` (insert order) and its index, drops the per-model HNSW index
that every insert went through row by row (the service builds segment indexes in the
background instead, ``memory_service.longterm.segments``; until the first is built,
searches rank exactly) and adds the search function. SQLite: nothing changes.

Revision ID: 0007_vector_segments
Revises: 0006_long_term_memory
Create Date: 2026-11-25
"""

from alembic import op

from memory_service.longterm.schema import (
    pg_segment_downgrade,
    pg_segment_statements,
    tables_exist,
)

revision = "0007_vector_segments"
down_revision = "0006_long_term_memory"
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind()
    # Without pgvector there are no tables yet; the service creates them with these
    # statements once it is installed.
    if conn.dialect.name == "postgresql" and tables_exist(conn):
        for statement in pg_segment_statements():
            conn.exec_driver_sql(statement)


def downgrade() -> None:
    conn = op.get_bind()
    if conn.dialect.name == "postgresql" and tables_exist(conn):
        for statement in pg_segment_downgrade():
            conn.exec_driver_sql(statement)
