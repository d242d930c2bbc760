"""The event object handlers receive."""

from __future__ import annotations

from typing import Any

from pydantic import PrivateAttr

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

    def to_dict(self) -> dict[str, Any]:
        """The envelope as a JSON-ready dict (snake_case)."""
        return self.model_dump(mode="json")


__all__ = ["Event"]
