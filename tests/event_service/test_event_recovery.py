"""Fast recovery and flow control of consumer groups (lease extension, prefetch, consumer resume).

- a stream opened with the consumer id of a dead one resumes its pending deliveries
  at once (no waiting for the visibility timeout);
- ``POST /v1/events/extend`` renews the lease of deliveries still being worked on;
- ``prefetch`` bounds the unacked deliveries in flight on one stream.

The tests that wait for time to pass (a lease running out, or a while in which nothing
may be delivered) run twice: in process on a manual clock (the in-memory log, time
moved forward instead of slept through) and on Redis under uvicorn in real time, as
Redis measures idle times on its own clock.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import pytest_asyncio
from event_sse_client import Frame, SSEStream
from event_stack import Service, make_settings

from event_service import create_app
from soorma.client import verified_tls
from soorma.testing._asgi import Lifespan, StreamingASGITransport
from soorma_common.clock import ManualClock
from testsupport.server import serve

pytestmark = pytest.mark.asyncio

TOPIC = "action-requests"
HOST = "events.soorma.test"
# Real seconds a stream is given, after the clock moved, to show what that set off:
# it is all in this process, and arrives within a few turns of the event loop.
SETTLE = 0.05


@dataclass
class Timed:
    """An event service and the time it runs on: a manual clock, or real time."""

    service: Service
    clock: ManualClock | None = None

    async def passes(self, seconds: float) -> None:
        """Let ``seconds`` go by on the service's clock."""
        if self.clock is None:
            await asyncio.sleep(seconds)
        else:
            await self.clock.advance(seconds)

    async def silent(self, seconds: float, *streams: SSEStream) -> bool:
        """True when none of ``streams`` delivers a message while ``seconds`` go by."""
        if self.clock is not None:
            await self.clock.advance(seconds)
            seconds = SETTLE
        quiet = await asyncio.gather(*(_silent(stream, seconds) for stream in streams))
        return all(quiet)


@pytest.fixture(
    params=[
        "memory",
        # Served by uvicorn (on_redis): the system tier, marked here as the tier's
        # detection cannot see through getfixturevalue.
        pytest.param("redis", marks=[pytest.mark.redis, pytest.mark.system]),
    ]
)
def timed(request: pytest.FixtureRequest) -> Timed:
    """The event service in process on a manual clock (memory), or on Redis in real time."""
    name = "on_a_clock" if request.param == "memory" else "on_redis"
    found: Timed = request.getfixturevalue(name)
    return found


@pytest_asyncio.fixture
async def on_a_clock(request: pytest.FixtureRequest) -> AsyncIterator[Timed]:
    """The event service on the in-memory log and a manual clock, in process."""
    clock = ManualClock()
    settings = make_settings("memory", request)
    app = create_app(settings, clock=clock)
    lifespan = Lifespan(app, name="event-service")
    state = await lifespan.start()
    try:
        transport = StreamingASGITransport({HOST: app}, states={HOST: state})
        async with httpx.AsyncClient(
            transport=transport, base_url=f"http://{HOST}", timeout=15
        ) as client:
            yield Timed(Service(None, client, settings), clock)
    finally:
        await lifespan.stop()


@pytest_asyncio.fixture
async def on_redis(request: pytest.FixtureRequest) -> AsyncIterator[Timed]:
    """The event service on Redis under uvicorn, in real time."""
    settings = make_settings("redis", request)
    async with serve(create_app(settings)) as server:
        async with httpx.AsyncClient(
            verify=verified_tls(), base_url=server.url, timeout=15
        ) as client:
            yield Timed(Service(server, client, settings))


async def _extend(
    service: Service,
    group: str,
    ids: list[str],
    *,
    tenant: str | None = None,
    consumer: str | None = None,
) -> httpx.Response:
    headers = {"X-Tenant-ID": tenant} if tenant else {}
    body: dict[str, Any] = {"group": group, "ids": ids}
    if consumer:
        body["consumer"] = consumer
    return await service.client.post("/v1/events/extend", json=body, headers=headers)


async def _silent(stream: SSEStream, seconds: float) -> bool:
    """True when ``stream`` delivers no message for ``seconds``."""
    try:
        await stream.next(within=seconds)
    except TimeoutError:
        return True
    return False


