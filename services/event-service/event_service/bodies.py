"""Request bodies of ack, nack, extend and replay, with the id and topic formats OpenAPI declares.

The formats are declared (``pattern``), not enforced by pydantic: the routes' own
parsers check them and answer with messages that say what an id looks like.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from event_service.ids import DELIVERY_ID_PATTERN, STREAM_ID_PATTERN
from soorma_common.bus import AckRequest, ExtendRequest, NackRequest, ReplayRequest
from soorma_common.events import TOPIC_PATTERN

DeliveryId = Annotated[
    str,
    Field(
        description="A delivery's id as sent in the SSE 'id:' line: '<topic>=<stream id>'",
        json_schema_extra={"pattern": DELIVERY_ID_PATTERN},
    ),
]
StreamId = Annotated[
    str,
    Field(
        description="A dead letter's id in the dead-letter topic: '<milliseconds>-<sequence>'",
        json_schema_extra={"pattern": STREAM_ID_PATTERN},
    ),
]
TOPIC = {"pattern": TOPIC_PATTERN.pattern}


class AckBody(AckRequest):
    """Body of ``POST /v1/events/ack``."""

    ids: list[DeliveryId] = Field(min_length=1, max_length=1000)


class NackBody(NackRequest):
    """Body of ``POST /v1/events/nack``."""

    ids: list[DeliveryId] = Field(min_length=1, max_length=1000)


class ExtendBody(ExtendRequest):
    """Body of ``POST /v1/events/extend``."""

    ids: list[DeliveryId] = Field(min_length=1, max_length=1000)
    running: list[DeliveryId] = Field(default_factory=list, max_length=1000)


class ReplayBody(ReplayRequest):
    """Body of ``POST /v1/events/dlq/replay``."""

    topic: str = Field(description="The live topic T (its DLQ is T.dlq)", json_schema_extra=TOPIC)
    ids: list[StreamId] = Field(min_length=1, max_length=1000)
