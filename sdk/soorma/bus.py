"""BusClient: publish to and subscribe from the event service.

No topic inference: :meth:`BusClient.publish` needs an explicit topic;
:meth:`~BusClient.request`, :meth:`~BusClient.respond` and :meth:`~BusClient.announce`
are the conventional shortcuts for ``action-requests``, ``action-results`` and
``business-facts``.

Inside a handler every publish inherits the handled event's ``trace_id`` (or its id when
it has none), ``parent_event_id`` (its id), ``session_id`` and ``plan_id``, and acts as its
tenant/user, unless given explicitly. Its W3C ``traceparent``/``tracestate`` come from the
publish span when tracing is on, else from the handled event (docs/tracing.md).

(Over 400 lines: ``BusClient`` is one public surface — publish, batch, call/request/respond
and subscribe share the envelope-building and inheritance rules above; the subscription
and wire parts already live in :mod:`soorma.subscription` and :mod:`soorma._sse`.)
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from soorma import _tracing
from soorma._coalesce import PublishCoalescer
from soorma._names import check_event_type, check_topic
from soorma._propagation import current_event
from soorma._sse import DEFAULT_HEARTBEAT_TIMEOUT, DEFAULT_MAX_BACKOFF
from soorma.client import ServiceClient
from soorma.event import Event
from soorma.subscription import DEFAULT_BUFFER, STREAM_PATH, Subscription, stream_params
from soorma_common import tracing as otel
from soorma_common.bus import ConsumerGroupList
from soorma_common.errors import ServiceUnavailable
from soorma_common.events import (
    ACTION_REQUESTS,
    ACTION_RESULTS,
    BUSINESS_FACTS,
    EventEnvelope,
    new_event_id,
)

DEFAULT_CALL_TIMEOUT = 30.0
DEFAULT_SOURCE = "soorma-sdk"

# Checks an envelope before it is sent (raises to refuse it); see BusClient.payload_validator.
PayloadValidator = Callable[[EventEnvelope], Awaitable[None]]
# Why an event type got no answer, in words (None: nothing to add); see BusClient.call.
ConsumersHint = Callable[[str], Awaitable[str | None]]
# Longest wait for the registry's hint once a call() has already timed out.
HINT_TIMEOUT = 2.0


def _as_tenant(body: dict[str, Any], tenant_id: str | None) -> dict[str, Any]:
    """``_send`` options for an ack/nack ``body`` on behalf of ``tenant_id`` (``*``: tap)."""
    if tenant_id == "*":
        return {"json": {**body, "tenant": "*"}}
    return {"json": body, "tenant_id": tenant_id}


class BusClient(ServiceClient):
    """Client of the event service (publish, subscribe, ack/nack).

    Build it through :meth:`soorma.context.PlatformContext.from_env` or directly::

        bus = BusClient(base_url="http://127.0.0.1:8082", http=httpx.AsyncClient())

    Args:
        source: ``source`` attribute of the events this client publishes.
        heartbeat_timeout: Seconds of silence after which a stream is reconnected.
        max_backoff: Longest delay between stream reconnect attempts.
        payload_validator: Awaited with every envelope before it is published; raising
            refuses the publish. ``PlatformContext.from_env`` installs the registry's
            schema check for ``action-requests`` (other topics are not checked).
        consumers_hint: Awaited with an event type that got no answer in
            :meth:`call`; its words end the ``TimeoutError``. ``PlatformContext.from_env``
            installs the registry's (who consumes it, or "did you mean ...").
        coalesce: Publishes made while another of the same identity is in flight
            leave together in one ``publish-batch`` once it returned (see
            :mod:`soorma._coalesce`); ``False`` sends each publish on its own.
        **kwargs: See :class:`soorma.client.ServiceClient`.
    """

    def __init__(
        self,
        *,
        source: str = DEFAULT_SOURCE,
        heartbeat_timeout: float = DEFAULT_HEARTBEAT_TIMEOUT,
        max_backoff: float = DEFAULT_MAX_BACKOFF,
        payload_validator: PayloadValidator | None = None,
        consumers_hint: ConsumersHint | None = None,
        coalesce: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.consumers_hint = consumers_hint
        self.source = source
        self.heartbeat_timeout = heartbeat_timeout
        self.max_backoff = max_backoff
        self.payload_validator = payload_validator
        self.coalesce = coalesce
        self._coalescer = PublishCoalescer(send=self._post_events)
        # Consumer id of this client's streams, by group (None: several), sent with
        # lease renewals so the service renews only this consumer's own deliveries.
        self._consumers: dict[str, str | None] = {}

    # -- building events -------------------------------------------------------------

    def build_event(
        self,
        topic: str,
        event_type: str,
        data: Mapping[str, Any] | None = None,
        *,
        correlation_id: str | None = None,
        response_event: str | None = None,
        response_topic: str | None = None,
        session_id: str | None = None,
        plan_id: str | None = None,
        goal_id: str | None = None,
        subject: str | None = None,
        trace_id: str | None = None,
        parent_event_id: str | None = None,
        payload_schema_name: str | None = None,
        event_id: str | None = None,
        source: str | None = None,
    ) -> EventEnvelope:
        """Build (without sending) the envelope :meth:`publish` would send.

        Useful for :meth:`publish_batch`. Context from the event being handled is
        applied here.

        Args:
            topic: Topic to publish on. Required: there is no inference.
            event_type: Event type, e.g. ``"order.placed"``.
            data: JSON object payload.
            correlation_id: Ties responses to a request.
            response_event: Event type the responder should answer with.
            response_topic: Topic for the answer (service default ``action-results``).
            session_id: Session the event belongs to (inherited in handlers).
            plan_id: Plan the event belongs to (inherited in handlers).
            goal_id: Goal the event serves.
            subject: CloudEvents ``subject``.
            trace_id: Overrides the inherited trace id.
            parent_event_id: Overrides the inherited parent id.
            payload_schema_name: Registered schema the payload follows.
            event_id: Event id (a new UUID when omitted).
            source: Overrides the client's ``source``.

        Raises:
            TypeError: ``topic`` missing or ``data`` not a mapping.
            ValueError: invalid topic, response topic or event type.
        """
        check_topic(topic)
        check_event_type(event_type)
        if response_topic is not None:
            check_topic(response_topic, what="response_topic")
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            raise TypeError(f"data must be a mapping (JSON object), got {type(data).__name__}")
        event_id = event_id or new_event_id()
        fields: dict[str, Any] = {
            "id": event_id,
            "source": source or self.source,
            "type": event_type,
            "topic": topic,
            "data": dict(data),
            "subject": subject,
            "correlation_id": correlation_id,
            "response_event": response_event,
            "session_id": session_id,
            "plan_id": plan_id,
            "goal_id": goal_id,
            "trace_id": trace_id,
            "parent_event_id": parent_event_id,
            "payload_schema_name": payload_schema_name,
        }
        if response_topic is not None:
            fields["response_topic"] = response_topic
        return self.inherit(EventEnvelope(**fields))

    def inherit(self, envelope: EventEnvelope) -> EventEnvelope:
        """Fill ``envelope``'s unset context fields from the event being handled.

        Outside a handler an event starts its own trace (``trace_id`` = its id; with
        tracing on, the publish replaces it with the span's W3C trace id).
        """
        parent = current_event()
        update: dict[str, Any] = {}
        if parent is not None:
            if envelope.trace_id is None:
                update["trace_id"] = parent.trace_id or parent.id
            if envelope.parent_event_id is None:
                update["parent_event_id"] = parent.id
            if envelope.session_id is None and parent.session_id is not None:
                update["session_id"] = parent.session_id
            if envelope.plan_id is None and parent.plan_id is not None:
                update["plan_id"] = parent.plan_id
            if envelope.traceparent is None and parent.traceparent is not None:
                # Untraced here: pass the W3C context on, so the trace is not cut.
                update["traceparent"] = parent.traceparent
                update["tracestate"] = parent.tracestate
        elif envelope.trace_id is None:
            update["trace_id"] = envelope.id
        return envelope.model_copy(update=update) if update else envelope

    # -- publishing ------------------------------------------------------------------

    async def publish(
        self,
        topic: str,
        event_type: str,
        data: Mapping[str, Any] | None = None,
        *,
        tenant_id: str | None = None,
        user_id: str | None = None,
        **fields: Any,
    ) -> str:
        """Publish one event on an explicit topic.

        Args:
            topic: Topic to publish on. Required: there is no inference.
            event_type: Event type, e.g. ``"order.placed"``.
            data: JSON object payload.
            tenant_id: Act as this tenant (dev mode).
            user_id: Act as this user (dev mode).
            **fields: The envelope's other fields, exactly as :meth:`build_event` takes
                them (``correlation_id``, ``response_event``, ``response_topic``,
                ``session_id``, ``plan_id``, ``goal_id``, ``subject``, ``trace_id``,
                ``parent_event_id``, ``payload_schema_name``, ``event_id``, ``source``).

        Returns:
            The event id.

        Raises:
            TypeError: ``topic`` missing, or an option :meth:`build_event` does not take.
            ValueError: invalid topic or event type.
            SoormaError: the service rejected the event (e.g. ``PayloadTooLarge``).
        """
        # One list of envelope options, kept by build_event: publish only adds who sends.
        envelope = self.build_event(topic, event_type, data, **fields)
        return await self.publish_event(envelope, tenant_id=tenant_id, user_id=user_id)

    async def publish_event(
        self,
        envelope: EventEnvelope,
        *,
        tenant_id: str | None = None,
        user_id: str | None = None,
    ) -> str:
        """Publish a prepared envelope (context inherited as in :meth:`publish`)."""
        envelope = self.inherit(envelope)
        if otel.ENABLED:
            return (
                await _tracing.publish(
                    self._dispatch,
                    [envelope],
                    tenant_id,
                    user_id,
                    single=True,
                    validate=self.payload_validator,
                )
            )[0]
        if self.payload_validator is not None:
            await self.payload_validator(envelope)
        events = [envelope.model_dump(mode="json", exclude_none=True)]
        return (await self._dispatch(events, tenant_id, user_id, single=True))[0]

    async def publish_batch(
        self,
        events: Sequence[EventEnvelope],
        *,
        tenant_id: str | None = None,
        user_id: str | None = None,
    ) -> list[str]:
        """Publish several events in one request (all-or-nothing validation).

        Build the envelopes with :meth:`build_event`.

        Returns:
            The event ids, in order.
        """
        if not events:
            return []
        if otel.ENABLED:
            traced = [self.inherit(e) for e in events]
            return await _tracing.publish(
                self._dispatch,
                traced,
                tenant_id,
                user_id,
                single=False,
                validate=self.payload_validator,
            )
        if self.payload_validator is not None:
            for envelope in events:
                await self.payload_validator(envelope)
        dumped = [self.inherit(e).model_dump(mode="json", exclude_none=True) for e in events]
        return await self._dispatch(dumped, tenant_id, user_id, single=False)

    async def _dispatch(
        self,
        events: list[dict[str, Any]],
        tenant_id: str | None,
        user_id: str | None,
        *,
        single: bool,
    ) -> list[str]:
        """Send as the identity: straight away, or through the coalescer when it is on."""
        headers = self.headers(tenant_id=tenant_id, user_id=user_id)
        if not self.coalesce:
            return await self._post_events(events, headers, single)
        return await self._coalescer.submit(events, headers, single=single)

    async def _post_events(
        self, events: list[dict[str, Any]], headers: dict[str, str], single: bool
    ) -> list[str]:
        """One publish (``single``) or one batch, as the given identity; the ids."""
        if single:
            result = await self._send(
                "POST", "/v1/events/publish", json={"event": events[0]}, identity=headers
            )
            return [str(result["event_id"])]
        result = await self._send(
            "POST", "/v1/events/publish-batch", json={"events": events}, identity=headers
        )
        return [str(item["event_id"]) for item in result["results"]]

    async def request(
        self,
        event_type: str,
        data: Mapping[str, Any] | None = None,
        response_event: str | None = None,
        *,
        correlation_id: str | None = None,
        response_topic: str = ACTION_RESULTS,
        topic: str = ACTION_REQUESTS,
        **kwargs: Any,
    ) -> str:
        """Publish an action request; the responder answers with ``response_event``.

        Args:
            event_type: Request event type, e.g. ``"research.requested"``.
            data: Request payload.
            response_event: Event type the responder must answer with. Required.
            correlation_id: Correlates the answer; defaults to the request's event id.
            response_topic: Where the answer goes (``action-results``).
            topic: Where the request goes (``action-requests``).
            **kwargs: Further :meth:`publish` options.

        Returns:
            The request's event id.

        Raises:
            ValueError: ``response_event`` missing.
        """
        if not response_event:
            raise ValueError(
                "request() requires response_event: the event type the responder should "
                f"answer {event_type!r} with, e.g. response_event='{event_type}.completed'"
            )
        check_event_type(response_event, what="response_event")
        event_id = kwargs.pop("event_id", None) or new_event_id()
        return await self.publish(
            topic,
            event_type,
            data,
            correlation_id=correlation_id or event_id,
            response_event=response_event,
            response_topic=response_topic,
            event_id=event_id,
            **kwargs,
        )

    async def respond(
        self,
        event_type: str,
        data: Mapping[str, Any] | None = None,
        correlation_id: str | None = None,
        topic: str = ACTION_RESULTS,
        **kwargs: Any,
    ) -> str:
        """Publish the answer to a request.

        Args:
            event_type: The request's ``response_event``.
            data: Answer payload.
            correlation_id: The request's ``correlation_id``. Required.
            topic: The request's ``response_topic`` (``action-results``).
            **kwargs: Further :meth:`publish` options.

        Raises:
            ValueError: ``correlation_id`` missing.
        """
        if not correlation_id:
            raise ValueError(
                "respond() requires correlation_id: pass the request's correlation_id so "
                "the caller can match this answer to its request"
            )
        return await self.publish(topic, event_type, data, correlation_id=correlation_id, **kwargs)

    async def announce(
        self,
        event_type: str,
        data: Mapping[str, Any] | None = None,
        *,
        correlation_id: str | None = None,
        topic: str = BUSINESS_FACTS,
        **kwargs: Any,
    ) -> str:
        """Publish a business fact (no answer expected) on ``business-facts``."""
        return await self.publish(topic, event_type, data, correlation_id=correlation_id, **kwargs)

    async def call(
        self,
        event_type: str,
        data: Mapping[str, Any] | None = None,
        *,
        response_event: str,
        timeout: float = DEFAULT_CALL_TIMEOUT,  # noqa: ASYNC109 - call()'s documented API
        topic: str = ACTION_REQUESTS,
        response_topic: str = ACTION_RESULTS,
        correlation_id: str | None = None,
        **kwargs: Any,
    ) -> Event:
        """Send a request and wait for its correlated answer.

        Subscribes to ``response_topic`` (broadcast, filtered on ``response_event``)
        *before* publishing, so a fast answer cannot be missed.

        Returns:
            The answer event, also when it says the request failed (``success:
            false``): ``answer.raise_for_error()`` raises that as ``HandlerFailed``,
            with the handler's message and exception class.

        Raises:
            ServiceUnavailable: the event service cannot be reached (its URL named);
                nothing was published.
            TimeoutError: no answer within ``timeout`` seconds; says whether any live
                agent consumes ``event_type`` and, when none does, the consumed event
                names closest to it (``consumers_hint``).
        """
        if not response_event:
            raise ValueError("call() requires response_event")
        correlation_id = correlation_id or str(uuid.uuid4())
        deadline = asyncio.get_running_loop().time() + timeout
        async with self.subscribe([response_topic], event_types=[response_event]) as sub:
            try:
                await sub.wait_ready(timeout, fail_fast=True)
            except (TimeoutError, ServiceUnavailable) as exc:
                # Nothing was published: the platform, not an agent, is what is missing.
                raise ServiceUnavailable(
                    f"{exc}; {event_type!r} was not sent", details={"url": self.base_url}
                ) from None
            await self.request(
                event_type,
                data,
                response_event,
                correlation_id=correlation_id,
                response_topic=response_topic,
                topic=topic,
                **kwargs,
            )
            try:
                remaining = max(deadline - asyncio.get_running_loop().time(), 0.0)
                async with asyncio.timeout(remaining):
                    async for event in sub:
                        if event.correlation_id == correlation_id:
                            return event
            except TimeoutError:
                hint = await self._no_answer_hint(event_type)
                raise TimeoutError(
                    f"no {response_event!r} answer to {event_type!r} within {timeout:g} s "
                    f"(correlation_id={correlation_id}); {hint}"
                ) from None
        raise TimeoutError(f"stream closed before {response_event!r} arrived")

    async def _no_answer_hint(self, event_type: str) -> str:
        generic = f"is an agent handling {event_type!r}?"
        if self.consumers_hint is None:
            return generic
        try:
            async with asyncio.timeout(HINT_TIMEOUT):
                return await self.consumers_hint(event_type) or generic
        except Exception:  # the hint is a courtesy: without the registry, the plain one
            return generic

    # -- subscribing -----------------------------------------------------------------

    def subscribe(
        self,
        topics: str | Sequence[str],
        *,
        event_types: Sequence[str] | None = None,
        group: str | None = None,
        consumer: str | None = None,
        start_from: str | None = None,
        visibility_timeout: float | None = None,
        max_deliveries: int | None = None,
        last_event_id: str | None = None,
        buffer: int = DEFAULT_BUFFER,
        prefetch: int | None = None,
        tenant_id: str | None = None,
        count_started: bool = False,
    ) -> Subscription:
        """Open an SSE stream (use as ``async with``; iterate for events).

        Args:
            topics: One topic or several.
            event_types: Glob patterns filtered by the service (``"order.*"``).
            group: Consumer group: replicas sharing a group share the work and must
                :meth:`ack` each event (``event.delivery_id``). ``None`` = broadcast.
            consumer: This consumer's id within the group.
            start_from: ``"earliest"`` to start a new group at the beginning.
            visibility_timeout: Seconds before an unacked event is redelivered.
            max_deliveries: Deliveries before an event goes to the dead-letter topic.
            last_event_id: Resume token (broadcast) from a previous subscription.
            buffer: Events read ahead of the consumer.
            prefetch: Group streams: most deliveries unacked at once (the service
                sends no more until some are acked or nacked); ``None`` = the
                service's default (32).
            tenant_id: Act as this tenant; ``"*"`` reads every tenant's tap topics
                (platform services only, ``SOORMA_SERVICE_ROLE=service``).
            count_started: Group streams: only deliveries reported running (the
                ``running`` list of :meth:`extend`, or nacked) count towards
                ``max_deliveries``; others only towards the service's hard cap (a
                multiple of it). Only for callers that report every handler start.
        """
        topic_list = [topics] if isinstance(topics, str) else list(topics)
        if not topic_list:
            raise ValueError("subscribe() needs at least one topic")
        for topic in topic_list:
            check_topic(topic)
        params = stream_params(
            topics=topic_list,
            event_types=event_types,
            group=group,
            consumer=consumer,
            start_from=start_from,
            visibility_timeout=visibility_timeout,
            max_deliveries=max_deliveries,
            prefetch=prefetch,
            count_started=count_started,
        )
        if tenant_id == "*":
            params["tenant"], tenant_id = "*", None
        if group and consumer:
            known = self._consumers.setdefault(group, consumer)
            if known != consumer:
                self._consumers[group] = None
        # Identity is resolved now, so a stream opened inside a handler keeps the
        # handled event's tenant across reconnects made from the background task.
        headers = self.headers(tenant_id=tenant_id)
        return Subscription(
            http=self.http,
            url=self.url(STREAM_PATH),
            params=params,
            headers=lambda: headers,
            last_event_id=last_event_id,
            heartbeat_timeout=self.heartbeat_timeout,
            max_backoff=self.max_backoff,
            buffer=buffer,
        )

    async def ack(
        self, group: str, ids: str | Sequence[str], *, tenant_id: str | None = None
    ) -> int:
        """Acknowledge deliveries of a consumer group (their ``delivery_id`` values).

        ``tenant_id``: the tenant the stream was opened as (``"*"``: the tap).
        """
        id_list = [ids] if isinstance(ids, str) else list(ids)
        body: dict[str, Any] = {"group": group, "ids": id_list}
        result = await self._send("POST", "/v1/events/ack", **_as_tenant(body, tenant_id))
        return int((result or {}).get("count", 0))

    async def extend(
        self,
        group: str,
        ids: str | Sequence[str],
        *,
        tenant_id: str | None = None,
        consumer: str | None = None,
        running: Sequence[str] = (),
    ) -> int:
        """Renew the lease (visibility timeout) of deliveries still being handled.

        ``tenant_id``: the tenant the stream was opened as (``"*"``: the tap).
        ``consumer``: the consumer renewing (default: the one this client's stream of
        ``group`` was opened with); only its own deliveries are renewed.
        ``running``: those of ``ids`` whose handler has started (see ``count_started``
        of :meth:`subscribe`).

        Returns:
            How many were renewed: deliveries already acked, nacked or dead-lettered
            are not.

        Raises:
            Conflict: some of ``ids`` are held by another consumer of the group (taken
                over after this one's lease expired); ``details["not_owned"]`` names
                them. The caller's own deliveries among ``ids`` were renewed.
        """
        id_list = [ids] if isinstance(ids, str) else list(ids)
        body: dict[str, Any] = {"group": group, "ids": id_list}
        consumer = consumer or self._consumers.get(group)
        if consumer:
            body["consumer"] = consumer
        if running:
            body["running"] = list(running)
        result = await self._send("POST", "/v1/events/extend", **_as_tenant(body, tenant_id))
        return int((result or {}).get("extended", 0))

    async def nack(
        self,
        group: str,
        ids: str | Sequence[str],
        reason: str = "nacked",
        *,
        tenant_id: str | None = None,
    ) -> int:
        """Give deliveries back for immediate redelivery, recording ``reason``."""
        id_list = [ids] if isinstance(ids, str) else list(ids)
        body: dict[str, Any] = {"group": group, "ids": id_list, "reason": reason[:4096]}
        result = await self._send("POST", "/v1/events/nack", **_as_tenant(body, tenant_id))
        return int((result or {}).get("count", 0))

    async def consumer_groups(
        self, *, group: str | None = None, topics: Sequence[str] | None = None
    ) -> ConsumerGroupList:
        """How far the tenant's consumer groups are behind, per topic.

        Each entry has ``lag`` (events not yet delivered to the group) and ``pending``
        (delivered, not yet acknowledged). An agent's group is its name.

        Args:
            group: Only this group.
            topics: Only these topics (default: every topic of the tenant).
        """
        params: dict[str, str] = {}
        if group:
            params["group"] = group
        if topics:
            params["topics"] = ",".join(topics)
        result = await self._send("GET", "/v1/events/groups", params=params)
        return ConsumerGroupList.model_validate(result)


__all__ = ["DEFAULT_CALL_TIMEOUT", "BusClient", "PayloadValidator"]
