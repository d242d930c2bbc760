"""What every memory route needs: the injected store, versions, ids and size limits."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any, Protocol, TypeVar

import orjson
from fastapi import Depends, Header, Path, Request, Response
from pydantic import BaseModel, BeforeValidator, Field

from memory_service.store import MemoryStore
from servicekit.jsoncheck import NulFree, check_json
from soorma_common.base import BaseDTO
from soorma_common.errors import PayloadTooLarge, ValidationFailed
from soorma_common.jsonvalue import NUL, NUL_MESSAGE

MAX_ID_LENGTH = 256
# ``version`` columns are 32-bit integers on Postgres; a larger expected version can never
# match and would fail inside the driver.
MAX_VERSION = 2**31 - 1


async def get_store(request: Request) -> MemoryStore:
    """The store the lifespan opened (request state, never a module global)."""
    return request.state.store  # type: ignore[no-any-return]


Store = Annotated[MemoryStore, Depends(get_store)]

RecordId = Annotated[str, Path(min_length=1, max_length=MAX_ID_LENGTH), NulFree]


def _if_match_value(value: Any) -> Any:
    # Before pydantic reads the integer: the ETag forms, and our own message otherwise.
    return parse_if_match(value) if isinstance(value, str) else value


async def if_match_version(
    if_match: Annotated[
        int | None,
        Header(
            alias="If-Match",
            ge=0,
            le=MAX_VERSION,
            description='The record\'s integer version (its ETag; "3" and W/"3" are accepted too)',
        ),
        BeforeValidator(_if_match_value),
    ] = None,
) -> int | None:
    """``If-Match: 3`` (quotes and a weak ``W/`` prefix accepted, as ETags carry them).

    Declared as an integer in OpenAPI: that is what the header must hold.
    """
    return if_match


def parse_if_match(if_match: str | None) -> int | None:
    """The version in an ``If-Match`` header value (None when absent).

    Raises:
        ValidationFailed: the value is not an integer version.
    """
    if if_match is None:
        return None
    raw = if_match.strip()
    if raw.startswith("W/"):
        raw = raw[2:]
    raw = raw.strip('"')
    if not raw.isdigit():
        raise ValidationFailed(
            f"If-Match must be the record's integer version, got {if_match[:64]!r}",
            details={"field": "If-Match"},
        )
    return int(raw)


IfMatch = Annotated[int | None, Depends(if_match_version)]


def expected_version(header: int | None, body: int | None) -> int | None:
    """The caller's expected version from ``If-Match`` or the body (they must agree)."""
    if header is not None and body is not None and header != body:
        raise ValidationFailed(
            f"If-Match ({header}) and expected_version ({body}) disagree; send one of them",
            details={"field": "expected_version"},
        )
    wanted = header if header is not None else body
    if wanted is not None and not 0 <= wanted <= MAX_VERSION:
        raise ValidationFailed(
            f"expected_version (or If-Match) must be 0-{MAX_VERSION}, got {str(wanted)[:24]}",
            details=[{"field": "expected_version", "message": "out of range"}],
        )
    return wanted


async def check_body_size(request: Request) -> None:
    """413 when the request body is over ``max_payload_bytes``.

    The app-wide middleware only stops bodies far over the limit before parsing; this is
    the exact per-record limit, measured on the bytes the client sent.
    """
    limit = request.app.state.settings.max_payload_bytes
    size = len(await request.body())
    if size > limit:
        raise PayloadTooLarge(
            f"record is {size} bytes, over the {limit}-byte limit "
            "(SOORMA_MAX_PAYLOAD_BYTES); store large data as several working-memory keys",
            details={"size": size, "limit": limit},
        )


SizeChecked = Depends(check_body_size)


def check_ids(field: str, values: Iterable[str | None]) -> None:
    """Ids are indexed columns: keep them to ``MAX_ID_LENGTH`` characters."""
    for value in values:
        if value is not None and not 0 < len(value) <= MAX_ID_LENGTH:
            raise ValidationFailed(
                f"{field}: ids must be 1-{MAX_ID_LENGTH} characters, got {len(value)}",
                details=[{"field": field, "message": "bad id length"}],
            )


def check_storable(body: BaseModel) -> None:
    """422 for input the store cannot keep exactly.

    Integers beyond 64 bits, NaN/Infinity (would silently become ``null``), values
    nested deeper than ``MAX_JSON_DEPTH`` (the encoders fail on them), and NUL
    characters in the record's text columns (ids, names, keys: Postgres text cannot
    hold them; inside JSON values they are fine).
    """
    _check_text_fields(body, "")
    # Each field's value on its own: nesting counts from the value, as for event data
    # (one depth limit for every service: servicekit's MAX_JSON_DEPTH).
    for name, value in body.model_dump().items():
        check_json(value, field=name)
    try:
        orjson.dumps(body.model_dump(mode="json"))
    except TypeError as exc:
        raise ValidationFailed(
            f"body cannot be stored: {exc}; send such numbers as strings",
            details=[{"field": "body", "message": str(exc)}],
        ) from None


def _check_text_fields(model: BaseModel, prefix: str) -> None:
    # Only model-typed structure is walked: plain dicts are JSON documents, stored as JSON.
    for name, info in type(model).model_fields.items():
        if info.annotation is Any:  # a JSON value (working memory), not a text column
            continue
        value = getattr(model, name)
        field = f"{prefix}{name}"
        if isinstance(value, str) and NUL in value:
            raise ValidationFailed(
                f"invalid request: {field}: {NUL_MESSAGE}",
                details=[{"field": field, "message": NUL_MESSAGE}],
            )
        if isinstance(value, BaseModel):
            _check_text_fields(value, f"{field}.")
        elif isinstance(value, list) and any(isinstance(v, str) and NUL in v for v in value):
            raise ValidationFailed(
                f"invalid request: {field}: {NUL_MESSAGE}",
                details=[{"field": field, "message": NUL_MESSAGE}],
            )
        elif isinstance(value, dict) and any(isinstance(v, BaseModel) for v in value.values()):
            for key, child in value.items():
                if NUL in key:
                    raise ValidationFailed(
                        f"invalid request: {field}: keys {NUL_MESSAGE}",
                        details=[{"field": field, "message": NUL_MESSAGE}],
                    )
                _check_text_fields(child, f"{field}.{key}.")


class ConditionalWrite(BaseDTO):
    """Mixed into a record's write body: ``version`` is server-owned and ignored on input.

    ``expected_version`` (or ``If-Match``) makes the write conditional: ``0`` means
    "create only", ``N`` means "only if the stored version is still N".
    """

    expected_version: int | None = Field(default=None, ge=0)


Body = TypeVar("Body", bound=BaseModel)


def with_path_id(body: Body, *, field: str, path_id: str) -> Body:
    """``body`` with the path's id in ``field`` (a ``PUT`` body may omit it).

    Raises:
        ValidationFailed: the body names a different id than the path.
    """
    given = getattr(body, field)
    if given is None:
        # The path's id passed the same checks as the body field would: no re-validation.
        return body.model_copy(update={field: path_id})
    if given != path_id:
        raise ValidationFailed(
            f"{field} in the body ({given!r}) differs from the path ({path_id!r})",
            details=[{"field": field, "message": "must match the path"}],
        )
    return body


class Versioned(Protocol):
    @property
    def version(self) -> int: ...


Record = TypeVar("Record", bound=Versioned)


def with_etag(response: Response, record: Record) -> Record:
    """``record``, with ``ETag: "<version>"`` set on ``response`` (ready for ``If-Match``)."""
    response.headers["ETag"] = f'"{record.version}"'
    return record
