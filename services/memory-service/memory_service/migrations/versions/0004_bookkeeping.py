"""SDK bookkeeping gets its own column: a record's ``state`` holds only the user's data.

Adds ``bookkeeping`` (JSON, default ``{}``) to plans and task contexts and moves what
older SDKs kept inside ``state`` (``_plan``, ``__soorma__``, ``choreography_*``,
``_waiting_for`` ...) into it. Rows this migration does not reach (written later by an
older SDK) are lifted the same way whenever they are read or written
(``soorma_common.bookkeeping``).

Revision ID: 0004_bookkeeping
Revises: 0003_recorded_answers
Create Date: 2026-11-24
"""

from typing import Any

import orjson
import sqlalchemy as sa
from alembic import op

from soorma_common.bookkeeping import (
    LEGACY_PLAN_META,
    LEGACY_TASK_META,
    PlanBookkeeping,
    TaskBookkeeping,
    lift_plan,
    lift_task,
)

revision = "0004_bookkeeping"
down_revision = "0003_recorded_answers"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(sa.Text(), "sqlite")
TABLES = ("memory_plans", "memory_task_contexts")


def _load(value: Any) -> Any:
    return orjson.loads(value) if isinstance(value, str | bytes) else value


def _migrate(table: str, key: str, marker: str, lift: Any, model: Any) -> None:
    conn = op.get_bind()
    sqlite = conn.dialect.name == "sqlite"
    rows = conn.execute(sa.text(f"SELECT tenant_id, {key}, state FROM {table}"))
    update = sa.text(
        f"UPDATE {table} SET state = :state, bookkeeping = :bookkeeping "
        f"WHERE tenant_id = :tenant_id AND {key} = :id"
    )
    if not sqlite:
        update = update.bindparams(
            sa.bindparam("state", type_=sa.JSON()), sa.bindparam("bookkeeping", type_=sa.JSON())
        )
    for tenant_id, record_id, raw in rows.fetchall():
        state = _load(raw)
        if not isinstance(state, dict) or marker not in state:
            continue
        lifted = lift({"state": state})
        book = model.model_validate(lifted["bookkeeping"]).model_dump(mode="json")
        values = {"state": lifted["state"], "bookkeeping": book}
        if sqlite:
            values = {k: orjson.dumps(v).decode() for k, v in values.items()}
        conn.execute(update, {**values, "tenant_id": tenant_id, "id": record_id})


def upgrade() -> None:
    # NOT NULL with a default in one ADD COLUMN: no table rebuild (see 0002).
    for table in TABLES:
        op.add_column(
            table,
            sa.Column("bookkeeping", JSON, nullable=False, server_default=sa.text("'{}'")),
        )
    _migrate("memory_plans", "plan_id", LEGACY_PLAN_META, lift_plan, PlanBookkeeping)
    _migrate("memory_task_contexts", "task_id", LEGACY_TASK_META, lift_task, TaskBookkeeping)


def downgrade() -> None:
    for table in TABLES:
        op.drop_column(table, "bookkeeping")
