"""Domain errors shared by services and SDK.

Errors carry a stable ``code`` and no HTTP: services map codes to status codes in one
table (``servicekit.errors``), and the SDK maps a response's ``code`` back to the same
class with :func:`error_from_payload`, so agent authors catch ``VersionConflict`` rather
than an HTTP exception.
"""

from __future__ import annotations

from typing import Any, ClassVar


class SoormaError(Exception):
    """Base of every Soorma domain error."""

    code: ClassVar[str] = "internal_error"

    def __init__(self, message: str, *, details: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def to_payload(self) -> dict[str, Any]:
        """The ``{"error": {...}}`` body rendered by services."""
        return {"error": {"code": self.code, "message": self.message, "details": self.details}}


class ValidationFailed(SoormaError):
    code = "validation_error"


class NotFound(SoormaError):
    code = "not_found"


class Conflict(SoormaError):
    code = "conflict"


class VersionConflict(Conflict):
    code = "version_conflict"


class PayloadTooLarge(SoormaError):
    code = "payload_too_large"


class Unauthenticated(SoormaError):
    code = "unauthenticated"


class PermissionDenied(SoormaError):
    code = "permission_denied"


class ServiceUnavailable(SoormaError):
    code = "service_unavailable"


class ConfigurationError(SoormaError):
    """A setting the user must fix (a URL without a scheme, a value not allowed...);
    raised at once, never retried."""

    code = "configuration_error"


class HandlerFailed(SoormaError):
    """An agent's handler failed on a request, and its answer says so
    (``success: false``). Raised by ``Event.raise_for_error()`` on the caller's side.

    Attributes:
        message: The handler's message (names the exception class when the exception's
            own text says nothing, e.g. ``KeyError: 'topic'``).
        error_type: The class name of the handler's exception (``"KeyError"``), or
            ``None`` when the agent answered with a failure of its own (e.g.
            ``task.fail("...")`` with a string, a plan that failed).
        event_id: The id of the request the handler failed on (the answer's id when the
            answer does not name its request).
        answer_id: The answer's event id.
        answer_type: The answer's event type.
    """

    code = "handler_failed"

    def __init__(
        self,
        message: str,
        *,
        error_type: str | None = None,
        event_id: str | None = None,
        answer_id: str | None = None,
        answer_type: str | None = None,
        details: Any = None,
    ) -> None:
        super().__init__(message, details=details)
        self.error_type = error_type
        self.event_id = event_id or answer_id
        self.answer_id = answer_id
        self.answer_type = answer_type

    def __str__(self) -> str:
        # One line: a handler's message may span several (a validation error).
        text = " ".join(self.message.split()) or "no message"
        if self.event_id and self.event_id != self.answer_id:
            return f"the handler failed: {text} (request {self.event_id})"
        if self.answer_id:
            return f"the handler failed: {text} (answer {self.answer_id})"
        return f"the handler failed: {text}"


class InvalidTopic(ValidationFailed):
    code = "invalid_topic"


class EventNotFound(NotFound):
    code = "event_not_found"


class TaskNotFound(NotFound):
    code = "task_not_found"


class PlanNotFound(NotFound):
    code = "plan_not_found"


class SessionNotFound(NotFound):
    code = "session_not_found"


class MemoryKeyNotFound(NotFound):
    code = "memory_key_not_found"


class AgentNotFound(NotFound):
    code = "agent_not_found"


class EventDefinitionNotFound(NotFound):
    code = "event_definition_not_found"


class SchemaInvalid(ValidationFailed):
    code = "schema_invalid"


class PayloadInvalid(ValidationFailed):
    """A payload does not match the JSON Schema registered for its event."""

    code = "payload_invalid"


class MemoryNotFound(NotFound):
    """A long-term memory record (semantic, episode, procedure) is not there (or not yours)."""

    code = "memory_not_found"


class EmbeddingUnavailable(ServiceUnavailable):
    """The embedding provider did not answer; nothing was written."""

    code = "embedding_unavailable"


class EmbeddingMismatch(Conflict):
    """A vector's dimension or model does not match the active embedding model."""

    code = "embedding_mismatch"


class VectorSearchUnavailable(ServiceUnavailable):
    """The database has no vector support (PostgreSQL without pgvector)."""

    code = "vector_search_unavailable"


def _all_subclasses(cls: type[SoormaError]) -> list[type[SoormaError]]:
    out: list[type[SoormaError]] = []
    for sub in cls.__subclasses__():
        out.append(sub)
        out.extend(_all_subclasses(sub))
    return out


def error_class_for(code: str) -> type[SoormaError]:
    """The error class with this stable ``code`` (``SoormaError`` when unknown)."""
    classes: list[type[SoormaError]] = [SoormaError, *_all_subclasses(SoormaError)]
    for cls in classes:
        if cls.code == code:
            return cls
    return SoormaError


def describe_exception(exc: BaseException) -> str:
    """A handler exception as its caller reads it: its text, led by its class name when
    the text alone says nothing (``KeyError: 'topic'``, not ``'topic'``; an empty
    message gives the class name). A sentence (text with a space) stands alone, as
    does a Soorma error's message."""
    name = type(exc).__name__
    text = str(exc).strip()
    if not text:
        return name
    if isinstance(exc, SoormaError):
        return text
    if isinstance(exc, KeyError) or not any(c.isspace() for c in text):
        return f"{name}: {text}"
    return text


def error_from_payload(payload: Any, *, default_message: str = "request failed") -> SoormaError:
    """Rebuild the domain error from a service's ``{"error": {...}}`` body."""
    body = payload.get("error") if isinstance(payload, dict) else None
    if not isinstance(body, dict):
        return SoormaError(default_message, details=payload)
    cls = error_class_for(str(body.get("code", "")))
    return cls(str(body.get("message") or default_message), details=body.get("details"))


__all__ = [
    "AgentNotFound",
    "ConfigurationError",
    "Conflict",
    "EmbeddingMismatch",
    "EmbeddingUnavailable",
    "EventDefinitionNotFound",
    "EventNotFound",
    "HandlerFailed",
    "InvalidTopic",
    "MemoryKeyNotFound",
    "MemoryNotFound",
    "NotFound",
    "PayloadInvalid",
    "PayloadTooLarge",
    "PermissionDenied",
    "PlanNotFound",
    "SchemaInvalid",
    "ServiceUnavailable",
    "SessionNotFound",
    "SoormaError",
    "TaskNotFound",
    "Unauthenticated",
    "ValidationFailed",
    "VectorSearchUnavailable",
    "VersionConflict",
    "describe_exception",
    "error_class_for",
    "error_from_payload",
]
