"""Handlers' event argument: the envelope's fields as attributes, and its delivery id."""

import pytest

from soorma import Event


def test_event_fields_are_attributes_and_it_knows_its_delivery():
    event = Event.from_delivery(
        '{"type": "order.placed", "topic": "business-facts", "data": {"id": 7},'
        ' "correlationId": "c-1"}',
        "business-facts=1-0",
    )
    assert event.data == {"id": 7}
    assert event.correlation_id == "c-1"
    assert event.session_id is None
    assert event.delivery_id == "business-facts=1-0"
    assert event.to_dict()["data"] == {"id": 7}


def test_an_event_is_not_a_mapping():
    event = Event(type="x", topic="business-facts")
    with pytest.raises(TypeError):
        event["data"]  # type: ignore[index]
    assert not hasattr(event, "get")