async def _first_of(a: SSEStream, b: SSEStream) -> tuple[SSEStream, SSEStream, Frame]:
    """(the stream that got the first message, the other one, the message)."""
    tasks = {asyncio.create_task(a.next()): (a, b), asyncio.create_task(b.next()): (b, a)}
    done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    task = next(iter(done))
    got, other = tasks[task]
    return got, other, task.result()


async def test_a_consumer_id_reconnecting_gets_its_pending_deliveries_at_once(
    timed: Timed,
) -> None:
    service = timed.service
    # The visibility timeout is far beyond every wait here: only resuming by consumer
    # id can explain the redelivery.
    group: dict[str, Any] = {"topics": TOPIC, "group": "g", "visibility_timeout": 600}
    async with SSEStream(service.client, consumer="replica-0", **group) as first:
        published = [await service.publish(TOPIC, "job", {"n": n}) for n in range(3)]
        held = [f.id for f in await first.messages(3)]
    # The process died holding three deliveries. Another consumer does not get them
    # (they are not expired) ...
    async with SSEStream(service.client, consumer="replica-1", **group) as other:
        assert await timed.silent(0.5, other)
    # ... the same consumer id, back, gets all three again, oldest first.
    async with SSEStream(service.client, consumer="replica-0", **group) as again:
        frames = await again.messages(3, within=5)
        assert [f.id for f in frames] == held
        assert [f.json()["id"] for f in frames] == [p["event_id"] for p in published]
        # New events still flow after the resumed ones.
        await service.publish(TOPIC, "job", {"n": 3})
        assert (await again.next()).json()["data"] == {"n": 3}
        assert await service.ack("g", [f.id or "" for f in frames]) == 3


async def test_a_new_stream_with_a_consumer_id_supersedes_the_old_one(service: Service) -> None:
    # A restarted agent reconnects before the service noticed its old connection was
    # gone: the old stream must stop taking deliveries for that consumer id, or each
    # one it takes waits out the visibility timeout (issue 9's late takeovers).
    group: dict[str, Any] = {"topics": TOPIC, "group": "g", "visibility_timeout": 600}
    async with SSEStream(service.client, consumer="replica-0", **group) as old:
        await service.publish(TOPIC, "job", {"n": 0})
        held = (await old.next()).id
        async with SSEStream(service.client, consumer="replica-0", **group) as new:
            with pytest.raises(AssertionError, match="stream ended"):
                await old.next(within=5)
            assert (await new.next(within=5)).id == held  # resumed, as before
            for n in range(1, 6):
                await service.publish(TOPIC, "job", {"n": n})
            frames = await new.messages(5, within=5)
            assert [f.json()["data"]["n"] for f in frames] == [1, 2, 3, 4, 5]
            assert await service.ack("g", [held or "", *(f.id or "" for f in frames)]) == 6


async def test_resuming_counts_a_delivery_so_max_deliveries_still_dead_letters(
    timed: Timed,
) -> None:
    service = timed.service
    group: dict[str, Any] = {
        "topics": TOPIC,
        "group": "g",
        "visibility_timeout": 600,
        "max_deliveries": 2,
        "consumer": "crashy",
    }
    async with SSEStream(service.client, **group) as stream:
        await service.publish(TOPIC, "poison")
        await stream.next()  # first delivery; the process dies
    async with SSEStream(service.client, **group) as stream:
        await stream.next(within=5)  # resumed: the second delivery; dies again
    async with SSEStream(service.client, **group) as stream:
        assert await timed.silent(0.5, stream)  # dead-lettered instead of a third
    r = await service.client.get("/v1/events/dlq", params={"topic": TOPIC})
    [dead] = r.json()["events"]
    assert dead["deliveries"] == 2
    assert dead["event"]["type"] == "poison"


async def test_a_consumer_id_of_another_tenant_resumes_nothing(timed: Timed) -> None:
    service = timed.service
    group: dict[str, Any] = {
        "topics": TOPIC,
        "group": "g",
        "visibility_timeout": 600,
        "consumer": "same-name",
    }
    async with SSEStream(service.client, headers={"X-Tenant-ID": "tenant-a"}, **group) as a:
        await service.publish(TOPIC, "secret", tenant="tenant-a")
        await a.next()
    async with SSEStream(service.client, headers={"X-Tenant-ID": "tenant-b"}, **group) as b:
        assert await timed.silent(0.5, b)


