"""SDK bookkeeping gets its own column: a record's ``state`` holds only the user's data.

Adds ``bookkeeping`` (JSON, default ``{}``) to plans and task contexts and moves the SDK
keys that were kept inside ``state`` (``_plan``, ``__soorma__``, ``choreography_*``,
``_waiting_for`` ...) into it. The moving code lives here, with the only rows it applies
to: records are validated with ``bookkeeping`` as the one place for these keys.

Revision ID: 0004_bookkeeping
Revises: 0003_recorded_answers
Create Date: 2026-11-24
"""

from typing import Any

import orjson
import sqlalchemy as sa
from alembic import op

from soorma_common.bookkeeping import PlanBookkeeping, TaskBookkeeping

revision = "0004_bookkeeping"
down_revision = "0003_recorded_answers"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(sa.Text(), "sqlite")
TABLES = ("memory_plans", "memory_task_contexts")

# Where older records kept the bookkeeping inside ``state``.
LEGACY_PLAN_META = "_plan"
LEGACY_TASK_META = "__soorma__"
# state key -> PlanBookkeeping field
LEGACY_PLAN_KEYS = {
    "resume_status": "resume_status",
    "pause_reason": "pause_reason",
    "failure_reason": "failure_reason",
    "deferred_events": "deferred_events",
}
# state key -> ChoreographyBookkeeping field
LEGACY_CHOREOGRAPHY_KEYS = {
    "choreography_planner": "planner",
    "choreography_actions": "actions",
    "choreography_pending": "pending",
    "choreography_steps": "steps",
    "choreography_answered": "answered",
    "_waiting_for": "waiting_for",
    "_wait_timeout": "wait_timeout",
    "_resumed_by": "resumed_by",
    "llm_audit": "audit",
}


def _as_dict(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, dict) else {}


def lift_plan(data: Any) -> Any:
    """``data`` (a plan record's raw fields) with legacy bookkeeping moved out of state.

    Only a record whose state holds the ``_plan`` entry is one: every plan such an SDK
    wrote had it. Without it, keys like ``pause_reason`` are the user's and stay. The
    keys found in ``state`` win over ``bookkeeping``'s: they were written last.
    """
    if not isinstance(data, dict):
        return data
    state = data.get("state")
    if not isinstance(state, dict) or LEGACY_PLAN_META not in state:
        return data
    state = dict(state)
    book = _as_dict(data.get("bookkeeping"))
    meta = state.pop(LEGACY_PLAN_META, None)
    if isinstance(meta, dict):
        for name in ("correlation_id", "response_topic", "tenant_id", "user_id"):
            if name in meta:
                book[name] = meta[name]
        for name in ("pending", "applied"):
            if isinstance(meta.get(name), dict):
                book[name] = meta[name]
    for key, name in LEGACY_PLAN_KEYS.items():
        if key in state:
            book[name] = state.pop(key)
    moved = {name: state.pop(key) for key, name in LEGACY_CHOREOGRAPHY_KEYS.items() if key in state}
    if moved:
        book["choreography"] = {**_as_dict(book.get("choreography")), **moved}
    return {**data, "state": state, "bookkeeping": book}


def lift_task(data: Any) -> Any:
    """``data`` (a task record's raw fields) with legacy bookkeeping moved out of state."""
    if not isinstance(data, dict):
        return data
    state = data.get("state")
    if not isinstance(state, dict) or LEGACY_TASK_META not in state:
        return data
    state = dict(state)
    meta = state.pop(LEGACY_TASK_META)
    book = {**_as_dict(data.get("bookkeeping")), **(meta if isinstance(meta, dict) else {})}
    return {**data, "state": state, "bookkeeping": book}


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
