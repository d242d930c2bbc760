"""Publishes of one identity share a request while another of theirs is in flight.

No publish waits for a timer: when nothing of its identity is being sent, a publish goes
out at once. Publishes made while such a request is in flight queue up and
leave together, as one ``publish-batch``, as soon as it returned. Under load (many
handlers publishing at once) that turns many small requests into a few; alone, nothing
changes.

A combined batch keeps each publish's meaning: the service validates a batch all or
nothing, so when it refuses one (a 4xx: nothing was appended), every publish is sent
again on its own and only the faulty one fails. Any other failure (service unreachable,
5xx, timeout) is every waiting publish's failure, as it would have been alone.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

# Events per combined request (the service takes up to 1000; bodies stay small).
MAX_COALESCED_EVENTS = 100

Headers = tuple[tuple[str, str], ...]
# send(events, headers, single) -> ids; single=True uses the one-event endpoint.
Sender = Callable[[list[dict[str, Any]], dict[str, str], bool], Awaitable[list[str]]]


@dataclass(slots=True)
class _Publish:
    events: list[dict[str, Any]]
    single: bool
    future: asyncio.Future[list[str]] = field(repr=False)


class PublishCoalescer:
    """Queues publishes per identity while one of its requests is in flight.

    Args:
        send: Sends events with the given headers (one publish or one batch) and
            returns their ids in order.
        max_events: Most events per combined request.
    """

    def __init__(self, *, send: Sender, max_events: int = MAX_COALESCED_EVENTS) -> None:
        self._send = send
        self.max_events = max_events
        # Identity -> publishes waiting for the request in flight; present while busy.
        self._lanes: dict[Headers, list[_Publish]] = {}
        self._drains: set[asyncio.Task[None]] = set()

    async def submit(
        self, events: list[dict[str, Any]], headers: dict[str, str], *, single: bool
    ) -> list[str]:
        """Publish ``events`` (one publish, or one batch) and return their ids."""
        key = tuple(sorted(headers.items()))
        lane = self._lanes.get(key)
        if lane is not None:
            future: asyncio.Future[list[str]] = asyncio.get_running_loop().create_future()
            lane.append(_Publish(events, single, future))
            return await future
        self._lanes[key] = []
        try:
            return await self._send(events, headers, single)
        finally:
            self._next(key, headers)

    def _next(self, key: Headers, headers: dict[str, str]) -> None:
        if self._lanes.get(key):
            task = asyncio.create_task(self._drain(key, headers), name="soorma publish")
            self._drains.add(task)
            task.add_done_callback(self._drains.discard)
        else:
            self._lanes.pop(key, None)

    async def _drain(self, key: Headers, headers: dict[str, str]) -> None:
        lane = self._lanes[key]
        group: list[_Publish] = []
        try:
            while lane:
                group = []
                count = 0
                while lane and (not group or count + len(lane[0].events) <= self.max_events):
                    publish = lane.pop(0)
                    if not publish.future.done():  # its publisher may have given up
                        group.append(publish)
                        count += len(publish.events)
                if group:
                    await self._send_group(group, headers)
        finally:
            self._lanes.pop(key, None)
            for publish in [*group, *lane]:  # unresolved only when cancelled
                if not publish.future.done():
                    publish.future.cancel()

    async def _send_group(self, group: list[_Publish], headers: dict[str, str]) -> None:
        if len(group) == 1:
            await self._settle(group[0], headers)
            return
        events = [event for publish in group for event in publish.events]
        try:
            ids = await self._send(events, headers, False)
        except Exception as exc:
            status = getattr(exc, "status_code", None)
            if isinstance(status, int) and 400 <= status < 500:
                # Refused as a whole, nothing appended: find out whose event it was.
                for publish in group:
                    await self._settle(publish, headers)
                return
            for publish in group:
                _resolve(publish, exc)
            return
        start = 0
        for publish in group:
            end = start + len(publish.events)
            _resolve(publish, ids[start:end])
            start = end

    async def _settle(self, publish: _Publish, headers: dict[str, str]) -> None:
        try:
            ids = await self._send(publish.events, headers, publish.single)
        except Exception as exc:
            _resolve(publish, exc)
        else:
            _resolve(publish, ids)


def _resolve(publish: _Publish, outcome: list[str] | BaseException) -> None:
    with contextlib.suppress(asyncio.InvalidStateError):
        if isinstance(outcome, BaseException):
            publish.future.set_exception(outcome)
        else:
            publish.future.set_result(outcome)