async def test_extend_keeps_a_delivery_from_being_redelivered_while_it_is_worked_on(
    timed: Timed,
) -> None:
    service = timed.service
    group: dict[str, Any] = {"topics": TOPIC, "group": "g", "visibility_timeout": 1}
    async with (
        SSEStream(service.client, consumer="one", **group) as one,
        SSEStream(service.client, consumer="two", **group) as two,
    ):
        await service.publish(TOPIC, "job")
        slow, idle, frame = await _first_of(one, two)
        token = frame.id or ""
        # "Work" for 3 visibility timeouts, renewing the lease every third of one.
        for _ in range(9):
            r = await _extend(service, "g", [token])
            assert r.status_code == 200, r.text
            assert r.json() == {"extended": 1}
            # Redelivered to neither consumer (the holder's own stream could claim it too).
            assert await timed.silent(1 / 3, idle, slow)
        # Another tenant naming the delivery renews nothing.
        r = await _extend(service, "g", [token], tenant="other-tenant")
        assert r.json() == {"extended": 0}
        # The worker dies: the lease is no longer renewed, the delivery expires and
        # moves on to the other consumer.
        await slow.close()
        await timed.passes(1)
        again = await idle.next(within=10)
        assert again.id == token
        assert await service.ack("g", [token]) == 1
        # Acked: nothing left to extend.
        assert (await _extend(service, "g", [token])).json() == {"extended": 0}


async def test_extend_renews_only_the_callers_own_deliveries(service: Service) -> None:
    group: dict[str, Any] = {"topics": TOPIC, "group": "g", "visibility_timeout": 600}
    async with SSEStream(service.client, consumer="one", **group) as one:
        await service.publish(TOPIC, "job", {"n": 1})
        mine = (await one.next()).id or ""
    async with SSEStream(service.client, consumer="two", **group) as two:
        await service.publish(TOPIC, "job", {"n": 2})
        theirs = (await two.next()).id or ""
    # Someone else's delivery: 409 naming it and its owner; nothing renewed.
    r = await _extend(service, "g", [mine], consumer="two")
    assert r.status_code == 409, r.text
    error = r.json()["error"]
    assert error["code"] == "conflict"
    assert "held by another consumer" in error["message"] and "'two'" in error["message"]
    assert error["details"] == {"extended": 0, "not_owned": [{"id": mine, "consumer": "one"}]}
    # The owner renews it; without a consumer id anyone still may (older clients).
    r = await _extend(service, "g", [mine], consumer="one")
    assert r.status_code == 200 and r.json() == {"extended": 1}
    assert (await _extend(service, "g", [mine])).json() == {"extended": 1}
    # A batch mixing both: the caller's own is renewed, the answer names the other.
    r = await _extend(service, "g", [mine, theirs], consumer="one")
    assert r.status_code == 409
    assert r.json()["error"]["details"] == {
        "extended": 1,
        "not_owned": [{"id": theirs, "consumer": "two"}],
    }


async def test_extend_validates_its_body_and_skips_nacked_deliveries(service: Service) -> None:
    r = await _extend(service, "g", ["not-a-token"])
    assert r.status_code == 422
    assert "not-a-token" in r.json()["error"]["message"]
    r = await service.client.post("/v1/events/extend", json={"group": "g", "ids": []})
    assert r.status_code == 422
    async with SSEStream(
        service.client, topics=TOPIC, group="g", consumer="c", visibility_timeout=600
    ) as stream:
        await service.publish(TOPIC, "job")
        frame = await stream.next()
        assert await service.nack("g", [frame.id or ""], "retry later") == 1
        # Nacked: it is due for redelivery, renewing it would only delay that.
        again = await stream.next(within=5)
        assert again.id == frame.id
        assert (await _extend(service, "g", [frame.id or ""])).json() == {"extended": 1}


