"""Keyword search through the GIN index under row-level security (PostgreSQL).

Adds ``soorma_memory_keyword_ids`` (``memory_service.longterm.schema.
pg_keyword_statements``): the policy kept PostgreSQL from using the full-text index, so
every hybrid search read the whole table. SQLite: nothing changes (FTS5 has no policy).

Revision ID: 0008_keyword_function
Revises: 0007_vector_segments
Create Date: 2026-11-28
"""

from alembic import op

from memory_service.longterm.schema import (
    pg_keyword_downgrade,
    pg_keyword_statements,
    tables_exist,
)

revision = "0008_keyword_function"
down_revision = "0007_vector_segments"
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind()
    # Without pgvector there are no tables yet; the service creates them with these
    # statements once it is installed.
    if conn.dialect.name == "postgresql" and tables_exist(conn):
        for statement in pg_keyword_statements():
            conn.exec_driver_sql(statement)


def downgrade() -> None:
    conn = op.get_bind()
    if conn.dialect.name == "postgresql" and tables_exist(conn):
        for statement in pg_keyword_downgrade():
            conn.exec_driver_sql(statement)
