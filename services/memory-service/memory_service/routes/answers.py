"""``/v1/memory/answers/{request_id}``: answers recorded by request id, for a while.

A tool or worker records the answer it sent for a request; when the same request comes
again (redelivered, or re-sent by a planner after a crash) it answers with the recorded
answer instead of running again. The first answer recorded wins until it expires
(``retention_seconds``, default one day, at most 30 days). Expired answers are not
returned and are deleted as new ones are written.

``/v1/memory/answers/{request_id}/claim``: the delivery about to run a request claims it
first, for a lease it renews while it runs; a second delivery in flight at the same time
is told the claim is held (and until when) and waits for the answer, or for the lease to
run out (its holder died). Recording the answer ends the claim.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response
from pydantic import Field

from memory_service.routes.deps import RecordId, SizeChecked, check_storable
from memory_service.sql.answers import SqlAnswers
from memory_service.sql.claims import SqlClaims
from servicekit import CurrentIdentity
from servicekit.errors import error_responses
from soorma_common.base import BaseDTO
from soorma_common.errors import NotFound
from soorma_common.memory import AnswerClaim

DEFAULT_RETENTION_SECONDS = 86_400.0
MAX_RETENTION_SECONDS = 30 * 86_400.0
MIN_LEASE_SECONDS, MAX_LEASE_SECONDS = 1.0, 600.0
MAX_OWNER_LENGTH = 128

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


class ClaimWrite(BaseDTO):
    """Body of ``PUT .../claim``: who claims, and for how long."""

    owner: str = Field(
        min_length=1,
        max_length=MAX_OWNER_LENGTH,
        pattern=r"^[^\x00]+$",
        description="The claimant's token (one per delivery); the same owner renews",
    )
    lease_seconds: float = Field(
        ge=MIN_LEASE_SECONDS,
        le=MAX_LEASE_SECONDS,
        description="Seconds the claim holds unless renewed",
    )


async def get_answers(request: Request) -> SqlAnswers:
    """The recorded answers the lifespan built (on the store's engine and clock)."""
    return request.state.answers  # type: ignore[no-any-return]


async def get_claims(request: Request) -> SqlClaims:
    """The claims the lifespan built (on the store's engine and clock)."""
    return request.state.claims  # type: ignore[no-any-return]


Answers = Annotated[SqlAnswers, Depends(get_answers)]
Claims = Annotated[SqlClaims, Depends(get_claims)]


@router.put(
    "/{request_id}",
    responses=error_responses(413),
    response_model=RecordedAnswer,
    dependencies=[SizeChecked],
)
async def record_answer(
    request_id: RecordId, body: AnswerWrite, identity: CurrentIdentity, answers: Answers
) -> RecordedAnswer:
    """Record the answer to ``request_id`` unless one is recorded: the kept answer."""
    check_storable(body)
    kept = await answers.record(
        identity.tenant_id,
        request_id,
        body.answer,
        retention=timedelta(seconds=body.retention_seconds),
    )
    return RecordedAnswer.model_validate(kept)


@router.get("/{request_id}", responses=error_responses(404), response_model=RecordedAnswer)
async def get_answer(
    request_id: RecordId, identity: CurrentIdentity, answers: Answers
) -> RecordedAnswer:
    """The unexpired answer recorded for ``request_id`` (404 when there is none)."""
    kept = await answers.get(identity.tenant_id, request_id)
    if kept is None:
        raise NotFound(
            f"no answer is recorded for request {request_id!r} (never, or expired)",
            details={"request_id": request_id},
        )
    return RecordedAnswer.model_validate(kept)


@router.put("/{request_id}/claim", response_model=AnswerClaim)
async def claim_request(
    request_id: RecordId, body: ClaimWrite, identity: CurrentIdentity, claims: Claims
) -> AnswerClaim:
    """Claim ``request_id`` before running it, or renew the caller's own claim.

    ``granted``: run it (renew before ``expires_at``); ``answered``: send ``answer``, do
    not run; ``held``: another ``owner`` runs it until ``expires_at`` (unless renewed).
    """
    outcome = await claims.claim(
        identity.tenant_id,
        request_id,
        body.owner,
        lease=timedelta(seconds=body.lease_seconds),
    )
    return AnswerClaim.model_validate(outcome)


@router.delete(
    "/{request_id}/claim", status_code=204, responses=error_responses(404), response_class=Response
)
async def release_claim(
    request_id: RecordId,
    identity: CurrentIdentity,
    claims: Claims,
    owner: str = Query(min_length=1, max_length=MAX_OWNER_LENGTH, description="The holder"),
) -> Response:
    """Give back ``owner``'s claim on ``request_id`` (404 when it holds none)."""
    if not await claims.release(identity.tenant_id, request_id, owner):
        raise NotFound(
            f"{owner!r} holds no claim on request {request_id!r} (never, expired, taken "
            "over, or ended by the answer)",
            details={"request_id": request_id, "owner": owner},
        )
    return Response(status_code=204)