async def test_prefetch_bounds_unacked_deliveries_in_flight(timed: Timed) -> None:
    service = timed.service
    async with SSEStream(
        service.client, topics=TOPIC, group="g", consumer="c", prefetch=3
    ) as stream:
        assert stream.ready is not None and stream.ready.json()["prefetch"] == 3
        await service.publish_batch(
            [{"topic": TOPIC, "type": "job", "data": {"n": n}} for n in range(10)]
        )
        first = await stream.messages(3)
        assert await timed.silent(0.5, stream)
        # Each ack lets one more in.
        got = [f.json()["data"]["n"] for f in first]
        for frame in first:
            assert await service.ack("g", [frame.id or ""]) == 1
            nxt = await stream.next(within=5)
            got.append(nxt.json()["data"]["n"])
            first.append(nxt)
            if len(got) == 10:
                break
        assert sorted(got[:6]) == list(range(6))


async def test_prefetch_is_bounded_and_defaults_to_the_setting(service: Service) -> None:
    for bad in ("0", "1001", "many"):
        r = await service.client.get(
            "/v1/events/stream", params={"topics": TOPIC, "group": "g", "prefetch": bad}
        )
        assert r.status_code == 422, bad
        assert "prefetch" in r.text
    async with SSEStream(service.client, topics=TOPIC, group="g") as stream:
        assert stream.ready is not None
        assert stream.ready.json()["prefetch"] == service.settings.default_prefetch == 32


async def test_a_consumer_acking_one_by_one_under_a_short_timeout_gets_no_redelivery(
    timed: Timed,
) -> None:
    # The case: a group stream used to push up to 500 events per read, so a
    # consumer handling and acking one at a time fell behind a 5 s visibility timeout
    # and most events were redelivered with nothing killed. With the default prefetch
    # only a handful are in flight, each well inside its lease. Here 400 events take
    # the handler over 4 s in all, well past a 3 s lease for anything pushed early.
    service = timed.service
    n = 400
    for start in range(0, n, 200):
        await service.publish_batch(
            [{"topic": TOPIC, "type": "job", "data": {"n": i}} for i in range(start, start + 200)]
        )
    seen: list[int] = []
    async with SSEStream(
        service.client,
        topics=TOPIC,
        group="g",
        consumer="c",
        visibility_timeout=3,
        from_="earliest",
    ) as stream:
        while len(set(seen)) < n:
            frame = await stream.next(within=15)
            seen.append(frame.json()["data"]["n"])
            await timed.passes(0.01)  # the handler's work
            await service.ack("g", [frame.id or ""])
        # Redeliveries queue up behind the first deliveries: collect what follows, and
        # what a lease running out now would bring.
        with contextlib.suppress(TimeoutError):
            while True:
                seen.append(
                    (await stream.next(within=1 if timed.clock is None else SETTLE)).json()["data"][
                        "n"
                    ]
                )
        if timed.clock is not None:
            await timed.passes(3)
            with contextlib.suppress(TimeoutError):
                while True:
                    seen.append((await stream.next(within=SETTLE)).json()["data"]["n"])
    assert len(seen) == n, f"{len(seen) - n} of {n} events redelivered"


@pytest.mark.redis
async def test_acks_through_another_service_replica_free_prefetch_room(
    request: pytest.FixtureRequest,
) -> None:
    settings = make_settings("redis", request)
    async with (
        serve(create_app(settings)) as one,
        serve(create_app(settings)) as two,
        httpx.AsyncClient(verify=verified_tls(), base_url=one.url, timeout=15) as c1,
        httpx.AsyncClient(verify=verified_tls(), base_url=two.url, timeout=15) as c2,
    ):
        s1, s2 = Service(one, c1, settings), Service(two, c2, settings)
        async with SSEStream(c1, topics=TOPIC, group="g", consumer="c", prefetch=2) as stream:
            await s1.publish_batch(
                [{"topic": TOPIC, "type": "job", "data": {"n": n}} for n in range(6)]
            )
            got = []
            for _ in range(3):
                frames = await stream.messages(2)
                assert await _silent(stream, 0.3)
                got += [f.json()["data"]["n"] for f in frames]
                # Acked on the other replica: this one notices by asking Redis.
                assert await s2.ack("g", [f.id or "" for f in frames]) == 2
        assert got == list(range(6))
