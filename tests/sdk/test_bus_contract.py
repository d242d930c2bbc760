"""BusClient contracts that hold before anything reaches the network.

Explicit topics, envelope inheritance inside handlers.
"""

from collections.abc import AsyncIterator

import httpx
import pytest
import pytest_asyncio

from soorma import BusClient
from soorma._propagation import handling
from soorma.client import Identity, identity_headers, verified_tls
from soorma_common.events import EventEnvelope

pytestmark = pytest.mark.asyncio

# Nothing listens here: every test below must fail before sending anything.
UNREACHABLE = "http://127.0.0.1:9"


@pytest_asyncio.fixture
async def bus() -> AsyncIterator[BusClient]:
    async with httpx.AsyncClient(
        verify=verified_tls(),
    ) as http:
        yield BusClient(base_url=UNREACHABLE, http=http, connect_retries=0)


async def test_publish_without_topic_raises(bus: BusClient):
    with pytest.raises(TypeError, match="topic"):
        await bus.publish(event_type="order.placed", data={})  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="never infers a topic"):
        await bus.publish(None, "order.placed", {})  # type: ignore[arg-type]


async def test_publish_with_invalid_topic_says_what_is_allowed(bus: BusClient):
    with pytest.raises(ValueError, match="not a valid topic name"):
        await bus.publish("Business Facts", "order.placed", {})


async def test_publish_rejects_non_object_data(bus: BusClient):
    with pytest.raises(TypeError, match="mapping"):
        await bus.publish("business-facts", "order.placed", ["not", "an", "object"])  # type: ignore[arg-type]


async def test_request_without_response_event_raises(bus: BusClient):
    with pytest.raises(ValueError, match="requires response_event"):
        await bus.request("research.requested", {"topic": "ai"})
    with pytest.raises(ValueError, match="requires response_event"):
        await bus.request("research.requested", {"topic": "ai"}, response_event=None)


async def test_respond_without_correlation_id_raises(bus: BusClient):
    with pytest.raises(ValueError, match="requires correlation_id"):
        await bus.respond("research.completed", {"findings": []})
    with pytest.raises(ValueError, match="requires correlation_id"):
        await bus.respond("research.completed", {}, correlation_id="")


async def test_call_without_response_event_raises(bus: BusClient):
    with pytest.raises(TypeError):
        await bus.call("greet.requested", {})  # type: ignore[call-arg]


async def test_publish_to_unreachable_service_raises_service_unavailable(bus: BusClient):
    from soorma_common.errors import ServiceUnavailable

    with pytest.raises(ServiceUnavailable, match="cannot reach"):
        await bus.publish("business-facts", "order.placed", {"id": 1})


async def test_root_event_starts_its_own_trace(bus: BusClient):
    event = bus.build_event("business-facts", "order.placed", {"id": 1})
    assert event.trace_id == event.id
    assert event.parent_event_id is None


async def test_event_built_inside_a_handler_inherits_trace_session_and_plan(bus: BusClient):
    handled = EventEnvelope(
        topic="action-requests",
        type="a.requested",
        trace_id="trace-1",
        session_id="s-1",
        plan_id="p-1",
    )
    with handling(handled):
        child = bus.build_event("action-results", "a.completed", {})
        explicit = bus.build_event("action-results", "a.completed", {}, session_id="mine")
    assert (child.trace_id, child.parent_event_id) == ("trace-1", handled.id)
    assert (child.session_id, child.plan_id) == ("s-1", "p-1")
    assert explicit.session_id == "mine"


async def test_handled_event_without_trace_id_lends_its_id_as_trace(bus: BusClient):
    handled = EventEnvelope(topic="business-facts", type="x")
    with handling(handled):
        child = bus.build_event("business-facts", "y", {})
    assert child.trace_id == handled.id


async def test_dev_mode_acts_as_the_handled_events_tenant_and_user():
    identity = Identity(tenant_id="t-own", user_id="u-own")
    assert identity_headers(identity) == {"X-Tenant-ID": "t-own", "X-User-ID": "u-own"}
    handled = EventEnvelope(topic="business-facts", type="x", tenant_id="t-2", user_id="u-2")
    with handling(handled):
        assert identity_headers(identity) == {"X-Tenant-ID": "t-2", "X-User-ID": "u-2"}
        assert identity_headers(identity, tenant_id="t-3")["X-Tenant-ID"] == "t-3"


async def test_jwt_mode_lets_the_token_decide_identity():
    identity = Identity(token="tok")
    handled = EventEnvelope(topic="business-facts", type="x", tenant_id="t-2", user_id="u-2")
    with handling(handled):
        assert identity_headers(identity) == {"Authorization": "Bearer tok"}
