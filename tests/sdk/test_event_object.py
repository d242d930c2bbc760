"""Handlers' event argument: attribute access and the seed's dict-style access."""

from soorma import Event


def test_event_supports_attribute_and_dict_style_access():
    event = Event.from_delivery(
        '{"type": "order.placed", "topic": "business-facts", "data": {"id": 7},'
        ' "correlationId": "c-1"}',
        "business-facts=1-0",
    )
    assert event.data == {"id": 7} == event["data"]
    assert event.get("correlation_id") == "c-1"
    assert event.get("session_id", "none") == "none"
    assert event.get("no_such_field") is None
    assert "data" in event and "nope" not in event
    assert event.delivery_id == "business-facts=1-0"


def test_unknown_key_raises_key_error():
    import pytest

    event = Event(type="x", topic="business-facts")
    with pytest.raises(KeyError):
        event["nope"]
