"""The event object handlers receive."""

from __future__ import annotations

from typing import Any

from pydantic import PrivateAttr

from soorma_common.events import EventEnvelope


class Event(EventEnvelope):
    """An :class:`~soorma_common.events.EventEnvelope` as delivered to a handler.

    Supports attribute access (``event.data``) and, as in the seed examples, dict-style
    access (``event["data"]``, ``event.get("correlation_id")``).
    """

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

    def __getitem__(self, key: str) -> Any:
        if key in type(self).model_fields:
            return getattr(self, key)
        raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key in type(self).model_fields

    def get(self, key: str, default: Any = None) -> Any:
        """Dict-style lookup: the field's value, or ``default`` for an unknown name."""
        value = self[key] if key in self else None
        return default if value is None else value

    def to_dict(self) -> dict[str, Any]:
        """The envelope as a JSON-ready dict (snake_case)."""
        return self.model_dump(mode="json")


__all__ = ["Event"]
