"""What the long-term memory clients (knowledge, episodes, procedures) share."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from soorma_common.errors import ValidationFailed

# ``(method, path, **request options) -> decoded JSON``: the memory client's request.
Send = Callable[..., Awaitable[Any]]

B = TypeVar("B", bound=BaseModel)


def request_body(model: type[B], **fields: Any) -> dict[str, Any]:
    """``fields`` checked against the request DTO, as JSON; ``None`` fields left out.

    Checked here so a bad argument fails before a round-trip, with the same error the
    service would answer.

    Raises:
        ValidationFailed: the fields do not make a valid ``model`` (the message says why).
    """
    try:
        body = model.model_validate(fields)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or model.__name__}: {e['msg']}"
            for e in exc.errors()
        )
        raise ValidationFailed(
            f"invalid {model.__name__}: {problems}"[:1000],
            details={"errors": exc.errors(include_url=False, include_context=False)},
        ) from None
    return body.model_dump(mode="json", exclude_none=True)


def records_of(data: Any) -> list[Any]:
    """The records of a list answer: a bare list, or ``{"items"|"records"|...: [...]}``."""
    if isinstance(data, list):
        return data
    if isinstance(data, Mapping):
        for key in ("items", "records", "chunks", "episodes", "procedures"):
            value = data.get(key)
            if isinstance(value, list):
                return value
    raise ValueError(f"unexpected list answer from the memory service: {str(data)[:200]}")


__all__ = ["Send", "records_of", "request_body"]
