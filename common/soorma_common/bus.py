"""Event-service request/response DTOs (publish, ack/nack, dead letters)."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from soorma_common.base import BaseDTO
from soorma_common.events import EventEnvelope


class PublishRequest(BaseDTO):
    event: EventEnvelope


class PublishResponse(BaseDTO):
    event_id: str
    stream_id: str


class PublishBatchRequest(BaseDTO):
    events: list[EventEnvelope] = Field(min_length=1, max_length=1000)


class PublishBatchResponse(BaseDTO):
    results: list[PublishResponse]


class AckRequest(BaseDTO):
    group: str = Field(min_length=1, max_length=128)
    ids: list[str] = Field(min_length=1, max_length=1000)
    # "*": deliveries of a tap stream (only platform services may read or ack the tap).
    tenant: str | None = Field(default=None, max_length=128)


class NackRequest(AckRequest):
    reason: str = Field(default="nacked", max_length=4096)


class AckResponse(BaseDTO):
    count: int


class ExtendRequest(AckRequest):
    """Renew the lease of deliveries a handler is still working on.

    ``consumer``: the caller's consumer id; deliveries held by another consumer (taken
    over after this one's lease expired) are then not renewed, and the answer is 409.
    ``running``: deliveries whose handler has started (renewed too, and marked started
    in their current delivery; see ``count_deliveries`` of the stream).
    """

    consumer: str | None = Field(default=None, min_length=1, max_length=128)
    running: list[str] = Field(
        default_factory=list,
        max_length=1000,
        description="Delivery ids whose handler has started (renewed and marked started)",
    )


class ExtendResponse(BaseDTO):
    extended: int = Field(description="Deliveries whose lease was renewed (still pending)")


class DeadLetter(BaseDTO):
    id: str = Field(description="Id of the dead letter in the dead-letter topic")
    event: EventEnvelope
    reason: str
    deliveries: int
    group: str | None = None
    dead_at: datetime


class DeadLetterList(BaseDTO):
    events: list[DeadLetter]


class ReplayRequest(BaseDTO):
    topic: str
    ids: list[str] = Field(min_length=1, max_length=1000)


class ReplayResponse(BaseDTO):
    results: list[PublishResponse]


class ConsumerGroupStatus(BaseDTO):
    """How far one consumer group is behind on one topic of the caller's tenant."""

    group: str
    topic: str
    lag: int = Field(description="Events on the topic not yet delivered to the group")
    pending: int = Field(description="Events delivered to the group and not yet acknowledged")
    last_delivered_id: str = Field(
        description="Stream id of the newest event the group has taken ('0-0': none yet)"
    )
    last_delivered_at: datetime | None = Field(
        default=None, description="When that event was appended (from its stream id)"
    )


class ConsumerGroupList(BaseDTO):
    groups: list[ConsumerGroupStatus]
    complete: bool = Field(
        default=True, description="False when the service looked at only some of the topics"
    )


__all__ = [
    "AckRequest",
    "AckResponse",
    "ConsumerGroupList",
    "ConsumerGroupStatus",
    "DeadLetter",
    "DeadLetterList",
    "ExtendRequest",
    "ExtendResponse",
    "NackRequest",
    "PublishBatchRequest",
    "PublishBatchResponse",
    "PublishRequest",
    "PublishResponse",
    "ReplayRequest",
    "ReplayResponse",
]
