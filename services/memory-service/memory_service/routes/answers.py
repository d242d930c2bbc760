"""``/v1/memory/answers/{request_id}``: answers recorded by request id, for a while.

A tool or worker records the answer it sent for a request; when the same request comes
again (redelivered, or re-sent by a planner after a crash) it answers with the recorded
answer instead of running again. The first answer recorded wins until it expires
(``retention_seconds``, default one day, at most 30 days). Expired answers are not
returned and are deleted as new ones are written.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from fastapi import APIRouter
from pydantic import Field
from sqlalchemy.ext.asyncio import AsyncEngine

from memory_service.routes.deps import RecordId, SizeChecked, Store, check_storable
from memory_service.sql.answers import SqlAnswers
from servicekit import CurrentIdentity
from servicekit.errors import error_responses
from soorma_common._base import BaseDTO
from soorma_common.errors import NotFound

DEFAULT_RETENTION_SECONDS = 86_400.0
MAX_RETENTION_SECONDS = 30 * 86_400.0

router = APIRouter(prefix="/v1/memory/answers", tags=["answers"], responses=error_responses(422))


class AnswerWrite(BaseDTO):
    """Body of ``PUT``: the answer, and how long to keep it."""

    answer: dict[str, Any]
    retention_seconds: float = Field(
        default=DEFAULT_RETENTION_SECONDS, ge=1.0, le=MAX_RETENTION_SECONDS
    )


class RecordedAnswer(BaseDTO):
    """An answer kept for a request."""

    request_id: str
    answer: dict[str, Any]
    recorded_at: datetime
    expires_at: datetime


_stores: dict[int, SqlAnswers] = {}


def _answers(store: Any) -> SqlAnswers:
    engine: AsyncEngine = store.engine
    found = _stores.get(id(engine))
    if found is None or found.engine is not engine:
        found = _stores[id(engine)] = SqlAnswers(engine=engine)
    return found


@router.put(
    "/{request_id}",
    responses=error_responses(413),
    response_model=RecordedAnswer,
    dependencies=[SizeChecked],
)
async def record_answer(
    request_id: RecordId, body: AnswerWrite, identity: CurrentIdentity, store: Store
) -> RecordedAnswer:
    """Record the answer to ``request_id`` unless one is recorded: the kept answer."""
    check_storable(body)
    kept = await _answers(store).record(
        identity.tenant_id,
        request_id,
        body.answer,
        retention=timedelta(seconds=body.retention_seconds),
    )
    return RecordedAnswer.model_validate(kept)


@router.get("/{request_id}", responses=error_responses(404), response_model=RecordedAnswer)
async def get_answer(
    request_id: RecordId, identity: CurrentIdentity, store: Store
) -> RecordedAnswer:
    """The unexpired answer recorded for ``request_id`` (404 when there is none)."""
    kept = await _answers(store).get(identity.tenant_id, request_id)
    if kept is None:
        raise NotFound(
            f"no answer is recorded for request {request_id!r} (never, or expired)",
            details={"request_id": request_id},
        )
    return RecordedAnswer.model_validate(kept)
