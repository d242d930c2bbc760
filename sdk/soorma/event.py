"""The event object handlers receive."""

from __future__ import annotations

from typing import Any, Self

from pydantic import PrivateAttr

from soorma_common.errors import HandlerFailed
from soorma_common.events import EventEnvelope


class Event(EventEnvelope):
    """An :class:`~soorma_common.events.EventEnvelope` as delivered to a handler, with the
    stream's :attr:`delivery_id`. Fields are attributes (``event.data``,
    ``event.correlation_id``)."""

    _delivery_id: str | None = PrivateAttr(default=None)

    @property
    def delivery_id(self) -> str | None:
        """The stream's ``id:`` for this delivery: the token to ack/nack or resume from."""
        return self._delivery_id

    @classmethod
    def from_delivery(
        cls, envelope: str | bytes | dict[str, Any], delivery_id: str | None = None
    ) -> Event:
        """Build an event from an envelope (JSON text or dict) and its SSE frame id."""
        if isinstance(envelope, dict):
            event = cls.model_validate(envelope)
        else:
            event = cls.model_validate_json(envelope)
        event._delivery_id = delivery_id
        return event

    @property
    def failed(self) -> bool:
        """Whether this event is an answer saying its request failed (``success: false``
        or ``status: failed``)."""
        return self.data.get("success") is False or self.data.get("status") == "failed"

    def raise_for_error(self) -> Self:
        """Raise :class:`~soorma.HandlerFailed` when this answer says its request failed;
        else return the event, so it chains::

            answer = (await bus.call("greet.requested", data, response_event=...)).raise_for_error()

        The error carries the handler's message (``error``, else ``reason``), the class
        name of its exception (``error_type``, when the agent sent one) and the id of the
        request (``request_id`` or ``task_id``, else this answer's id).

        Raises:
            HandlerFailed: the answer says ``success: false`` or ``status: failed``.
        """
        if not self.failed:
            return self
        data = self.data
        message = data.get("error") or data.get("reason") or data.get("status") or "failed"
        error_type = data.get("error_type")
        request_id = data.get("request_id") or data.get("task_id")
        raise HandlerFailed(
            str(message),
            error_type=None if error_type is None else str(error_type),
            event_id=None if request_id is None else str(request_id),
            answer_id=self.id,
            answer_type=self.type,
            details=data,
        )

    def to_dict(self) -> dict[str, Any]:
        """The envelope as a JSON-ready dict (snake_case)."""
        return self.model_dump(mode="json")


__all__ = ["Event"]
