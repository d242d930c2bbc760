"""The gateway's one error beyond A2A's own: a platform service it needs is down.

a2a-sdk maps an error *class* to its wire form (``A2A_ERROR_MAPPING`` for HTTP+JSON,
``JSON_RPC_ERROR_CODE_MAP`` for JSON-RPC); anything it does not know becomes a bare
``500 unknown exception``. :class:`DependencyUnavailableError` is registered in those
tables: HTTP+JSON ``503 UNAVAILABLE`` (reason ``SERVICE_UNAVAILABLE``), JSON-RPC
``-32603`` internal error, both with a message naming the service that is down.
"""

from __future__ import annotations

from a2a.utils import errors as a2a_errors
from a2a.utils.errors import (
    ContentTypeNotSupportedError,
    ErrorMapping,
    InternalError,
    TaskNotCancelableError,
)

REASON = "SERVICE_UNAVAILABLE"


class DependencyUnavailableError(InternalError):
    """A platform service the gateway needs (registry, event service) is unreachable."""

    message = "a platform service is unavailable"


def unavailable(service: str, error: Exception | None = None) -> DependencyUnavailableError:
    """The error for ``service`` being down (``error`` is the low-level cause, if any)."""
    cause = f": {error}" if error is not None and str(error) else ""
    return DependencyUnavailableError(
        message=f"the {service} is unavailable{cause}; try again once it is back",
        data={"service": service},
    )


def register() -> None:
    """Teach a2a-sdk's error tables the gateway's error and the 1.0 HTTP statuses
    (idempotent): a task that cannot be canceled is ``409 Conflict``, a media type the
    agent does not take is ``415 Unsupported Media Type`` (a2a-sdk 1.3 answers 400)."""
    a2a_errors.A2A_ERROR_MAPPING[TaskNotCancelableError] = ErrorMapping(
        409, "FAILED_PRECONDITION", "TASK_NOT_CANCELABLE"
    )
    a2a_errors.A2A_ERROR_MAPPING[ContentTypeNotSupportedError] = ErrorMapping(
        415, "INVALID_ARGUMENT", "CONTENT_TYPE_NOT_SUPPORTED"
    )
    mapping = ErrorMapping(503, "UNAVAILABLE", REASON)
    a2a_errors.A2A_ERROR_MAPPING[DependencyUnavailableError] = mapping
    a2a_errors.A2A_ERROR_REASONS[DependencyUnavailableError] = REASON
    a2a_errors.JSON_RPC_ERROR_CODE_MAP[DependencyUnavailableError] = (
        a2a_errors.JSON_RPC_ERROR_CODE_MAP[InternalError]
    )


register()

__all__ = ["DependencyUnavailableError", "register", "unavailable"]
